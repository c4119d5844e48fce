"""Rendering a job graph into an Airflow DAG: one TaskGroup per failover region, one task per subtask.

Rules:

* **Task ids** are ``<step>.<index>`` (:func:`task_id_of`), for every parallelism, and independent of the region
  numbering (groups use ``prefix_group_id=False``), so changing the graph elsewhere never renames a task. Step ids
  never contain ``.``, so :func:`subtask_of` inverts the mapping exactly and answers ``None`` for other tasks.
* **Groups** are the regions of :func:`~airflow_region_failover.graph.regions.compute_regions`, ids ``r0, r1, …``
  in the deterministic order of that function; the tooltip lists the steps and why they form one region, the
  group's ``doc_md`` lists the subtasks and the exchanges that tie them together.
* **Dependencies** mirror the edges at subtask level: consumer subtask ``j`` depends on exactly the producer
  subtasks whose partitions it reads (POINTWISE / ALL_TO_ALL, :mod:`~airflow_region_failover.graph.subtasks`).
* **The job document** (graph JSON + failover/restart options) is stored in the DAG param :data:`JOB_PARAM`, which
  survives DAG serialization, so the scheduler (serialized DAG) and every worker (parsed DAG) read the same job
  with :func:`job_of`. It is added after the tasks are built (operators copy DAG params when they are created).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from airflow.sdk import DAG, BaseOperator, Param, TaskGroup

from airflow_region_failover.graph import jsonformat
from airflow_region_failover.graph.errors import GraphError
from airflow_region_failover.graph.ids import SubtaskId
from airflow_region_failover.graph.model import Edge, Exchange, JobGraph
from airflow_region_failover.graph.regions import Region, Regions, compute_regions
from airflow_region_failover.graph.subtasks import partition_groups

#: The DAG param holding the job document ``{"format": 1, "graph": {...}, "options": {...}}``.
JOB_PARAM = "region_failover_job"
JOB_DOCUMENT_FORMAT = 1
_TASK_ID = re.compile(r"([A-Za-z0-9_][A-Za-z0-9_-]*)\.(0|[1-9][0-9]*)\Z")
_MAX_LISTED = 40

OperatorFactory = Callable[[SubtaskId, TaskGroup], BaseOperator]


def task_id_of(subtask: SubtaskId) -> str:
    """The Airflow task id of ``subtask``: ``<step>.<index>`` (e.g. ``clean.0``)."""
    return f"{subtask.step}.{subtask.index}"


def subtask_of(task_id: str) -> SubtaskId | None:
    """The subtask a task id names (inverse of :func:`task_id_of`), or ``None`` for any other task id."""
    match = _TASK_ID.match(task_id)
    if match is None:
        return None
    return SubtaskId(match.group(1), int(match.group(2)))


@dataclass(frozen=True)
class JobSpec:
    """What the run-time loop needs about a rendered job: its graph and its failover/restart options."""

    graph: JobGraph
    options: Mapping[str, str]

    def to_document(self) -> dict[str, Any]:
        """The JSON document stored in the DAG param :data:`JOB_PARAM`."""
        return {"format": JOB_DOCUMENT_FORMAT, "graph": jsonformat.to_dict(self.graph),
                "options": dict(sorted(self.options.items()))}

    @classmethod
    def from_document(cls, document: object) -> JobSpec:
        """Parse a job document; :class:`GraphError` if it is not one."""
        if not isinstance(document, dict) or document.get("format") != JOB_DOCUMENT_FORMAT:
            raise GraphError(f"DAG param {JOB_PARAM!r} is not a region-failover job document (format "
                             f"{JOB_DOCUMENT_FORMAT}); re-render the DAG with this provider version")
        options = document.get("options", {})
        if not isinstance(options, dict):
            raise GraphError(f"DAG param {JOB_PARAM!r}: 'options' must be an object")
        return cls(jsonformat.from_dict(document.get("graph")), {str(k): str(v) for k, v in options.items()})


@dataclass(frozen=True)
class RenderedJob:
    """The result of :func:`render_job`: the job, its regions, and the groups and tasks built for them."""

    spec: JobSpec
    regions: Regions
    groups: Mapping[str, TaskGroup] = field(repr=False)
    tasks: Mapping[SubtaskId, BaseOperator] = field(repr=False)

    def task(self, subtask: SubtaskId | str) -> BaseOperator:
        """The task of ``subtask`` (a :class:`SubtaskId` or ``"step#i"``)."""
        key = SubtaskId.parse(subtask) if isinstance(subtask, str) else subtask
        return self.tasks[key]


def job_of(dag: Any) -> JobSpec | None:
    """The job rendered into ``dag`` — a parsed ``DAG`` (worker) or a ``SerializedDAG`` (scheduler) — or ``None``.

    A parsed DAG keeps the decoded spec on the object (no JSON decoding per call); a serialized DAG is read from
    the DAG-level param :data:`JOB_PARAM` (the DAG's own default, never a run's ``conf`` override).
    """
    cached = getattr(dag, "_region_failover_spec", None)
    if isinstance(cached, JobSpec):
        return cached
    params = getattr(dag, "params", None)
    if params is None or JOB_PARAM not in params:
        return None
    return JobSpec.from_document(params[JOB_PARAM])


def render_job(dag: DAG, spec: JobSpec, make_task: OperatorFactory) -> RenderedJob:
    """Build one TaskGroup per region and one task per subtask (``make_task``) in ``dag``; wire the edges."""
    if job_of(dag) is not None:
        raise GraphError(f"DAG {dag.dag_id!r} already holds a region-failover job; render one job per DAG")
    regions = compute_regions(spec.graph)
    inputs = inputs_by_step(spec.graph)
    groups: dict[str, TaskGroup] = {}
    tasks: dict[SubtaskId, BaseOperator] = {}
    for region in regions.regions:
        group = _group(dag, region, inputs)
        groups[region.id] = group
        for subtask in region.subtasks:
            tasks[subtask] = make_task(subtask, group)
    _wire(spec.graph, tasks)
    dag.params[JOB_PARAM] = Param(
        spec.to_document(), type="object", title="Region failover job (generated)",
        section="Region failover (generated, read-only)",
        description="Job graph and failover/restart options rendered by airflow-provider-region-failover. "
        "Read-only: changing it in a run's conf has no effect.",
    )
    dag._region_failover_spec = spec
    return RenderedJob(spec, regions, groups, tasks)


def inputs_by_step(graph: JobGraph) -> dict[str, list[Edge]]:
    """Every step's input edges, in declaration order (built once: looking them up per region is O(edges))."""
    index: dict[str, list[Edge]] = {s.id: [] for s in graph.steps}
    for edge in graph.edges:
        index[edge.target].append(edge)
    return index


def _group(dag: DAG, region: Region, inputs: Mapping[str, list[Edge]]) -> TaskGroup:
    return TaskGroup(
        group_id=region.id, prefix_group_id=False, dag=dag, parent_group=dag.task_group,
        tooltip=region_tooltip(region, inputs), doc_md=region_doc(region, inputs), add_suffix_on_collision=False,
    )


def _wire(graph: JobGraph, tasks: Mapping[SubtaskId, BaseOperator]) -> None:
    """Consumer subtask ``j`` depends on exactly the producer subtasks whose partitions it reads."""
    for edge in graph.edges:
        producers = graph.step(edge.source).parallelism
        consumers = graph.step(edge.target).parallelism
        for group in partition_groups(edge, producers, consumers):
            upstream = [tasks[SubtaskId(edge.source, p)] for p in group.producers]
            for c in group.consumers:
                tasks[SubtaskId(edge.target, c)].set_upstream(upstream)


def _region_inputs(region: Region, inputs: Mapping[str, list[Edge]]) -> list[Edge]:
    return [e for step in region.steps for e in inputs[step]]


def region_reason(region: Region, inputs: Mapping[str, list[Edge]]) -> str:
    """Why ``region``'s subtasks restart together, in one sentence (``inputs``: :func:`inputs_by_step`)."""
    steps = set(region.steps)
    pipelined = [e for e in _region_inputs(region, inputs) if e.exchange is Exchange.PIPELINED and e.source in steps]
    if len(region.subtasks) == 1:
        return "a single subtask: every result it reads or writes is BLOCKING (persisted)"
    if pipelined:
        links = ", ".join(f"{e.source} -> {e.target} ({e.distribution.value})" for e in pipelined)
        return f"joined by PIPELINED exchanges, whose data is lost on failure: {links}"
    return "merged because BLOCKING exchanges form a cycle between their regions"


def region_tooltip(region: Region, inputs: Mapping[str, list[Edge]]) -> str:
    """The group's tooltip: region id, steps, subtask count and why they restart together."""
    count = len(region.subtasks)
    return (f"failover region {region.id}: steps {', '.join(region.steps)} ({count} subtask"
            f"{'s' if count != 1 else ''}); restarted as one unit because it is "
            f"{region_reason(region, inputs)}")


def region_doc(region: Region, inputs: Mapping[str, list[Edge]]) -> str:
    """The group's ``doc_md``: the subtasks, the reason, and the results read from other regions."""
    listed = ", ".join(f"`{s}`" for s in region.subtasks[:_MAX_LISTED])
    more = f" and {len(region.subtasks) - _MAX_LISTED} more" if len(region.subtasks) > _MAX_LISTED else ""
    steps = set(region.steps)
    outside = sorted({f"`{e.result}` ({e.exchange.value}, {e.distribution.value}) from `{e.source}`"
                      for e in _region_inputs(region, inputs) if e.source not in steps})
    lines = [
        f"### Failover region `{region.id}`",
        f"Subtasks: {listed}{more}.",
        f"Restarted as one unit because it is {region_reason(region, inputs)}.",
        "Inputs from other regions: " + ("; ".join(outside) if outside else "none") + ".",
    ]
    return "\n\n".join(lines)

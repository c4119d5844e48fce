"""Rendering a job graph into an Airflow DAG: one TaskGroup per failover region, one task per chain subtask.

Rules:

* **Chains** (:mod:`~airflow_region_failover.graph.chains`): steps joined by chainable PIPELINED POINTWISE edges
  of equal parallelism run as one task per chain subtask (subtask ``i`` of every step of the chain, in one Spark
  session, DataFrames passed in memory). A step on no chain is a chain of one: one task per subtask.
* **Fused regions** (:mod:`~airflow_region_failover.graph.fusion`): a region the job's plan fuses runs as one task
  holding every subtask of it, alone in its group.
* **Task ids** are ``<step>.<index>``, or ``<s1>.<s2>...<sk>.<index>`` for a chain — the id names its steps
  (:class:`~airflow_region_failover.naming.TaskNames`) — independent of the region numbering (groups use
  ``prefix_group_id=False``), so changing the graph elsewhere never renames a task. A chain never crosses a
  region boundary, so each chain task lies in its region's group.
* **Groups** are the regions of :func:`~airflow_region_failover.graph.regions.compute_regions`, ids ``r0, r1, …``
  in the deterministic order of that function; the label (display name) says what the region holds
  (:func:`~..naming.region_label`, e.g. ``r3 · gen_orders#1 + clean_orders#1``), the tooltip lists the steps and
  why they
  form one region, the group's ``doc_md`` lists the subtasks and the exchanges that tie them together.
* **Dependencies** mirror the edges at subtask level: consumer subtask ``j``'s task depends on exactly the tasks
  of the producer subtasks whose partitions it reads (POINTWISE / ALL_TO_ALL,
  :mod:`~airflow_region_failover.graph.subtasks`); a chain's interior edges are inside one task and wire nothing.
* **Publishing tasks** (:mod:`~airflow_region_failover.publication`): a published sink step gets one more task,
  ``<step>.publish``, outside the region groups, downstream of every task running one of its subtasks; it is
  built before the job document is added, like every task.
* **The job document** (:meth:`~airflow_region_failover.job.JobSpec.to_document`) is stored in the DAG param
  :data:`~airflow_region_failover.naming.JOB_PARAM`, which survives DAG serialization, so the scheduler and every
  worker read the same job with :func:`~airflow_region_failover.job.job_of`. It is added after the tasks are
  built (operators copy DAG params when they are created).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from airflow.sdk import DAG, BaseOperator, Param, TaskGroup

from airflow_region_failover.exceptions import GraphError
from airflow_region_failover.graph.ids import SubtaskId
from airflow_region_failover.graph.model import Edge, Exchange, JobGraph
from airflow_region_failover.graph.regions import Region, Regions
from airflow_region_failover.graph.subtasks import partition_groups
from airflow_region_failover.job import REUSE_PARAM, JobSpec, job_of
from airflow_region_failover.naming import JOB_PARAM, region_label
from airflow_region_failover.publication.declaration import Publication

_MAX_LISTED = 40
"""Characters of a region group's display name (the graph view shows it on the group's box)."""

OperatorFactory = Callable[[tuple[SubtaskId, ...], TaskGroup], BaseOperator]
"""Builds the task of one chain subtask (its subtasks, head first) in a group."""
PublisherFactory = Callable[[Publication], BaseOperator]
"""Builds the publishing task of one published sink step."""


@dataclass(frozen=True)
class RenderedJob:
    """The result of :func:`render_job`: the job, its regions, and the groups and tasks built for them (every
    subtask of a chain maps to the chain's task)."""

    spec: JobSpec
    regions: Regions
    groups: Mapping[str, TaskGroup] = field(repr=False)
    tasks: Mapping[SubtaskId, BaseOperator] = field(repr=False)
    publishers: Mapping[str, BaseOperator] = field(default_factory=dict, repr=False)
    """step id -> its publishing task."""

    def task(self, subtask: SubtaskId | str) -> BaseOperator:
        """The task of ``subtask`` (a :class:`SubtaskId` or ``"step#i"``)."""
        key = SubtaskId.parse(subtask) if isinstance(subtask, str) else subtask
        return self.tasks[key]


def render_job(dag: DAG, spec: JobSpec, make_task: OperatorFactory,
               make_publisher: PublisherFactory | None = None) -> RenderedJob:
    """Build one TaskGroup per region and one task per chain subtask (``make_task``) in ``dag``; wire the edges;
    build each publishing task (``make_publisher``) after its sink's tasks."""
    if job_of(dag) is not None:
        raise GraphError(f"DAG {dag.dag_id!r} already holds a region-failover job; render one job per DAG")
    regions = spec.topology.regions
    inputs = inputs_by_step(spec.graph)
    groups: dict[str, TaskGroup] = {}
    tasks: dict[SubtaskId, BaseOperator] = {}
    for region in regions.regions:
        group = _group(dag, region, inputs)
        groups[region.id] = group
        for subtask in region.subtasks:
            if subtask in tasks:
                continue  # a later member of a chain: built with its head (same region)
            members = spec.names.subtasks(spec.names.task_id(subtask))
            assert members is not None  # every subtask's task id names it (naming.TaskNames)
            task = make_task(members, group)
            tasks.update((member, task) for member in members)
    _wire(spec.graph, tasks)
    publishers = _publishers(spec, tasks, make_publisher)
    dag.params[REUSE_PARAM] = Param(
        True, type="boolean", title="Keep unchanged results on a failover restart",
        description="A consumer restarted by region failover keeps its committed result when its inputs and code "
        "are unchanged. Set to false in a run's conf to recompute everything a restart touches.",
    )
    dag.params[JOB_PARAM] = Param(
        spec.to_document(), type="object", title="Region failover job (generated)",
        section="Region failover (generated, read-only)",
        description="Job graph and failover/restart options rendered by airflow-provider-region-failover. "
        "Read-only: changing it in a run's conf has no effect.",
    )
    dag._region_failover_spec = spec
    return RenderedJob(spec, regions, groups, tasks, publishers)


def _publishers(spec: JobSpec, tasks: Mapping[SubtaskId, BaseOperator],
                make_publisher: PublisherFactory | None) -> dict[str, BaseOperator]:
    """One publishing task per publication, downstream of every task of its sink step's subtasks."""
    if spec.publications and make_publisher is None:
        raise GraphError("the job publishes tables but the renderer was given no publisher factory")
    built: dict[str, BaseOperator] = {}
    for publication in spec.publications:
        task = make_publisher(publication)  # type: ignore[misc]
        parallelism = spec.graph.step(publication.step).parallelism
        upstream = {id(t): t for t in (tasks[SubtaskId(publication.step, i)] for i in range(parallelism))}
        task.set_upstream(list(upstream.values()))
        built[publication.step] = task
    return built


def inputs_by_step(graph: JobGraph) -> dict[str, list[Edge]]:
    """Every step's input edges, in declaration order (built once: looking them up per region is O(edges))."""
    index: dict[str, list[Edge]] = {s.id: [] for s in graph.steps}
    for edge in graph.edges:
        index[edge.target].append(edge)
    return index


def _group(dag: DAG, region: Region, inputs: Mapping[str, list[Edge]]) -> TaskGroup:
    return TaskGroup(
        group_id=region.id, group_display_name=region_label(region), prefix_group_id=False, dag=dag,
        parent_group=dag.task_group, tooltip=region_tooltip(region, inputs), doc_md=region_doc(region, inputs),
        add_suffix_on_collision=False,
    )


def _wire(graph: JobGraph, tasks: Mapping[SubtaskId, BaseOperator]) -> None:
    """Consumer subtask ``j`` depends on exactly the producer subtasks whose partitions it reads; the interior
    edges of a chain or a fused region are inside one task (no self-dependency)."""
    for edge in graph.edges:
        producers = graph.step(edge.source).parallelism
        consumers = graph.step(edge.target).parallelism
        for group in partition_groups(edge, producers, consumers):
            upstream = [tasks[SubtaskId(edge.source, p)] for p in group.producers]
            for c in group.consumers:
                task = tasks[SubtaskId(edge.target, c)]
                outside = list({id(u): u for u in upstream if u is not task}.values())
                if outside:
                    task.set_upstream(outside)


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
    return "merged because BLOCKING exchanges form a cycle between their failover regions"


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
        "Inputs from other failover regions: " + ("; ".join(outside) if outside else "none") + ".",
    ]
    return "\n\n".join(lines)

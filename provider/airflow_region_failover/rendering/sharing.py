"""Which steps may share one task: chained steps (one task per chain subtask) and fused regions (one task per
region), and the AUTO results no plan may fuse.

Rules:

* a PIPELINED edge the graph would chain is broken (:func:`chain_breaks`) when its steps cannot share one Spark
  session or one task: a script step runs in its own spark-submitted application, steps on different Spark
  connections have different sessions, and one task cannot honour two sets of operator arguments; in a job
  rendered ``PER_RUN`` the edges of a fused AUTO result never chain either (``per_run``): its ends run in a fused
  task, which follows each run's plan (a chain task could not commit the result a run's plan persists);
* an AUTO result is BLOCKING in every plan (:func:`unfusable`) when its consumer is checkpointed (its epochs cut
  committed objects), a script step is at either end, or its ends are on different Spark connections;
* a plan's fused result is refused (:func:`refused_fusions`) when its fused region would hold a step that cannot
  share the region's task (:func:`task_conflicts`: a script step, a checkpointed step, another Spark connection or
  other operator arguments than the region's first step);
* a chain task is *sliced* (:func:`sliced_chains`: its subtasks run the epochs each run's plan fixes,
  :mod:`~airflow_region_failover.graph.slicing`) when the graph allows it, no member is checkpointed or a script
  step, and it runs as a task of its own (not inside a fused region's task).
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping

from airflow_region_failover.graph import fusion, slicing
from airflow_region_failover.graph.auto import ExchangePlan
from airflow_region_failover.graph.chains import EdgeKey, compute_chains
from airflow_region_failover.graph.model import Exchange, JobGraph
from airflow_region_failover.graph.regions import compute_regions
from airflow_region_failover.job import JobSpec, StepImpl


def refused_fusions(graph: JobGraph, plan: ExchangePlan, impls: Mapping[str, StepImpl],
                    chaining: bool = True, per_run: Collection[str] = ()) -> dict[str, str]:
    """The results ``plan`` fuses whose fused region holds steps that cannot share one task (rule 4 of
    :mod:`~airflow_region_failover.graph.fusion`), with the reason (``graph``: the concrete graph of ``plan``;
    ``per_run``: as for :func:`chain_breaks`)."""
    if not plan.fused:
        return {}
    chains = compute_chains(graph, chain_breaks(graph, impls, chaining, per_run))
    regions = fusion.fused_regions(graph, compute_regions(graph), chains, plan.fused)
    return fusion.refused(graph, regions, plan.fused, lambda steps: task_conflicts(steps, impls))


def task_conflicts(steps: Iterable[str], impls: Mapping[str, StepImpl]) -> dict[str, str]:
    """The steps of ``steps`` that cannot run in one task with the others, and why: a script step (its own Spark
    application), a checkpointed step (its epochs commit objects), a step on another Spark connection or with other
    operator arguments than the first."""
    members = [impls[s] for s in steps]
    first = members[0]
    conflicts: dict[str, str] = {}
    for impl in members:
        if impl.script is not None:
            conflicts[impl.step_id] = "a script step runs in its own Spark application"
        elif impl.checkpoint is not None:
            conflicts[impl.step_id] = "a checkpointed step commits objects per epoch in its own task"
        elif impl.spark_conn_id != first.spark_conn_id:
            conflicts[impl.step_id] = (f"its Spark connection {impl.spark_conn_id!r} differs from "
                                       f"{first.spark_conn_id!r}'s")
        elif dict(impl.task_kwargs) != dict(first.task_kwargs):
            conflicts[impl.step_id] = f"its operator arguments differ from step {first.step_id!r}'s"
    return conflicts


def chain_breaks(graph: JobGraph, impls: Mapping[str, StepImpl], chaining: bool = True,
                 per_run: Collection[str] = ()) -> dict[EdgeKey, str]:
    """The PIPELINED edges that must not chain although the graph allows it, with the reason: a script step runs
    in its own spark-submitted application, steps on different Spark connections have different sessions, one
    task cannot honour two sets of operator arguments (``pool``, ``retries``...), and an edge of a result in
    ``per_run`` (a fused AUTO result of a job rendered ``PER_RUN``) runs in a fused task (module rule)."""
    breaks: dict[EdgeKey, str] = {}
    for edge in graph.edges:
        if edge.exchange is not Exchange.PIPELINED:
            continue
        source, target = impls[edge.source], impls[edge.target]
        scripts = [i.step_id for i in (source, target) if i.script is not None]
        if edge.result in per_run:
            reason = "an AUTO result of a job rendered PER_RUN: its fused task follows each run's plan"
        elif not chaining:
            reason = "chaining disabled for this job (RegionJob(chaining=False))"
        elif scripts:
            reason = f"script step {scripts[0]!r} runs in its own Spark application"
        elif source.spark_conn_id != target.spark_conn_id:
            reason = f"Spark connections differ ({source.spark_conn_id!r} vs {target.spark_conn_id!r})"
        elif dict(source.task_kwargs) != dict(target.task_kwargs):
            reason = "operator arguments differ"
        else:
            continue
        breaks[(edge.source, edge.target)] = reason
    return breaks


def unfusable(graph: JobGraph, impls: Mapping[str, StepImpl]) -> dict[str, str]:
    """The AUTO results no plan may fuse, with the reason (module rules): they stay BLOCKING."""
    reasons: dict[str, str] = {}
    for edge in graph.edges:
        if edge.exchange is not Exchange.AUTO or edge.result in reasons:
            continue
        source, target = impls[edge.source], impls[edge.target]
        scripts = [i.step_id for i in (source, target) if i.script is not None]
        if target.checkpoint is not None:
            reasons[edge.result] = (f"consumer {edge.target!r} is checkpointed: its epochs cut committed objects, "
                                    "so its input is BLOCKING")
        elif scripts:
            reasons[edge.result] = f"script step {scripts[0]!r} runs in its own Spark application"
        elif source.spark_conn_id != target.spark_conn_id:
            reasons[edge.result] = (f"Spark connections differ ({source.spark_conn_id!r} vs "
                                    f"{target.spark_conn_id!r}): one fused region runs in one Spark application")
    return reasons


def sliced_chains(spec: JobSpec, impls: Mapping[str, StepImpl]) -> dict[str, int]:
    """The chains of ``spec`` whose tasks are sliced (module rule): head step -> the most epochs it may take."""
    fused = {m.step for region in spec.fused for m in region.members}
    found: dict[str, int] = {}
    for chain in spec.chains.chains:
        steps = chain.steps
        if fused & set(steps) or any(impls[s].checkpoint is not None or impls[s].script is not None for s in steps):
            continue
        if slicing.sliceable(spec.graph, steps):
            found[steps[0]] = slicing.most_slices(spec.graph, steps[0])
    return found

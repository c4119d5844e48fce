"""Fused regions: the failover regions a plan runs as one task, one Spark job (Flink's pipelined region).

Rules (:mod:`.auto` says when a result is ``FUSED``; a fused result's edges are PIPELINED in the concrete graph, so
its producer and consumer subtasks already share a failover region, :mod:`.regions`):

1. A region is *fused* when it holds both ends of an edge of a fused result and would otherwise run as more than one
   task (more than one chain subtask, :mod:`.chains`). A region whose subtasks form one chain subtask is that chain's
   task, unchanged.
2. A fused region runs as **one task**: every subtask of it, steps in topological order, then index; every
   exchange between two of its subtasks that is PIPELINED passes a DataFrame in memory inside one Spark session
   (no scratch partition, no Parquet, no Airflow hop); its BLOCKING results are committed as always.
3. Its task id names its steps and its first step's lowest subtask index: ``s1.s2....sk.i`` — the form of a chain
   task's id (:mod:`~airflow_region_failover.naming`), and never one of them (a fused region holds more than one
   chain). The id does not depend on region numbering, so editing the graph elsewhere renames no task.
4. A fused region may not hold a step that cannot share its task (:func:`unfusable_steps`: a script step runs in
   its own Spark application, a checkpointed step commits objects per epoch, steps of one task share one Spark
   connection and one set of operator arguments): the plan's fused results in such a region are refused, with the
   reason, and stay BLOCKING (:func:`refused`).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass

from airflow_region_failover.graph.chains import Chains
from airflow_region_failover.graph.ids import SubtaskId
from airflow_region_failover.graph.model import JobGraph
from airflow_region_failover.graph.regions import Region, Regions


@dataclass(frozen=True)
class FusedRegion:
    """One fused region (module rules): its ``task_id`` and its ``members`` in the order the task runs them."""

    region: Region
    task_id: str
    members: tuple[SubtaskId, ...]


def fused_regions(graph: JobGraph, regions: Regions, chains: Chains, fused: Iterable[str]) -> tuple[FusedRegion, ...]:
    """The regions of ``graph`` (concrete, with ``regions`` and ``chains``) that run as one task because results
    ``fused`` are fused (rules 1-3), in region order."""
    fused_results = set(fused)
    if not fused_results:
        return ()
    edges = [e for e in graph.edges if e.result in fused_results]
    order = {s.id: n for n, s in enumerate(graph.steps)}
    found = []
    for region in regions.regions:
        steps = set(region.steps)
        if not any(e.source in steps and e.target in steps for e in edges):
            continue
        tasks = {chains.of(s.step).subtasks(s.index) for s in region.subtasks}
        if len(tasks) < 2:
            continue
        members = tuple(sorted(region.subtasks, key=lambda s: (order[s.step], s.index)))
        head = members[0]
        found.append(FusedRegion(region, f"{'.'.join(sorted(steps, key=order.__getitem__))}.{head.index}", members))
    return tuple(found)


def refused(graph: JobGraph, regions: tuple[FusedRegion, ...], fused: Iterable[str],
            why_not: Callable[[Iterable[str]], Mapping[str, str]]) -> dict[str, str]:
    """The fused results (of ``fused``) that lie in a fused region holding steps that cannot share one task (rule
    4), with the reason; ``why_not`` answers, for a region's steps, each step that cannot and why (and for a set of
    steps that cannot share one task, any one of them)."""
    fused_results = set(fused)
    refusals: dict[str, str] = {}
    for found in regions:
        steps = set(found.region.steps)
        reasons = why_not(found.region.steps)
        if not reasons:
            continue
        step, reason = next(iter(reasons.items()))
        for edge in graph.edges:
            if edge.result in fused_results and edge.source in steps and edge.target in steps:
                refusals[edge.result] = (f"fusing it would run step {step!r} in fused task {found.task_id!r}, "
                                         f"but {reason}")
    return refusals

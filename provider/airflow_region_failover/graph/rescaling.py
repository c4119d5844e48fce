"""Rescaled steps: the steps a fused region's task runs as one subtask, as one Spark application runs them.

A fused task (:mod:`.fusion`) calls each member's function on exactly its subtask's share — its key groups of a
keyed input — so it computes what the unfused tasks do; but a DataFrame cannot read only some partitions of a
shuffle, so every consumer subtask of a keyed edge reads the whole exchange and keeps its key groups, and a keyed
step's partial rows are shuffled again for the next one (``benchmarks/notes/2026-12-02-fused-region-breakdown.md``:
+8.6 of 52.5 task CPU seconds at ~1 GB against one application). A step declared ``rescalable``
(:class:`~.elements.Step`: its results, as its consumers use them, are the same at any parallelism) needs none of
that inside a fused task. Rules — a step of a fused task runs as **one subtask** when:

1. it is declared ``rescalable`` and has more than one subtask;
2. every subtask of it is a member of the task, all in one failover region of the run's plan (the region is
   restarted, kept or resumed as a unit, :mod:`~airflow_region_failover.spark.fused_resume`);
3. none of its results is BLOCKING in the run's graph: no partition of it is committed or published, so nothing
   outside the task — recovery, lineage, reuse across runs, the Failover tab — sees how it was split;
4. every edge reading its results is keyed (``ALL_TO_ALL``: a consumer subtask reads its key groups of every
   partition) or ``BROADCAST`` (every partition whole), or leads to a step that runs as one subtask too
   (``POINTWISE`` pairs partitions by index, which one subtask does not have); applied until no step is dropped.

The task then runs :class:`Rescaled`'s graph: those steps at parallelism 1, so each one's function is called once with
subtask 0 of 1, on the union of its inputs (a keyed input whole: one subtask holds every key group), and Spark's own
shuffle does the rest — what one Spark application does. Its summary still names every subtask of the step
(:meth:`Rescaled.expanded`): the planner's history splits the task's compute over its members, as for any fused task.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from airflow_region_failover.graph.elements import Distribution, Exchange
from airflow_region_failover.graph.ids import SubtaskId
from airflow_region_failover.graph.model import JobGraph


def rescaled_steps(graph: JobGraph, members: Sequence[SubtaskId],
                   regions: Mapping[SubtaskId, tuple[SubtaskId, ...]]) -> frozenset[str]:
    """The steps of a fused task with ``members`` (each mapped by ``regions`` to the members of its plan region)
    that run as one subtask (module rules 1-4); ``graph`` is the run's graph (AUTO resolved)."""
    inside = frozenset(members)
    chosen = {s.id for s in graph.steps if s.rescalable and s.parallelism > 1 and _whole(graph, s.id, inside, regions)
              and all(r.exchange is not Exchange.BLOCKING for r in graph.outputs(s.id))}
    while True:
        dropped = {step for step in chosen for result in graph.outputs(step) for edge in result.consumers
                   if edge.distribution is Distribution.POINTWISE and edge.target not in chosen}
        if not dropped:
            return frozenset(chosen)
        chosen -= dropped


def _whole(graph: JobGraph, step: str, inside: frozenset[SubtaskId],
           regions: Mapping[SubtaskId, tuple[SubtaskId, ...]]) -> bool:
    """Rule 2: every subtask of ``step`` is a member, all in the region of the first."""
    subtasks = [SubtaskId(step, i) for i in range(graph.step(step).parallelism)]
    region = regions.get(subtasks[0], (subtasks[0],))
    return all(s in inside and s in region and regions.get(s, (s,)) == region for s in subtasks)


@dataclass(frozen=True)
class Rescaled:
    """What a fused task runs (module rules): ``graph`` with ``steps`` at parallelism 1, its ``members`` and their
    ``regions``; ``whole`` is the run's graph."""

    whole: JobGraph
    steps: frozenset[str]
    graph: JobGraph
    members: tuple[SubtaskId, ...]
    regions: Mapping[SubtaskId, tuple[SubtaskId, ...]]

    @classmethod
    def of(cls, graph: JobGraph, members: Sequence[SubtaskId],
           regions: Mapping[SubtaskId, tuple[SubtaskId, ...]]) -> Rescaled:
        """The task of ``members`` (in the order they run; ``regions`` maps each to its plan region's members) of
        run graph ``graph``, its :func:`rescaled_steps` at parallelism 1 (subtask 0 where the step's first was)."""
        steps = rescaled_steps(graph, members, regions)
        if not steps:
            return cls(graph, steps, graph, tuple(members), dict(regions))
        ran = tuple(m for m in members if m.step not in steps or m.index == 0)
        kept = frozenset(ran)
        return cls(graph, steps, JobGraph.of([dataclasses.replace(s, parallelism=1) if s.id in steps else s
                                              for s in graph.steps], graph.edges),
                   ran, {m: tuple(s for s in regions.get(m, (m,)) if s in kept) for m in ran})

    def expanded(self, members: Sequence[SubtaskId]) -> tuple[SubtaskId, ...]:
        """``members`` of this task as the run's subtasks again: subtask 0 of a rescaled step stands for all of
        the step's subtasks in :attr:`whole` (module rule: the summary names every one)."""
        found: list[SubtaskId] = []
        for member in members:
            if member.step in self.steps:
                found.extend(SubtaskId(member.step, i) for i in range(self.whole.step(member.step).parallelism))
            else:
                found.append(member)
        return tuple(found)

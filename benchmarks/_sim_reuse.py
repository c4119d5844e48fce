"""The subtask-level sets of ``sim_recovery.py``: the minimal correct set and ``region+reuse``, with re-run outcomes.

A *read* is one (partition, consumer subtask) pair: the share of a producer's partition that one consumer subtask
reads. Every ALL_TO_ALL exchange of the simulated families is modelled as keyed (joins, aggregations, shuffles):
consumer j reads subpartition j of each producer partition; a POINTWISE consumer reads whole partitions, each read
by that consumer alone in these families. When a producer subtask runs again, each read of its output comes back
byte-identical or different:

* different, if the producer had not finished before the failure (no committed version to match);
* different, if the producer itself read a different subpartition this time (different input rows, different
  output: every read of its output differs — conservative);
* identical, if its step is *reproducible* (a share of the steps, drawn once per graph);
* otherwise (a nondeterministic step on identical input) each read differs with probability ``differs``, drawn
  once per trial and shared by every set computed on that trial, so they all see the same outcomes.

``region+reuse`` (the product's new reuse rule; :meth:`World.reuse_set`): walk the ``region`` restart set in
topological order; a subtask is **kept** (not run again, work not redone, outputs unchanged) when its region
restarts only as a consumer (:attr:`Reason.CONSUMER`), its step reads and writes only BLOCKING results, it had
finished (there are committed outputs to keep), and none of its reads changed (each producer did not run again,
was kept, or re-produced that read identically). Every other subtask of the set runs again.

The minimal correct set (:func:`minimal_set`) is specified in ``sim_recovery.py``'s docstring (rules 1-5). This
module imports nothing from ``sim_recovery.py``: the dependency goes one way.
"""

from __future__ import annotations

import random
from collections.abc import Iterable
from dataclasses import dataclass, field

from airflow_region_failover.failover.restart_plan import Reason, RestartPlan
from airflow_region_failover.failover.topology import FailoverTopology
from airflow_region_failover.graph import Exchange, JobGraph, PartitionId, SubtaskId
from airflow_region_failover.graph.subtasks import subtasks
from tests.support.reference import explicit_edges

Read = tuple[PartitionId, SubtaskId]
"""One read: a producer's partition and the consumer subtask reading its share of it."""


@dataclass
class Wiring:
    """Subtask-level wiring of a (small) graph, from the explicit expansion."""

    pipelined_in: dict[SubtaskId, set[SubtaskId]] = field(default_factory=dict)
    pipelined_out: dict[SubtaskId, set[SubtaskId]] = field(default_factory=dict)
    blocking_in: dict[SubtaskId, set[PartitionId]] = field(default_factory=dict)
    region_edges: dict[int, set[int]] = field(default_factory=dict)
    reads: dict[SubtaskId, list[PartitionId]] = field(default_factory=dict)
    """consumer -> every partition it reads (either exchange)."""
    readers: dict[SubtaskId, list[Read]] = field(default_factory=dict)
    """producer -> every read of its output."""
    rank: dict[SubtaskId, int] = field(default_factory=dict)
    """Topological rank of every subtask."""
    only_blocking: frozenset[str] = frozenset()
    """Steps whose every input and output is BLOCKING."""
    producer_step: dict[str, str] = field(default_factory=dict)

    @classmethod
    def of(cls, topology: FailoverTopology) -> Wiring:
        """Expand every exchange (the simulated graphs have at most a few hundred subtasks)."""
        graph: JobGraph = topology.graph
        pipelined = {s for e in graph.edges if e.exchange is Exchange.PIPELINED for s in (e.source, e.target)}
        wiring = cls(
            rank={s: i for i, s in enumerate(subtasks(graph))},
            only_blocking=frozenset(s.id for s in graph.steps if s.id not in pipelined),
            producer_step={e.result: e.source for e in graph.edges},
        )
        regions = topology.regions
        for producer, consumer, partition, exchange in explicit_edges(graph):
            wiring.reads.setdefault(consumer, []).append(partition)
            wiring.readers.setdefault(producer, []).append((partition, consumer))
            if exchange is Exchange.PIPELINED:
                wiring.pipelined_in.setdefault(consumer, set()).add(producer)
                wiring.pipelined_out.setdefault(producer, set()).add(consumer)
            else:
                wiring.blocking_in.setdefault(consumer, set()).add(partition)
                a, c = regions.region_of(producer).index, regions.region_of(consumer).index
                if a != c:
                    wiring.region_edges.setdefault(a, set()).add(c)
        return wiring

    def topological(self, chosen: Iterable[SubtaskId]) -> list[SubtaskId]:
        """``chosen``, producers first."""
        return sorted(chosen, key=self.rank.__getitem__)


def reproducible_steps(graph: JobGraph, share: float, rng: random.Random) -> frozenset[str]:
    """Each step is reproducible with probability ``share`` (drawn once per graph)."""
    return frozenset(s.id for s in graph.steps if rng.random() < share)


@dataclass
class World:
    """One trial's outcomes of running subtasks again (module docstring)."""

    reproducible: frozenset[str]
    differs: float
    rng: random.Random
    finished: frozenset[SubtaskId]
    drawn: dict[Read, bool] = field(default_factory=dict)
    """Outcomes of nondeterministic reads drawn so far (a test may preset them)."""

    def changes(self, producer: SubtaskId, read: Read, inputs_changed: bool) -> bool:
        """Whether ``read`` of ``producer``'s output differs once ``producer`` ran again."""
        if inputs_changed or producer not in self.finished:
            return True
        if producer.step in self.reproducible:
            return False
        if read not in self.drawn:
            self.drawn[read] = self.rng.random() < self.differs
        return self.drawn[read]

    def _run_again(self, s: SubtaskId, wiring: Wiring, changed: set[Read]) -> None:
        inputs_changed = any((p, s) in changed for p in wiring.reads.get(s, ()))
        changed.update(r for r in wiring.readers.get(s, ()) if self.changes(s, r, inputs_changed))

    def changed_reads(self, rerun: Iterable[SubtaskId], wiring: Wiring) -> set[Read]:
        """Every read that differs when exactly the subtasks ``rerun`` run again."""
        changed: set[Read] = set()
        for s in wiring.topological(rerun):
            self._run_again(s, wiring, changed)
        return changed

    def reuse_set(self, plan: RestartPlan, wiring: Wiring) -> set[SubtaskId]:
        """``region+reuse``: ``plan``'s subtasks minus those the keep rule keeps (module docstring)."""
        consumers = {s for r in plan.regions if r.reason is Reason.CONSUMER for s in r.region.subtasks}
        changed: set[Read] = set()
        rerun: set[SubtaskId] = set()
        for s in wiring.topological(plan.restart):
            keepable = s in consumers and s.step in wiring.only_blocking and s in self.finished
            if keepable and not any((p, s) in changed for p in wiring.reads.get(s, ())):
                continue  # kept: its committed outputs stay, so no read of them changes
            rerun.add(s)
            self._run_again(s, wiring, changed)
        return rerun


def minimal_set(
    failed: SubtaskId,
    done: dict[SubtaskId, float],
    running: set[SubtaskId],
    lost: frozenset[PartitionId],
    wiring: Wiring,
    world: World,
) -> set[SubtaskId]:
    """The minimal correct set M: the fixed point of rules 1-4, then rule 5, until rule 5 adds nothing."""
    chosen, todo = {failed}, [failed]
    while todo:
        while todo:
            s = todo.pop()
            pulled: list[SubtaskId] = [p for p in wiring.pipelined_in.get(s, ()) if done.get(p, 0.0) > 0]
            pulled += [y for y in wiring.pipelined_out.get(s, ()) if y in running]
            pulled += [
                SubtaskId(wiring.producer_step[q.result], q.index) for q in wiring.blocking_in.get(s, ()) if q in lost
            ]
            for t in pulled:
                if t not in chosen:
                    chosen.add(t)
                    todo.append(t)
        changed = {y for _, y in world.changed_reads(chosen, wiring) if done.get(y, 0.0) > 0}
        todo = wiring.topological(changed - chosen)  # rule 5
        chosen.update(todo)
    return chosen

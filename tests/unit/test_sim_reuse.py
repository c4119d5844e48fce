"""The keep rule of the recovery simulation's ``region+reuse`` set (``benchmarks/_sim_reuse.py``) on tiny graphs.

Each test draws its graph at the top. ``-B->`` is a BLOCKING exchange, ``-P->`` a PIPELINED one; the simulation
models every ALL_TO_ALL exchange as keyed (consumer j reads subpartition j of each producer partition). A failed
subtask ``e#0`` whose input partition is lost makes the producer run again, so the other subtasks become
consumer restarts; the outcome of every nondeterministic read is preset in the world.
"""

from __future__ import annotations

import random

from airflow_region_failover.failover.planner import plan_restart
from airflow_region_failover.failover.restart_plan import Reason
from airflow_region_failover.failover.topology import FailoverTopology
from airflow_region_failover.graph import JobGraph, JobGraphBuilder, PartitionId, SubtaskId
from benchmarks._sim_reuse import Wiring, World, minimal_set


class _Lost:
    """Every partition is available but the lost one (all producers here finished)."""

    def __init__(self, lost: PartitionId) -> None:
        self.lost = lost

    def is_available(self, partition: PartitionId) -> bool:
        return partition != self.lost


def _sets(
    graph: JobGraph, reproducible: set[str], differs: dict[tuple[str, str], bool]
) -> tuple[set[SubtaskId], set[SubtaskId], set[SubtaskId]]:
    """(region, region+reuse, minimal) when ``e#0`` fails at work and loses its input ``p->e#0``.

    Every other subtask finished, with one unit of work each. ``differs`` presets the reads of p's re-produced
    output: (partition, consumer) -> whether that read comes back different.
    """
    topology = FailoverTopology.build(graph)
    wiring = Wiring.of(topology)
    failed, lost = SubtaskId("e", 0), PartitionId("p->e", 0)
    plan = plan_restart(topology, failed, _Lost(lost), "region", [lost])
    finished = frozenset(s for s in wiring.rank if s != failed)
    world = World(frozenset(reproducible), 1.0, random.Random(0), finished)
    world.drawn.update({(PartitionId.parse(p), SubtaskId.parse(c)): d for (p, c), d in differs.items()})
    done = {s: 1.0 for s in finished} | {failed: 0.5}
    reasons = {r.region.id: r.reason for r in plan.regions}
    assert reasons[topology.regions.region_of(SubtaskId("p", 0)).id] is Reason.PRODUCER_UNAVAILABLE
    reuse = world.reuse_set(plan, wiring)
    minimal = minimal_set(failed, done, {failed}, frozenset({lost}), wiring, world)
    return set(plan.restart), reuse, minimal


def _s(*names: str) -> set[SubtaskId]:
    return {SubtaskId.parse(n) for n in names}


def test_flip1_keyed_consumer_of_a_nondeterministic_producer() -> None:
    """FLIP-1: p re-produced routes other rows to c#0 and the same rows to c#1: c#0 runs again, c#1 is kept.

    ::

        p#0 (nondeterministic) -B, keyed ALL_TO_ALL-> c#0, c#1
        p#0 -B, POINTWISE-> e#0 (fails; its input p->e#0 is lost)
    """
    b = JobGraphBuilder().step("p").step("c", parallelism=2).step("e")
    graph = b.edge("p", "c", exchange="BLOCKING").edge("p", "e", exchange="BLOCKING", distribution="POINTWISE").build()
    region, reuse, minimal = _sets(graph, set(), {("p->c#0", "c#0"): True, ("p->c#0", "c#1"): False})
    assert region == _s("p#0", "c#0", "c#1", "e#0")  # Flink: every consumer of a re-produced result
    assert reuse == _s("p#0", "c#0", "e#0")
    assert minimal == reuse


def test_a_rerun_consumer_with_identical_output_stops_the_cascade() -> None:
    """a and b run again (a PIPELINED hop forbids keeping them); f is kept iff b's output comes back the same.

    ::

        p#0 -B-> a#0 -P-> b#0 -B-> f#0
        p#0 -B-> e#0 (fails; its input p->e#0 is lost)
    """
    b = JobGraphBuilder()
    for step in ("p", "a", "b", "f", "e"):
        b.step(step)
    b.edge("p", "a", exchange="BLOCKING").edge("a", "b", exchange="PIPELINED").edge("b", "f", exchange="BLOCKING")
    graph = b.edge("p", "e", exchange="BLOCKING").build()
    everything = _s("p#0", "a#0", "b#0", "f#0", "e#0")

    region, reuse, minimal = _sets(graph, {"p", "a", "b"}, {})  # all reproducible: a's input is identical
    assert region == everything
    assert reuse == _s("p#0", "a#0", "b#0", "e#0")  # f#0 kept: b re-produced byte-identical output
    assert minimal == _s("p#0", "e#0")  # a and b needed no rerun: the PIPELINED rule costs their work

    region, reuse, minimal = _sets(graph, {"a", "b"}, {("p->a#0", "a#0"): True})  # p's output differs for a
    assert reuse == minimal == everything  # a read other rows, so b's output differs and f runs again


def test_a_kept_consumer_keeps_its_consumers() -> None:
    """c#1 is kept, so d#1 (reading only c#1) reads nothing new and is kept too; d#0 follows c#0.

    ::

        p#0 (nondeterministic) -B, keyed ALL_TO_ALL-> c#0, c#1 -B, POINTWISE-> d#0, d#1
        p#0 -B, POINTWISE-> e#0 (fails; its input p->e#0 is lost)
    """
    b = JobGraphBuilder().step("p").step("c", parallelism=2).step("d", parallelism=2).step("e")
    b.edge("p", "c", exchange="BLOCKING").edge("c", "d", exchange="BLOCKING", distribution="POINTWISE")
    graph = b.edge("p", "e", exchange="BLOCKING", distribution="POINTWISE").build()
    region, reuse, minimal = _sets(graph, {"c", "d"}, {("p->c#0", "c#0"): True, ("p->c#0", "c#1"): False})
    assert region == _s("p#0", "c#0", "c#1", "d#0", "d#1", "e#0")
    assert reuse == minimal == _s("p#0", "c#0", "d#0", "e#0")

"""Which regions of a fused task a later try keeps, and what its commits record (spark/fused_resume.py).

    gen#0,1 ==B==> agg#0 --F--> fin#0 ==B==> (sink)       regions: gen#0 | gen#1 | agg#0+fin#0 | agg#1+fin#1
                   agg#1 --F--> fin#1 ==B==>
    (gen->agg keyed by k, BLOCKING in the plan; agg->fin pointwise, FUSED)
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from airflow_region_failover import JobGraphBuilder, PartitionId, SubtaskId
from airflow_region_failover.graph.auto import Choice, ExchangePlan, resolve
from airflow_region_failover.graph.model import Edge, Exchange, JobGraph
from airflow_region_failover.graph.regions import compute_regions
from airflow_region_failover.graph.subtasks import consumed_partitions
from airflow_region_failover.spark.exchange import PartitionRef
from airflow_region_failover.spark.fused_reads import readers_of
from airflow_region_failover.spark.fused_resume import kept_region, lineage, merged, region_order, task_regions
from airflow_region_failover.store.manifest import InputVersion

GEN = [SubtaskId("gen", i) for i in (0, 1)]
AGG0, FIN0 = SubtaskId("agg", 0), SubtaskId("fin", 0)


def _graph() -> tuple[JobGraph, tuple[SubtaskId, ...]]:
    declared = (JobGraphBuilder().step("gen", parallelism=2).step("agg", parallelism=2).step("fin", parallelism=2)
                .step("sink").edge("gen", "agg", exchange="AUTO", partition_by=["k"])
                .edge("agg", "fin", exchange="AUTO", distribution="POINTWISE")
                .edge("fin", "sink", exchange="BLOCKING", distribution="BROADCAST").build())
    graph = resolve(declared, ExchangePlan({"gen->agg": Choice.BLOCKING, "agg->fin": Choice.FUSED}))
    members = tuple(SubtaskId(s, i) for s in ("gen", "agg", "fin") for i in (0, 1))
    return graph, members


def _ref(result: str, index: int, attempt: int = 1) -> PartitionRef:
    return PartitionRef(result, index, Exchange.BLOCKING, "d", "r", attempt)


def _version(partition: PartitionId, checksum: str = "c") -> InputVersion:
    return InputVersion(partition, 1, checksum)


class World:
    """What the store holds: ``commits`` each partition's committed ref and the inputs its manifest recorded."""

    def __init__(self, graph: JobGraph) -> None:
        self.graph = graph
        self.commits: dict[PartitionId, tuple[PartitionRef, tuple[InputVersion, ...]]] = {}

    def reads(self, member: SubtaskId, written: Mapping[PartitionId, PartitionRef]) -> \
            dict[Edge, tuple[PartitionRef, ...]] | None:
        found = {}
        for edge, parts in consumed_partitions(self.graph, member).items():
            if edge.exchange is Exchange.BLOCKING:
                if not all(p in written for p in parts):
                    return None
                found[edge] = tuple(written[p] for p in parts)
        return found

    def versions(self, member: SubtaskId, read: Mapping[Edge, Sequence[PartitionRef]]) -> tuple[InputVersion, ...]:
        return merged([_version(r.partition) for refs in read.values() for r in refs])

    def committed(self, parts: Sequence[PartitionId], now: tuple[InputVersion, ...]) -> tuple[PartitionRef, ...] | None:
        found = [self.commits.get(p) for p in parts]
        if any(f is None or f[1] != now for f in found):
            return None
        return tuple(f[0] for f in found if f is not None)


def _kept(world: World, region: tuple[SubtaskId, ...], written: Mapping[PartitionId, PartitionRef],
          resumable: frozenset[SubtaskId] | None = None) -> dict[SubtaskId, tuple[PartitionRef, ...]] | None:
    graph = world.graph
    members = tuple(SubtaskId(s, i) for s in ("gen", "agg", "fin") for i in (0, 1))
    return kept_region(graph, region, frozenset(members) if resumable is None else resumable,
                       readers_of(graph, members, frozenset(members)), written, world.reads, world.versions,
                       world.committed)


def test_the_regions_of_the_runs_plan_in_the_tasks_order() -> None:
    graph, members = _graph()
    regions = task_regions(compute_regions(graph), members)
    assert regions[AGG0] == regions[FIN0] == (AGG0, FIN0)
    assert regions[GEN[0]] == (GEN[0],)


def test_a_try_runs_its_members_region_by_region() -> None:
    graph, members = _graph()
    order = region_order(graph, members, task_regions(compute_regions(graph), members))
    assert [str(m) for m in order] == ["gen#0", "gen#1", "agg#0", "fin#0", "agg#1", "fin#1"]


def test_a_fused_member_records_the_blocking_inputs_of_the_member_it_reads_in_memory() -> None:
    graph, _ = _graph()
    agg = (_version(PartitionId("gen->agg", 0)), _version(PartitionId("gen->agg", 1)))
    assert lineage(graph, FIN0, (), {AGG0: agg}) == agg
    assert lineage(graph, FIN0, (), {}) is None  # agg#0 not known: no lineage
    assert lineage(graph, AGG0, agg, {}) == agg  # reads only BLOCKING: what it read


def test_a_region_whose_commit_was_computed_from_the_same_inputs_is_kept_whole() -> None:
    graph, _ = _graph()
    world = World(graph)
    gen_refs = {PartitionId("gen->agg", i): _ref("gen->agg", i) for i in (0, 1)}
    world.commits[PartitionId("fin->sink", 0)] = (_ref("fin->sink", 0), merged([_version(p) for p in gen_refs]))
    assert _kept(world, (AGG0, FIN0), gen_refs) == {AGG0: (), FIN0: (_ref("fin->sink", 0),)}


def test_a_region_is_not_kept_when_its_inputs_changed_or_are_not_written_or_a_member_may_not_resume() -> None:
    graph, _ = _graph()
    world = World(graph)
    gen_refs = {PartitionId("gen->agg", i): _ref("gen->agg", i) for i in (0, 1)}
    world.commits[PartitionId("fin->sink", 0)] = (_ref("fin->sink", 0), (_version(PartitionId("gen->agg", 0)),))
    assert _kept(world, (AGG0, FIN0), gen_refs) is None  # recorded only what fin#0 read directly: not the lineage
    world.commits[PartitionId("fin->sink", 0)] = (_ref("fin->sink", 0), merged([_version(p) for p in gen_refs]))
    assert _kept(world, (AGG0, FIN0), {PartitionId("gen->agg", 0): _ref("gen->agg", 0)}) is None  # gen#1 not yet
    assert _kept(world, (AGG0, FIN0), gen_refs, resumable=frozenset({FIN0})) is None  # agg#0 must recompute
    assert _kept(world, (GEN[0],), {}) is None  # gen#0 has no commit

"""How a fused region's members read each other's DataFrames: the Spark jobs downstream of each partition, which
partitions are persisted and which keyed edges are shuffled once (spark/fused_reads.py).

    gen#0,1 --keyed by k--> join#0,1 --keyed by c--> agg#0..3 --broadcast--> report#0      (all fused: one job)
    (deterministic)         (not deterministic)
"""

from __future__ import annotations

from airflow_region_failover import JobGraphBuilder, PartitionId, SubtaskId
from airflow_region_failover.graph.auto import Choice, ExchangePlan, resolve
from airflow_region_failover.graph.model import JobGraph
from airflow_region_failover.spark.fused_reads import jobs_of, persisted, readers_of, shared

EDGES = ("gen->join", "join->agg", "agg->report")


def _graph(join_key: str = "c", fused: tuple[str, ...] = EDGES) -> tuple[JobGraph, tuple[SubtaskId, ...]]:
    declared = (JobGraphBuilder().step("gen", parallelism=2, deterministic=True).step("join", parallelism=2)
                .step("agg", parallelism=4).step("report")
                .edge("gen", "join", exchange="AUTO", partition_by=["k"])
                .edge("join", "agg", exchange="AUTO", partition_by=[join_key])
                .edge("agg", "report", exchange="AUTO", distribution="BROADCAST").build())
    graph = resolve(declared, ExchangePlan({r: Choice.FUSED for r in fused}))
    members = tuple(SubtaskId(s.id, i) for s in graph.steps for i in range(s.parallelism))
    return graph, members


def _reads(graph: JobGraph, members: tuple[SubtaskId, ...]) -> tuple[dict, dict]:  # type: ignore[type-arg]
    readers = readers_of(graph, members, frozenset(members))
    return readers, jobs_of(graph, members, readers)


def test_in_one_job_a_deterministic_producer_is_not_persisted_and_keyed_edges_are_shuffled_once() -> None:
    graph, members = _graph()
    readers, jobs = _reads(graph, members)
    report = frozenset({PartitionId("report", 0)})
    assert jobs == {PartitionId(r, i): report for r, n in (("gen->join", 2), ("join->agg", 2), ("agg->report", 4))
                    for i in range(n)}
    assert readers[PartitionId("gen->join", 1)] == (SubtaskId("join", 0), SubtaskId("join", 1))
    assert shared(graph, graph.result("gen->join").consumers[0], jobs, reuse=True)
    assert shared(graph, graph.result("join->agg").consumers[0], jobs, reuse=True)
    assert not persisted(graph, PartitionId("gen->join", 0), readers, jobs, reuse=True)
    # join is not deterministic, but all its reads are one exchange Spark keeps: computed once in the job
    assert not persisted(graph, PartitionId("join->agg", 0), readers, jobs, reuse=True)
    assert not persisted(graph, PartitionId("agg->report", 0), readers, jobs, reuse=True)  # one reader


def test_without_exchange_reuse_a_nondeterministic_producer_read_twice_is_persisted() -> None:
    graph, members = _graph()
    readers, jobs = _reads(graph, members)
    assert not shared(graph, graph.result("join->agg").consumers[0], jobs, reuse=False)
    assert persisted(graph, PartitionId("join->agg", 1), readers, jobs, reuse=False)
    assert not persisted(graph, PartitionId("gen->join", 1), readers, jobs, reuse=False)  # deterministic


def test_a_nondeterministic_producer_keyed_by_the_key_it_read_shared_is_persisted() -> None:
    # join's output partitioned as its input was: Spark may drop the repartition above it, so its consumers
    # would each compute it
    graph, members = _graph(join_key="k")
    readers, jobs = _reads(graph, members)
    assert persisted(graph, PartitionId("join->agg", 0), readers, jobs, reuse=True)


def test_partitions_read_by_several_jobs_are_persisted_and_read_without_a_shared_shuffle() -> None:
    #   gen#0,1 --fused keyed--> join#0,1 ==B==> ... : each join subtask commits its own partition (two jobs)
    graph, members = _graph(fused=("gen->join",))
    members = tuple(m for m in members if m.step in ("gen", "join"))
    readers, jobs = _reads(graph, members)
    assert jobs == {PartitionId("gen->join", i): frozenset({PartitionId("join->agg", 0), PartitionId("join->agg", 1)})
                    for i in (0, 1)}
    assert persisted(graph, PartitionId("gen->join", 0), readers, jobs, reuse=True)
    assert not shared(graph, graph.result("gen->join").consumers[0], jobs, reuse=True)

"""Operator chaining (graph/chains.py): which PIPELINED edges chain, why the others do not, and that a chain never
leaves its failover region."""

from __future__ import annotations

import random

import pytest

from airflow_region_failover.graph import JobGraph, JobGraphBuilder, SubtaskId
from airflow_region_failover.graph.chains import Chain, compute_chains
from airflow_region_failover.graph.regions import compute_regions
from airflow_region_failover.naming import TaskNames


def steps(graph: JobGraph) -> list[tuple[str, ...]]:
    return [c.steps for c in compute_chains(graph).chains]


def test_a_linear_pointwise_pipeline_of_equal_parallelism_is_one_chain() -> None:
    #   a#i -P-> b#i -P-> c#i ==B==> d#i       (all POINTWISE, parallelism 2)
    graph = (JobGraphBuilder().step("a", parallelism=2).step("b", parallelism=2).step("c", parallelism=2)
             .step("d", parallelism=2)
             .edge("a", "b", exchange="PIPELINED", distribution="POINTWISE")
             .edge("b", "c", exchange="PIPELINED", distribution="POINTWISE")
             .edge("c", "d", exchange="BLOCKING", distribution="POINTWISE").build())
    chains = compute_chains(graph)
    assert [c.steps for c in chains.chains] == [("a", "b", "c"), ("d",)]
    assert chains.of("b") is chains.of("c") and chains.of("b").head == "a" and chains.of("b").tail == "c"
    assert chains.of("a").subtasks(1) == (SubtaskId("a", 1), SubtaskId("b", 1), SubtaskId("c", 1))
    assert [chains.chained(e) for e in graph.edges] == [True, True, False]
    assert chains.reasons == {}  # the BLOCKING edge needs no reason
    assert str(chains.of("a")) == "a -> b -> c"


@pytest.mark.parametrize(("declare", "edge", "reason"), [
    #   a#0 \ /-> b#0
    #        X          BROADCAST PIPELINED
    #   a#1 / \-> b#1
    (lambda g: g.step("a", parallelism=2).step("b", parallelism=2).edge("a", "b", exchange="PIPELINED"),
     ("a", "b"), "BROADCAST exchange"),
    #   the same, keyed: ALL_TO_ALL PIPELINED by k
    (lambda g: g.step("a", parallelism=2).step("b", parallelism=2).edge("a", "b", exchange="PIPELINED",
                                                                        partition_by=["k"]),
     ("a", "b"), "ALL_TO_ALL exchange"),
    #   a#0 \
    #   a#1 -+-> b#0     POINTWISE PIPELINED, 4 -> 2
    #   ...
    (lambda g: g.step("a", parallelism=4).step("b", parallelism=2)
     .edge("a", "b", exchange="PIPELINED", distribution="POINTWISE"), ("a", "b"), "parallelism 4 -> 2"),
    #   a#i -P-> b#i
    #       \-B-> c#i    a's results have 2 consumer edges
    (lambda g: g.step("a", parallelism=2).step("b", parallelism=2).step("c", parallelism=2)
     .edge("a", "b", exchange="PIPELINED", distribution="POINTWISE")
     .edge("a", "c", exchange="BLOCKING", distribution="POINTWISE"), ("a", "b"), "producer has 2 consumers"),
    #   a#i -P-> c#i
    #   b#i -B-/         c has 2 input edges
    (lambda g: g.step("a", parallelism=2).step("b", parallelism=2).step("c", parallelism=2)
     .edge("a", "c", exchange="PIPELINED", distribution="POINTWISE")
     .edge("b", "c", exchange="BLOCKING", distribution="POINTWISE"), ("a", "c"), "consumer has 2 inputs"),
])
def test_every_reason_an_edge_is_not_chained(declare: object, edge: tuple[str, str], reason: str) -> None:
    graph = declare(JobGraphBuilder()).build()  # type: ignore[operator]
    chains = compute_chains(graph)
    assert all(len(c.steps) == 1 for c in chains.chains)
    assert chains.reasons == {edge: reason}
    [pipelined] = [e for e in graph.edges if (e.source, e.target) == edge]
    assert chains.why_not(pipelined) == reason and not chains.chained(pipelined)


def test_a_shared_result_read_twice_counts_every_consumer_edge() -> None:
    #   a#i -P-> b#i     one result "r" read by b and c: nobody may chain a's result away
    #       \-P-> c#i
    graph = (JobGraphBuilder().step("a", parallelism=2).step("b", parallelism=2).step("c", parallelism=2)
             .edge("a", "b", exchange="PIPELINED", distribution="POINTWISE", result="r")
             .edge("a", "c", exchange="PIPELINED", distribution="POINTWISE", result="r").build())
    chains = compute_chains(graph)
    assert steps(graph) == [("a",), ("b",), ("c",)]
    assert set(chains.reasons.values()) == {"producer has 2 consumers"}


def test_a_caller_break_keeps_two_steps_apart_with_its_reason() -> None:
    #   a#i -P-> b#i -P-> c#i      a -> b broken by the caller (e.g. b is a script step)
    graph = (JobGraphBuilder().step("a").step("b").step("c")
             .edge("a", "b", exchange="PIPELINED", distribution="POINTWISE")
             .edge("b", "c", exchange="PIPELINED", distribution="POINTWISE").build())
    chains = compute_chains(graph, {("a", "b"): "script step 'b'"})
    assert [c.steps for c in chains.chains] == [("a",), ("b", "c")]
    assert chains.reasons == {("a", "b"): "script step 'b'"}


def test_a_graph_rule_wins_over_a_break() -> None:
    #   a#0,a#1 -P(BROADCAST)-> b#0,b#1     broken by the caller too: the graph's reason is the one logged
    graph = JobGraphBuilder().step("a", parallelism=2).step("b", parallelism=2).edge("a", "b", exchange="PIPELINED")
    chains = compute_chains(graph.build(), {("a", "b"): "script step 'b'"})
    assert chains.reasons == {("a", "b"): "BROADCAST exchange"}


def test_task_names_round_trip_chains_and_single_steps() -> None:
    #   a#i -P-> b#i ==B==> c#i        chain a.b; c alone
    graph = (JobGraphBuilder().step("a", parallelism=3).step("b", parallelism=3).step("c", parallelism=3)
             .edge("a", "b", exchange="PIPELINED", distribution="POINTWISE")
             .edge("b", "c", exchange="BLOCKING", distribution="POINTWISE").build())
    names = TaskNames(compute_chains(graph))
    assert names.task_id(SubtaskId("a", 2)) == names.task_id(SubtaskId("b", 2)) == "a.b.2"
    assert names.task_id(SubtaskId("c", 0)) == "c.0"
    assert names.subtasks("a.b.2") == (SubtaskId("a", 2), SubtaskId("b", 2))
    assert names.head("a.b.2") == SubtaskId("a", 2) and names.subtasks("c.0") == (SubtaskId("c", 0),)
    for other in ("a.2", "b.2", "b.a.2", "a.b.c.2", "x.0", "a.b", "r0", "a.b.02"):
        assert names.subtasks(other) is None, other
    for step in ("a", "b", "c"):
        for i in range(3):
            members = names.subtasks(names.task_id(SubtaskId(step, i)))
            assert members is not None and SubtaskId(step, i) in members


def _random_graph(rng: random.Random, n: int) -> JobGraph:
    builder = JobGraphBuilder()
    ids = [f"s{i}" for i in range(n)]
    for sid in ids:
        builder.step(sid, parallelism=rng.choice((1, 2, 2, 3)))
    for target in range(1, n):
        for source in rng.sample(range(target), k=min(target, rng.choice((1, 1, 1, 2)))):
            builder.edge(ids[source], ids[target], exchange=rng.choice(("PIPELINED", "PIPELINED", "BLOCKING")),
                         distribution=rng.choice(("POINTWISE", "POINTWISE", "BROADCAST")))
    return builder.build()


def test_a_chain_never_crosses_a_region_boundary_and_covers_every_step_once() -> None:
    rng = random.Random(11)
    seen_chain = False
    for _ in range(300):
        graph = _random_graph(rng, rng.randint(2, 7))
        chains, regions = compute_chains(graph), compute_regions(graph)
        members = [s for c in chains.chains for s in c.steps]
        assert sorted(members) == sorted(s.id for s in graph.steps)
        for chain in chains.chains:
            seen_chain |= len(chain.steps) > 1
            parallelism = {graph.step(s).parallelism for s in chain.steps}
            assert len(parallelism) == 1
            for i in range(parallelism.pop()):
                assert len({regions.region_of(s).id for s in chain.subtasks(i)}) == 1, (chain, i)
        for edge in graph.edges:
            assert chains.chained(edge) == (chains.of(edge.source) is chains.of(edge.target)
                                            and len(chains.of(edge.source).steps) > 1)
            if edge.exchange.value == "PIPELINED":
                assert chains.chained(edge) != (chains.why_not(edge) is not None)
    assert seen_chain


def test_chain_is_a_value() -> None:
    assert Chain(("a", "b")) == Chain(("a", "b")) and Chain(("a",)).head == Chain(("a",)).tail == "a"

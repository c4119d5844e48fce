"""Properties of regions and restart sets on random graphs, and agreement with the brute-force reference."""

from __future__ import annotations

import networkx as nx
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from airflow_region_failover.failover.availability import KnownAvailability
from airflow_region_failover.failover.planner import plan_restart
from airflow_region_failover.failover.topology import FailoverTopology
from airflow_region_failover.graph import JobGraph, JobGraphBuilder, PartitionId, SubtaskId
from airflow_region_failover.graph.model import Exchange
from airflow_region_failover.graph.regions import compute_regions
from airflow_region_failover.graph.subtasks import subtasks
from tests.support.reference import explicit_edges, reference_regions, reference_restart


@st.composite
def job_graphs(draw: st.DrawFn) -> JobGraph:
    n = draw(st.integers(1, 6))
    builder = JobGraphBuilder()
    for i in range(n):
        builder.step(f"s{i}", parallelism=draw(st.integers(1, 5)))
    for target in range(1, n):
        for source in range(target):
            if draw(st.integers(0, 2)) == 0:
                continue
            shared = draw(st.booleans())
            exchange = draw(st.sampled_from(["PIPELINED", "BLOCKING"]))
            builder.edge(
                f"s{source}",
                f"s{target}",
                # one result per producer and exchange when shared, so shared edges agree on the exchange
                exchange=exchange,
                distribution=draw(st.sampled_from(["POINTWISE", "BROADCAST"])),
                result=f"out{source}{exchange[0]}" if shared else None,
            )
    return builder.build()


@st.composite
def failures(draw: st.DrawFn) -> tuple[JobGraph, SubtaskId, frozenset[PartitionId]]:
    graph = draw(job_graphs())
    failed = draw(st.sampled_from(list(subtasks(graph))))
    partitions = [
        PartitionId(r.id, i)
        for r in graph.results
        if r.exchange is Exchange.BLOCKING
        for i in range(graph.step(r.producer).parallelism)
    ]
    lost = draw(st.sets(st.sampled_from(partitions))) if partitions else set()
    return graph, failed, frozenset(lost)


SETTINGS = settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@SETTINGS
@given(job_graphs())
def test_regions_partition_subtasks_and_match_the_reference(graph: JobGraph) -> None:
    regions = compute_regions(graph)
    members = [s for r in regions.regions for s in r.subtasks]
    assert sorted(members) == sorted(subtasks(graph))
    assert len(members) == len(set(members))
    assert {frozenset(r.subtasks) for r in regions.regions} == set(reference_regions(graph))


@SETTINGS
@given(job_graphs())
def test_pipelined_edges_stay_inside_a_region_and_the_region_graph_is_acyclic(graph: JobGraph) -> None:
    regions = compute_regions(graph)
    region_graph = nx.DiGraph()
    region_graph.add_nodes_from(r.index for r in regions.regions)
    for producer, consumer, _, exchange in explicit_edges(graph):
        a, b = regions.region_of(producer).index, regions.region_of(consumer).index
        if exchange is Exchange.PIPELINED:
            assert a == b
        elif a != b:
            region_graph.add_edge(a, b)
    assert nx.is_directed_acyclic_graph(region_graph)


@SETTINGS
@given(failures())
def test_restart_set_matches_the_reference_and_is_closed(
    case: tuple[JobGraph, SubtaskId, frozenset[PartitionId]],
) -> None:
    graph, failed, lost = case
    checker = KnownAvailability(lost)
    topology = FailoverTopology.build(graph)
    restart = set(plan_restart(topology, failed, checker).restart)
    assert restart == set(reference_restart(graph, failed, checker))
    assert failed in restart
    for producer, consumer, partition, exchange in explicit_edges(graph):
        if producer in restart:
            assert consumer in restart, "rule 2: consumers of a restarting producer restart"
        if consumer in restart and exchange is Exchange.BLOCKING and partition in lost:
            assert producer in restart, "rule 1: an unavailable input's producer restarts"
    for subtask in restart:
        assert set(topology.regions.region_of(subtask).subtasks) <= restart, "whole regions restart"


@SETTINGS
@given(failures())
def test_full_contains_region(case: tuple[JobGraph, SubtaskId, frozenset[PartitionId]]) -> None:
    graph, failed, lost = case
    topology = FailoverTopology.build(graph)
    region = set(plan_restart(topology, failed, KnownAvailability(lost), "region").restart)
    full = set(plan_restart(topology, failed, KnownAvailability(lost), "full").restart)
    assert region <= full == set(subtasks(graph))


@SETTINGS
@given(failures())
def test_named_cause_equals_an_unavailable_partition(case: tuple[JobGraph, SubtaskId, frozenset[PartitionId]]) -> None:
    graph, failed, lost = case
    topology = FailoverTopology.build(graph)
    by_checker = plan_restart(topology, failed, KnownAvailability(lost)).restart
    by_cause = plan_restart(topology, failed, KnownAvailability(), unavailable=lost).restart
    assert by_checker == by_cause

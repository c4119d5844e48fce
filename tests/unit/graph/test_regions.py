"""Failover regions: weakly connected over PIPELINED, merged across BLOCKING cycles, never N x M."""

from __future__ import annotations

import sys

from airflow_region_failover.graph import Edge, Exchange, JobGraph, JobGraphBuilder, SubtaskId
from airflow_region_failover.graph.dot import to_dot
from airflow_region_failover.graph.model import Distribution
from airflow_region_failover.graph.regions import compute_regions
from airflow_region_failover.graph.scc import strongly_connected_components
from airflow_region_failover.graph.subtasks import consumed_partitions, consumed_range


def _regions(graph: JobGraph) -> list[list[str]]:
    return [[str(s) for s in r.subtasks] for r in compute_regions(graph).regions]


def test_pointwise_pipelined_makes_one_region_per_lane() -> None:
    #   a#0 -P-> b#0 -B-> c#0
    #   a#1 -P-> b#1 -B-> c#1      (a->b POINTWISE PIPELINED, b->c POINTWISE BLOCKING)
    graph = (
        JobGraphBuilder()
        .step("a", parallelism=2)
        .step("b", parallelism=2)
        .step("c", parallelism=2)
        .edge("a", "b", exchange="PIPELINED", distribution="POINTWISE")
        .edge("b", "c", exchange="BLOCKING", distribution="POINTWISE")
        .build()
    )
    assert _regions(graph) == [["a#0", "b#0"], ["a#1", "b#1"], ["c#0"], ["c#1"]]
    assert [r.id for r in compute_regions(graph).regions] == ["r0", "r1", "r2", "r3"]


def test_all_to_all_pipelined_joins_everything() -> None:
    #   a#0 \ /-> b#0
    #        X            (ALL_TO_ALL PIPELINED)
    #   a#1 / \-> b#1
    graph = (
        JobGraphBuilder().step("a", parallelism=2).step("b", parallelism=2).edge("a", "b", exchange="PIPELINED").build()
    )
    assert _regions(graph) == [["a#0", "a#1", "b#0", "b#1"]]


def test_blocking_cycle_between_regions_is_merged() -> None:
    #   a -P-> b          region {a, b} and region {c} would wait for each other:
    #   a -B-> c -B-> b   a->c and c->b form a cycle through BLOCKING results
    graph = (
        JobGraphBuilder()
        .step("a")
        .step("b")
        .step("c")
        .edge("a", "b", exchange="PIPELINED")
        .edge("a", "c", exchange="BLOCKING")
        .edge("c", "b", exchange="BLOCKING")
        .build()
    )
    assert _regions(graph) == [["a#0", "c#0", "b#0"]]


def test_blocking_cycle_through_dense_hub_is_merged_per_lane() -> None:
    #   x#0 -P-> y#0        x -B(ALL_TO_ALL)-> z -B(POINTWISE)-> y
    #   x#1 -P-> y#1        every x lane reaches z, z#i reaches y#i: all lanes and z merge
    #          z#0, z#1
    graph = (
        JobGraphBuilder()
        .step("x", parallelism=2)
        .step("y", parallelism=2)
        .step("z", parallelism=2)
        .edge("x", "y", exchange="PIPELINED", distribution="POINTWISE")
        .edge("x", "z", exchange="BLOCKING")
        .edge("z", "y", exchange="BLOCKING", distribution="POINTWISE")
        .build()
    )
    assert _regions(graph) == [["x#0", "x#1", "z#0", "z#1", "y#0", "y#1"]]


def test_pointwise_mapping_follows_flink_for_more_and_fewer_consumers() -> None:
    #   S=5 > T=2: consumer j reads [j*5//2, (j+1)*5//2) -> [0,1], [2,3,4]
    #   S=2 < T=5: producer p feeds [ceil(p*5/2), ceil((p+1)*5/2)) -> p0: 0..2, p1: 3..4
    more = Edge("a", "b", Exchange.BLOCKING, Distribution.POINTWISE, "r")
    assert [list(consumed_range(more, 5, 2, j)) for j in range(2)] == [[0, 1], [2, 3, 4]]
    assert [list(consumed_range(more, 2, 5, j)) for j in range(5)] == [[0], [0], [0], [1], [1]]
    assert [list(consumed_range(more, 4, 4, j)) for j in range(4)] == [[0], [1], [2], [3]]
    graph = (
        JobGraphBuilder()
        .step("a", parallelism=2)
        .step("b", parallelism=5)
        .edge("a", "b", exchange="PIPELINED", distribution="POINTWISE")
        .build()
    )
    assert _regions(graph) == [["a#0", "b#0", "b#1", "b#2"], ["a#1", "b#3", "b#4"]]
    reads = consumed_partitions(graph, SubtaskId("b", 3))
    assert [str(p) for ps in reads.values() for p in ps] == ["a->b#1"]


def test_scc_of_a_100000_node_ring_does_not_overflow_the_stack() -> None:
    n = 100_000
    ring = [[(i + 1) % n] for i in range(n)]
    limit = sys.getrecursionlimit()
    assert set(strongly_connected_components(ring)) == {0}
    assert sys.getrecursionlimit() == limit
    chain = [[i + 1] for i in range(n - 1)] + [[]]
    assert len(set(strongly_connected_components(chain))) == n


def test_dense_exchange_is_never_expanded() -> None:
    #   a (p=3000) -B(ALL_TO_ALL)-> b (p=3000): 6000 regions, one partition group
    graph = (
        JobGraphBuilder()
        .step("a", parallelism=3000)
        .step("b", parallelism=3000)
        .edge("a", "b", exchange="BLOCKING")
        .build()
    )
    regions = compute_regions(graph)
    assert len(regions.regions) == 6000
    assert sum(1 for _ in regions.groups()) == 1


def test_dot_colours_steps_by_region_family() -> None:
    graph = (
        JobGraphBuilder()
        .step("a", parallelism=2)
        .step("b", parallelism=2)
        .step("c")
        .edge("a", "b", exchange="PIPELINED", distribution="POINTWISE")
        .edge("b", "c", exchange="BLOCKING")
        .build()
    )
    dot = to_dot(compute_regions(graph))
    assert dot.startswith("digraph job_graph {")
    assert '"a" [label="a ×2"' in dot and '"c" [label="c"' in dot
    assert '"b" -> "c" [style=dashed' in dot and '"a" -> "b" [style=solid' in dot
    assert dot.count("subgraph") == 2

"""Brute-force reference of regions and restart sets, for tests and benchmarks only.

It expands every exchange into explicit subtask edges (N x M for ALL_TO_ALL) and uses networkx: regions are the
weakly connected components over PIPELINED edges, merged by the strongly connected components of the explicit
region graph; the restart set is the least fixed point of the three rules. Slow on purpose: it is the
specification the fast path (:mod:`.graph.regions`, :mod:`.failover.planner`) is checked against.
"""

from __future__ import annotations

from collections.abc import Iterable

import networkx as nx

from airflow_region_failover.failover.availability import AvailabilityChecker
from airflow_region_failover.graph.ids import PartitionId, SubtaskId
from airflow_region_failover.graph.model import Exchange, JobGraph
from airflow_region_failover.graph.subtasks import consumed_partitions, subtasks


def explicit_edges(graph: JobGraph) -> list[tuple[SubtaskId, SubtaskId, PartitionId, Exchange]]:
    """Every (producer subtask, consumer subtask, partition, exchange), one per partition read."""
    out: list[tuple[SubtaskId, SubtaskId, PartitionId, Exchange]] = []
    for consumer in subtasks(graph):
        for edge, partitions in consumed_partitions(graph, consumer).items():
            out.extend((SubtaskId(edge.source, p.index), consumer, p, edge.exchange) for p in partitions)
    return out


def reference_regions(graph: JobGraph) -> list[frozenset[SubtaskId]]:
    """Regions by explicit expansion (weak components over PIPELINED, then SCC merge of the region graph)."""
    edges = explicit_edges(graph)
    pipelined = nx.Graph()
    pipelined.add_nodes_from(subtasks(graph))
    pipelined.add_edges_from((a, b) for a, b, _, x in edges if x is Exchange.PIPELINED)
    components = [frozenset(c) for c in nx.connected_components(pipelined)]
    owner = {s: i for i, c in enumerate(components) for s in c}
    region_graph = nx.DiGraph()
    region_graph.add_nodes_from(range(len(components)))
    region_graph.add_edges_from(
        (owner[a], owner[b]) for a, b, _, x in edges if x is Exchange.BLOCKING and owner[a] != owner[b]
    )
    return [frozenset().union(*(components[i] for i in scc)) for scc in nx.strongly_connected_components(region_graph)]


def reference_restart(
    graph: JobGraph,
    failed: SubtaskId,
    checker: AvailabilityChecker,
    unavailable: Iterable[PartitionId] = (),
) -> frozenset[SubtaskId]:
    """The least set of subtasks containing ``failed``'s region and closed under both rules."""
    named = frozenset(unavailable)
    regions = reference_regions(graph)
    owner = {s: r for r in regions for s in r}
    edges = explicit_edges(graph)
    restart: set[SubtaskId] = set(owner[failed])
    changed = True
    while changed:
        changed = False
        for producer, consumer, partition, exchange in edges:
            pull: frozenset[SubtaskId] = frozenset()
            if (
                consumer in restart
                and exchange is Exchange.BLOCKING
                and (partition in named or not checker.is_available(partition))
            ):
                pull = owner[producer]
            if producer in restart:
                pull = pull | owner[consumer]
            if not pull <= restart:
                restart |= pull
                changed = True
    return frozenset(restart)

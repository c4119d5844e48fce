"""Failover regions: the sets of subtasks that restart as one unit (Flink's pipelined regions).

Rule (Flink's ``SchedulingPipelinedRegionComputeUtil``):

1. Subtasks joined by a PIPELINED exchange belong to the same region: regions start as the weakly connected
   components of the subtask graph restricted to PIPELINED partition edges.
2. Regions that form a cycle through BLOCKING exchanges are merged into one region (a cycle would make each
   wait for the other's blocking result): the strongly connected components of the region graph.

An ``AUTO`` edge of a graph not resolved by a plan (:mod:`.auto`) counts as BLOCKING in both rules: an unresolved
graph has the regions of its default plan.

Dense exchanges are never expanded edge by edge: each :class:`~.subtasks.PartitionGroup` joins its producers and
consumers in O(|producers| + |consumers|) union operations (rule 1), and in the region graph a group with more than
one producer and more than one consumer becomes a *hub* node (producer regions -> hub -> consumer regions), which
keeps reachability — hence the strongly connected components among regions — exactly as the full N x M graph
(rule 2 above, merging BLOCKING cycles; Flink's "logical region" shortcut). Region building is O(subtasks + groups) up
to union-find's near- constant factor.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field

from airflow_region_failover.graph.errors import GraphError
from airflow_region_failover.graph.ids import SubtaskId
from airflow_region_failover.graph.model import Exchange, JobGraph
from airflow_region_failover.graph.scc import strongly_connected_components
from airflow_region_failover.graph.subtasks import PartitionGroup, group_bounds, partition_groups


@dataclass(frozen=True)
class Region:
    """A failover region: ``id`` is ``r<index>``, regions numbered by their first subtask."""

    index: int
    subtasks: tuple[SubtaskId, ...]

    @property
    def id(self) -> str:
        """``r<index>``."""
        return f"r{self.index}"

    @property
    def steps(self) -> tuple[str, ...]:
        """The steps with a subtask in this region, in topological order."""
        return tuple(dict.fromkeys(s.step for s in self.subtasks))


@dataclass(frozen=True)
class IndexedGroup:
    """A partition group with the global subtask numbers of its producers and consumers."""

    group: PartitionGroup
    producer_offset: int
    consumer_offset: int

    @property
    def producers(self) -> range:
        """Global numbers of the producer subtasks."""
        r = self.group.producers
        return range(self.producer_offset + r.start, self.producer_offset + r.stop)

    @property
    def consumers(self) -> range:
        """Global numbers of the consumer subtasks."""
        r = self.group.consumers
        return range(self.consumer_offset + r.start, self.consumer_offset + r.stop)


@dataclass(frozen=True)
class Regions:
    """The failover regions of a graph. Subtasks are numbered globally: steps in topological order, then index."""

    graph: JobGraph
    regions: tuple[Region, ...]
    offsets: dict[str, int] = field(repr=False)
    region_index: tuple[int, ...] = field(repr=False)

    def number(self, subtask: SubtaskId) -> int:
        """The global number of ``subtask``."""
        parallelism = self.graph.step(subtask.step).parallelism
        if not 0 <= subtask.index < parallelism:
            raise GraphError(
                f"subtask {subtask} does not exist: step {subtask.step!r} has parallelism {parallelism} "
                f"(indices 0..{parallelism - 1})"
            )
        return self.offsets[subtask.step] + subtask.index

    def region_of(self, subtask: SubtaskId) -> Region:
        """The region containing ``subtask``."""
        return self.regions[self.region_index[self.number(subtask)]]

    def groups(self) -> Iterator[IndexedGroup]:
        """Every partition group of every edge, with global subtask numbers."""
        for edge in self.graph.edges:
            source, target = self.graph.step(edge.source), self.graph.step(edge.target)
            for group in partition_groups(edge, source.parallelism, target.parallelism):
                yield IndexedGroup(group, self.offsets[edge.source], self.offsets[edge.target])


def compute_regions(graph: JobGraph) -> Regions:
    """The failover regions of ``graph`` (see the module docstring for the rule)."""
    return compute_regions_and_blocking_groups(graph)[0]


def compute_regions_and_blocking_groups(graph: JobGraph) -> tuple[Regions, list[IndexedGroup]]:
    """The failover regions of ``graph`` and its BLOCKING partition groups (in :meth:`Regions.groups` order).

    For the failover topology, which needs both: the groups are expanded once. PIPELINED edges are joined in the
    union-find straight from their group bounds, without building group objects.
    """
    offsets, names = _number_subtasks(graph)
    pipelined = _UnionFind(len(names))
    blocking: list[IndexedGroup] = []
    for edge in graph.edges:
        source, target = graph.step(edge.source).parallelism, graph.step(edge.target).parallelism
        source_offset, target_offset = offsets[edge.source], offsets[edge.target]
        if edge.exchange is Exchange.PIPELINED:
            for producers, consumers in group_bounds(edge, source, target):
                pipelined.union_all(
                    range(source_offset + producers.start, source_offset + producers.stop),
                    range(target_offset + consumers.start, target_offset + consumers.stop),
                )
        else:
            blocking.extend(
                IndexedGroup(g, source_offset, target_offset) for g in partition_groups(edge, source, target)
            )
    find = pipelined.find
    roots = [find(i) for i in range(len(names))]
    merged = _merge_blocking_cycles(roots, blocking)
    return _label(graph, offsets, names, merged), blocking


def _number_subtasks(graph: JobGraph) -> tuple[dict[str, int], list[SubtaskId]]:
    offsets: dict[str, int] = {}
    names: list[SubtaskId] = []
    for step in graph.steps:
        offsets[step.id] = len(names)
        names.extend(SubtaskId(step.id, i) for i in range(step.parallelism))
    return offsets, names


def _merge_blocking_cycles(roots: list[int], groups: list[IndexedGroup]) -> list[int]:
    """Map every subtask to a representative, merging regions that share a BLOCKING cycle (rule 2 above:
    "regions that form a cycle through BLOCKING exchanges are merged into one region")."""
    dense = {root: i for i, root in enumerate(dict.fromkeys(roots))}
    adjacency: list[list[int]] = [[] for _ in dense]
    for g in groups:
        if g.group.edge.exchange is Exchange.PIPELINED:
            continue
        sources = {dense[roots[p]] for p in g.producers}
        targets = {dense[roots[c]] for c in g.consumers}
        if len(sources) > 1 and len(targets) > 1:
            hub = len(adjacency)
            adjacency.append(sorted(targets))
            for s in sources:
                adjacency[s].append(hub)
        else:
            for s in sources:
                adjacency[s].extend(t for t in targets if t != s)
    component = strongly_connected_components(adjacency)
    return [component[dense[root]] for root in roots]


def _label(graph: JobGraph, offsets: dict[str, int], names: list[SubtaskId], merged: list[int]) -> Regions:
    """Number regions by their first subtask (global order) and build the values."""
    order: dict[int, int] = {}
    region_index = [order.setdefault(representative, len(order)) for representative in merged]
    members: list[list[SubtaskId]] = [[] for _ in order]
    for name, index in zip(names, region_index, strict=True):
        members[index].append(name)
    regions = tuple(Region(i, tuple(m)) for i, m in enumerate(members))
    return Regions(graph, regions, offsets, tuple(region_index))


class _UnionFind:
    """Disjoint sets over ``0..n-1`` (union by size, path halving)."""

    def __init__(self, n: int) -> None:
        self._parent = list(range(n))
        self._size = [1] * n

    def find(self, x: int) -> int:
        parent = self._parent
        while parent[x] != x:
            parent[x] = parent[parent[x]]
            x = parent[x]
        return x

    def union(self, a: int, b: int) -> int:
        a, b = self.find(a), self.find(b)
        if a == b:
            return a
        if self._size[a] < self._size[b]:
            a, b = b, a
        self._parent[b] = a
        self._size[a] += self._size[b]
        return a

    def union_all(self, first: range, second: range) -> None:
        """Put every element of ``first`` and ``second`` into one set."""
        anchor = first.start
        for x in first:
            anchor = self.union(anchor, x)
        for x in second:
            anchor = self.union(anchor, x)

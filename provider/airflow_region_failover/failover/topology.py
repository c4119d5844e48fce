"""The failover topology: regions plus, per region, the BLOCKING partition groups it consumes and produces.

Built once per job graph and reused for every failure. Only BLOCKING groups cross regions (a PIPELINED exchange
lies inside one region by construction), so only they are indexed. Size is O(subtasks + groups).
"""

from __future__ import annotations

from dataclasses import dataclass

from airflow_region_failover.graph.model import Exchange, JobGraph
from airflow_region_failover.graph.regions import IndexedGroup, Regions, compute_regions


@dataclass(frozen=True)
class FailoverTopology:
    """Regions of a graph and the BLOCKING groups each region consumes (``consumes``) and produces."""

    regions: Regions
    groups: tuple[IndexedGroup, ...]
    consumes: tuple[tuple[int, ...], ...]
    produces: tuple[tuple[int, ...], ...]

    @property
    def graph(self) -> JobGraph:
        """The job graph."""
        return self.regions.graph

    @classmethod
    def build(cls, graph: JobGraph) -> FailoverTopology:
        """Compute regions and index the BLOCKING groups by region."""
        regions = compute_regions(graph)
        groups = tuple(g for g in regions.groups() if g.group.edge.exchange is Exchange.BLOCKING)
        consumes: list[set[int]] = [set() for _ in regions.regions]
        produces: list[set[int]] = [set() for _ in regions.regions]
        region_index = regions.region_index
        for k, g in enumerate(groups):
            for number in g.consumers:
                consumes[region_index[number]].add(k)
            for number in g.producers:
                produces[region_index[number]].add(k)
        return cls(
            regions,
            groups,
            tuple(tuple(sorted(s)) for s in consumes),
            tuple(tuple(sorted(s)) for s in produces),
        )

"""The failover topology: regions plus, per region, the BLOCKING partition groups it consumes and produces.

Built once per job graph and reused for every failure. Only BLOCKING groups cross regions (a PIPELINED exchange
lies inside one region by construction), so only they are indexed. Size is O(subtasks + groups).
"""

from __future__ import annotations

from dataclasses import dataclass

from airflow_region_failover.graph.model import JobGraph
from airflow_region_failover.graph.regions import IndexedGroup, Regions, compute_regions_and_blocking_groups


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
        regions, blocking = compute_regions_and_blocking_groups(graph)
        groups = tuple(blocking)
        # Groups are visited in increasing k, so each region's list comes out sorted; a region already holding k
        # has it last, which makes the duplicate check O(1) (no sets, no sorting).
        consumes: list[list[int]] = [[] for _ in regions.regions]
        produces: list[list[int]] = [[] for _ in regions.regions]
        region_index = regions.region_index
        for k, g in enumerate(groups):
            for number in g.consumers:
                held = consumes[region_index[number]]
                if not held or held[-1] != k:
                    held.append(k)
            for number in g.producers:
                held = produces[region_index[number]]
                if not held or held[-1] != k:
                    held.append(k)
        return cls(regions, groups, tuple(map(tuple, consumes)), tuple(map(tuple, produces)))

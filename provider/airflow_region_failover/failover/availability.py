"""*Is this result partition still available?* — the question the restart planner asks (Flink's
``ResultPartitionAvailabilityChecker``).

A checker answers for one DAG run. The store provides the real one (committed manifest + objects present);
:class:`KnownAvailability` answers from explicit sets, for the CLI, tests and benchmarks.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Protocol

from airflow_region_failover.graph.ids import PartitionId


class AvailabilityChecker(Protocol):
    """Answers whether a BLOCKING result partition can be consumed again without re-producing it."""

    def is_available(self, partition: PartitionId) -> bool:
        """True if ``partition`` is committed and intact."""
        ...


@dataclass(frozen=True)
class KnownAvailability:
    """Every partition is available except those in ``unavailable``."""

    unavailable: frozenset[PartitionId] = frozenset()

    @classmethod
    def except_(cls, partitions: Iterable[PartitionId | str]) -> KnownAvailability:
        """All available but ``partitions`` (ids or ``result#i`` strings)."""
        return cls(frozenset(p if isinstance(p, PartitionId) else PartitionId.parse(p) for p in partitions))

    def is_available(self, partition: PartitionId) -> bool:
        """False exactly for the partitions named unavailable."""
        return partition not in self.unavailable


@dataclass(frozen=True)
class NothingAvailable:
    """No partition is available (e.g. nothing has been committed yet)."""

    def is_available(self, partition: PartitionId) -> bool:
        """Always False."""
        return False

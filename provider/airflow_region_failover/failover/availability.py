"""*Is this result partition still available?* — the question the restart planner asks (Flink's
``ResultPartitionAvailabilityChecker``).

A checker answers for one DAG run. The store provides the real one (committed manifest + objects present);
:class:`BeingProduced` adds Flink's rule for producers still at work; :class:`KnownAvailability` answers from
explicit sets, for the CLI, tests and benchmarks.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Protocol

from airflow_region_failover.graph.ids import PartitionId, SubtaskId
from airflow_region_failover.graph.model import JobGraph


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


@dataclass(frozen=True)
class BeingProduced:
    """Committed partitions, plus those whose producer is still at work (queued, running, or retrying).

    Rule (Flink's partition tracker): a BLOCKING partition is tracked — available to the failover strategy — from
    the moment its producer is deployed, not only once it is finished; a consumer restarted meanwhile simply
    waits for it. So a failure elsewhere never restarts a producer that is merely not done yet. A producer whose
    partition is missing although it *finished* is not at work, and is restarted (backtracking).
    """

    committed: AvailabilityChecker
    producing: frozenset[PartitionId]

    @classmethod
    def of(cls, committed: AvailabilityChecker, graph: JobGraph, at_work: Iterable[SubtaskId]) -> BeingProduced:
        """``committed`` extended with every partition the subtasks ``at_work`` produce."""
        return cls(committed, frozenset(PartitionId(r.id, s.index) for s in at_work for r in graph.outputs(s.step)))

    def is_available(self, partition: PartitionId) -> bool:
        """True if ``partition``'s producer is at work or the partition is committed and intact."""
        return partition in self.producing or self.committed.is_available(partition)

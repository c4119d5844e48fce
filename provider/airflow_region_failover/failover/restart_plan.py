"""The restart plan as a value: which subtasks restart after one failure, and why each region is in the set."""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum
from typing import Any

from airflow_region_failover.failover.options import FailoverStrategy
from airflow_region_failover.graph.ids import SubtaskId
from airflow_region_failover.graph.regions import Region


class Reason(str, Enum):
    """Why a region restarts (the first rule that pulled it in)."""

    FAILED = "failed"
    """It contains the failed subtask: the walk starts at its region."""
    PRODUCER_UNAVAILABLE = "producer-unavailable"
    """It produces a BLOCKING partition that a restarting region needs and that is not available (upstream:
    "each result partition the region consumes that is not available pulls in its producer's region")."""
    CONSUMER = "consumer"
    """It consumes a partition of a restarting region (downstream: "every consumer region of every partition the
    region produces is pulled in, whatever its state, because a re-produced result may differ")."""
    FULL = "full"
    """Only the ``full`` failover strategy restarts it."""


@dataclass(frozen=True)
class RegionRestart:
    """One region of the restart set, the rule that pulled it in, and the partition or region behind it."""

    region: Region
    reason: Reason
    cause: str

    def to_dict(self) -> dict[str, Any]:
        """JSON-able form."""
        return {
            "region": self.region.id,
            "steps": list(self.region.steps),
            "subtasks": [str(s) for s in self.region.subtasks],
            "reason": self.reason.value,
            "cause": self.cause,
        }


@dataclass(frozen=True)
class RestartPlan:
    """What to restart after ``failed`` failed, under failover ``strategy`` (``region`` or ``full``)."""

    failed: SubtaskId
    strategy: FailoverStrategy
    regions: tuple[RegionRestart, ...]

    @property
    def restart(self) -> tuple[SubtaskId, ...]:
        """Every subtask to restart, sorted."""
        return tuple(sorted(s for r in self.regions for s in r.region.subtasks))

    def to_dict(self) -> dict[str, Any]:
        """JSON-able form: ``failed``, ``strategy``, ``restart`` (sorted subtask ids) and ``regions``."""
        return {
            "failed": str(self.failed),
            "strategy": self.strategy.value,
            "restart": [str(s) for s in self.restart],
            "regions": [r.to_dict() for r in self.regions],
        }

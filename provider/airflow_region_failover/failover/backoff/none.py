"""``restart-strategy.type: none`` (aliases ``off``, ``disable``): never restart (Flink's
``NoRestartBackoffTimeStrategy``). It has no options of its own."""

from __future__ import annotations

import random
from collections.abc import Mapping
from dataclasses import dataclass
from typing import ClassVar

from airflow_region_failover.failover.backoff.base import Clock, RestartBackoffStrategy, StrategyState

TYPE_NAME = "disable"


class NoRestart(RestartBackoffStrategy):
    """Never restart (``none``/``off``/``disable``): ``can_restart`` is always false, backoff 0."""

    type_name = TYPE_NAME

    def notify_failure(self, timestamp_ms: int | None = None) -> bool:
        """Nothing to record; every failure counts as a new attempt (Flink returns true)."""
        return True

    def can_restart(self) -> bool:
        """Always false."""
        return False

    def get_backoff_time(self) -> int:
        """Always 0."""
        return 0

    def state_dict(self) -> StrategyState:
        """No state besides the type."""
        return {"type": self.type_name}

    def load_state(self, state: Mapping[str, object]) -> None:
        """Check the type; there is nothing else to load."""
        self._check_state_type(state)

    def __repr__(self) -> str:
        return "NoRestart()"


@dataclass(frozen=True)
class NoRestartConfig:
    """``restart-strategy.type: none``: never restart."""

    type_name: ClassVar[str] = TYPE_NAME
    keys: ClassVar[Mapping[str, str]] = {}

    @classmethod
    def from_options(cls, options: Mapping[str, object]) -> NoRestartConfig:
        """The configuration (there is nothing to read)."""
        return cls()

    def create(self, clock: Clock, rng: random.Random) -> NoRestart:
        """The strategy (clock and randomness are unused)."""
        return NoRestart()

    def to_options(self) -> dict[str, str]:
        """The type-specific options (none)."""
        return {}

"""``restart-strategy.type: fixed-delay`` (alias ``fixeddelay``): at most ``attempts`` restarts, each after a
fixed delay (Flink's ``FixedDelayRestartBackoffTimeStrategy``).

Options: ``restart-strategy.fixed-delay.attempts`` (int >= 0, default 1), ``restart-strategy.fixed-delay.delay``
(duration, default 1 s).
"""

from __future__ import annotations

import random
from collections.abc import Mapping
from dataclasses import dataclass
from typing import ClassVar

from airflow_region_failover.failover.backoff.base import (
    Clock,
    RestartBackoffStrategy,
    StrategyState,
    option_key,
    require,
    state_int,
)
from airflow_region_failover.failover.values import (
    check_duration,
    check_int,
    format_duration_ms,
    parse_duration_value,
    parse_int,
)

TYPE_NAME = "fixed-delay"
ATTEMPTS_KEY = option_key(TYPE_NAME, "attempts")
DELAY_KEY = option_key(TYPE_NAME, "delay")


class FixedDelay(RestartBackoffStrategy):
    """Restart at most ``attempts`` times, each after ``delay_ms`` (Flink's fixed-delay strategy).

    Every failure increments the attempt counter; ``can_restart`` is ``counter <= attempts``, so exactly
    ``attempts`` failures are restarted and failure ``attempts + 1`` fails the job.
    """

    type_name = TYPE_NAME

    def __init__(self, attempts: int, delay_ms: int) -> None:
        require(attempts >= 0, "Maximum number of restart attempts must be at least 0.")
        require(delay_ms >= 0, "Backoff time between restart attempts must be at least 0 ms.")
        self.attempts = attempts
        self.delay_ms = delay_ms
        self._current_restart_attempt = 0

    def notify_failure(self, timestamp_ms: int | None = None) -> bool:
        """Count the failure as one more restart attempt; always a new attempt."""
        self._current_restart_attempt += 1
        return True

    def can_restart(self) -> bool:
        """True while no more than ``attempts`` failures were notified."""
        return self._current_restart_attempt <= self.attempts

    def get_backoff_time(self) -> int:
        """The fixed delay."""
        return self.delay_ms

    def state_dict(self) -> StrategyState:
        """``{"type": "fixed-delay", "current_restart_attempt": n}``."""
        return {"type": self.type_name, "current_restart_attempt": self._current_restart_attempt}

    def load_state(self, state: Mapping[str, object]) -> None:
        """Restore the attempt counter."""
        self._check_state_type(state)
        self._current_restart_attempt = state_int(state, "current_restart_attempt", minimum=0)

    def __repr__(self) -> str:
        return (
            f"FixedDelay(attempts={self.attempts}, delay_ms={self.delay_ms}, "
            f"current_restart_attempt={self._current_restart_attempt})"
        )


@dataclass(frozen=True)
class FixedDelayConfig:
    """``fixed-delay``: at most ``attempts`` restarts, each after ``delay_ms``."""

    attempts: int = 1
    delay_ms: int = 1_000

    type_name: ClassVar[str] = TYPE_NAME
    keys: ClassVar[Mapping[str, str]] = {"attempts": ATTEMPTS_KEY, "delay_ms": DELAY_KEY}

    def __post_init__(self) -> None:
        check_int(ATTEMPTS_KEY, self.attempts, 0, "a whole number of restart attempts >= 0")
        check_duration(DELAY_KEY, self.delay_ms, 0)

    @classmethod
    def from_options(cls, options: Mapping[str, object]) -> FixedDelayConfig:
        """Read this type's keys (defaults for keys not given)."""
        defaults = cls()
        return cls(
            parse_int(options[ATTEMPTS_KEY], ATTEMPTS_KEY) if ATTEMPTS_KEY in options else defaults.attempts,
            parse_duration_value(options[DELAY_KEY], DELAY_KEY) if DELAY_KEY in options else defaults.delay_ms,
        )

    def create(self, clock: Clock, rng: random.Random) -> FixedDelay:
        """A fresh strategy (clock and randomness are unused)."""
        return FixedDelay(self.attempts, self.delay_ms)

    def to_options(self) -> dict[str, str]:
        """The type-specific options as Flink writes them."""
        return {ATTEMPTS_KEY: str(self.attempts), DELAY_KEY: format_duration_ms(self.delay_ms)}

"""``restart-strategy.type: failure-rate`` (alias ``failurerate``): restart unless more than
``max-failures-per-interval`` failures fall within ``failure-rate-interval`` (Flink's
``FailureRateRestartBackoffTimeStrategy``).

Options: ``restart-strategy.failure-rate.max-failures-per-interval`` (int >= 1, default 1),
``...failure-rate-interval`` (duration > 0, default 1 min), ``...delay`` (duration, default 1 s).
"""

from __future__ import annotations

import random
from collections import deque
from collections.abc import Mapping
from dataclasses import dataclass
from typing import ClassVar

from airflow_region_failover.failover.backoff.base import (
    Clock,
    RestartBackoffStrategy,
    StrategyState,
    option_key,
    require,
    state_int_list,
)
from airflow_region_failover.failover.values import (
    check_duration,
    check_int,
    format_duration_ms,
    parse_duration_value,
    parse_int,
)

TYPE_NAME = "failure-rate"
MAX_FAILURES_KEY = option_key(TYPE_NAME, "max-failures-per-interval")
INTERVAL_KEY = option_key(TYPE_NAME, "failure-rate-interval")
DELAY_KEY = option_key(TYPE_NAME, "delay")


class FailureRate(RestartBackoffStrategy):
    """Restart unless more than ``max_failures_per_interval`` failures fell within the interval (inclusive).

    Flink keeps the last ``max + 1`` failure times; once it holds ``max + 1`` of them, a restart is allowed only
    if the oldest is *more* than ``failure_rate_interval_ms`` before now: ``max + 1`` failures spanning exactly
    the interval fail the job.  The delay before each restart is fixed.
    """

    type_name = TYPE_NAME

    def __init__(
        self, max_failures_per_interval: int, failure_rate_interval_ms: int, delay_ms: int, clock: Clock
    ) -> None:
        require(
            max_failures_per_interval > 0,
            "Maximum number of restart attempts per time unit must be greater than 0.",
        )
        require(failure_rate_interval_ms > 0, "Failures interval must be greater than 0 ms.")
        require(delay_ms >= 0, "Backoff time must be at least 0 ms.")
        self.max_failures_per_interval = max_failures_per_interval
        self.failure_rate_interval_ms = failure_rate_interval_ms
        self.delay_ms = delay_ms
        self._clock = clock
        self._failure_timestamps: deque[int] = deque()

    def notify_failure(self, timestamp_ms: int | None = None) -> bool:
        """Remember the failure time, forgetting the oldest once ``max + 1`` are held; always a new attempt."""
        if self._is_queue_full():
            self._failure_timestamps.popleft()
        self._failure_timestamps.append(self._clock() if timestamp_ms is None else timestamp_ms)
        return True

    def can_restart(self) -> bool:
        """False iff ``max + 1`` failures are held and the oldest is at most the interval before now."""
        if not self._is_queue_full():
            return True
        return self._clock() - self._failure_timestamps[0] > self.failure_rate_interval_ms

    def get_backoff_time(self) -> int:
        """The fixed delay."""
        return self.delay_ms

    def state_dict(self) -> StrategyState:
        """``{"type": "failure-rate", "failure_timestamps": [ms, ...]}`` (oldest first)."""
        return {"type": self.type_name, "failure_timestamps": list(self._failure_timestamps)}

    def load_state(self, state: Mapping[str, object]) -> None:
        """Restore the failure times; only the newest ``max + 1`` are kept, exactly what Flink's queue holds."""
        self._check_state_type(state)
        timestamps = state_int_list(state, "failure_timestamps")
        keep = self.max_failures_per_interval + 1
        self._failure_timestamps = deque(timestamps[-keep:])

    def _is_queue_full(self) -> bool:
        return len(self._failure_timestamps) > self.max_failures_per_interval

    def __repr__(self) -> str:
        return (
            f"FailureRate(max_failures_per_interval={self.max_failures_per_interval}, "
            f"failure_rate_interval_ms={self.failure_rate_interval_ms}, delay_ms={self.delay_ms}, "
            f"failure_timestamps={list(self._failure_timestamps)})"
        )


@dataclass(frozen=True)
class FailureRateConfig:
    """``failure-rate``: restart unless more than ``max_failures_per_interval`` failures fall in the interval."""

    max_failures_per_interval: int = 1
    failure_rate_interval_ms: int = 60_000
    delay_ms: int = 1_000

    type_name: ClassVar[str] = TYPE_NAME
    keys: ClassVar[Mapping[str, str]] = {
        "max_failures_per_interval": MAX_FAILURES_KEY,
        "failure_rate_interval_ms": INTERVAL_KEY,
        "delay_ms": DELAY_KEY,
    }

    def __post_init__(self) -> None:
        check_int(MAX_FAILURES_KEY, self.max_failures_per_interval, 1, "a whole number of failures >= 1")
        check_duration(INTERVAL_KEY, self.failure_rate_interval_ms, 1)
        check_duration(DELAY_KEY, self.delay_ms, 0)

    @classmethod
    def from_options(cls, options: Mapping[str, object]) -> FailureRateConfig:
        """Read this type's keys (defaults for keys not given)."""
        d = cls()
        return cls(
            parse_int(options[MAX_FAILURES_KEY], MAX_FAILURES_KEY)
            if MAX_FAILURES_KEY in options else d.max_failures_per_interval,
            parse_duration_value(options[INTERVAL_KEY], INTERVAL_KEY)
            if INTERVAL_KEY in options else d.failure_rate_interval_ms,
            parse_duration_value(options[DELAY_KEY], DELAY_KEY) if DELAY_KEY in options else d.delay_ms,
        )

    def create(self, clock: Clock, rng: random.Random) -> FailureRate:
        """A fresh strategy reading ``clock`` (randomness is unused)."""
        return FailureRate(self.max_failures_per_interval, self.failure_rate_interval_ms, self.delay_ms, clock)

    def to_options(self) -> dict[str, str]:
        """The type-specific options as Flink writes them."""
        return {
            MAX_FAILURES_KEY: str(self.max_failures_per_interval),
            INTERVAL_KEY: format_duration_ms(self.failure_rate_interval_ms),
            DELAY_KEY: format_duration_ms(self.delay_ms),
        }

"""``restart-strategy.type: exponential-delay`` (alias ``exponentialdelay``): jittered exponential backoff that
merges failures arriving while a restart is pending and resets after a quiet period (Flink >= 1.19's
``ExponentialDelayRestartBackoffTimeStrategy``).

Options (``restart-strategy.exponential-delay.*``): ``initial-backoff`` (duration >= 1 ms, default 1 s),
``max-backoff`` (duration >= initial, default 1 min), ``backoff-multiplier`` (number > 1, default 1.5),
``reset-backoff-threshold`` (duration >= 1 ms, default 1 h), ``jitter-factor`` (number in [0, 1], default 0.1),
``attempts-before-reset-backoff`` (int >= 1, default 2147483647 = unlimited).
"""

from __future__ import annotations

import math
import random
from collections.abc import Mapping
from dataclasses import dataclass
from typing import ClassVar

from airflow_region_failover.failover.backoff.base import (
    DEFAULT_NEXT_RESTART_TIMESTAMP,
    JAVA_INT_MAX,
    JAVA_LONG_MAX,
    Clock,
    RestartBackoffStrategy,
    StrategyState,
    java_long,
    option_key,
    require,
    state_int,
)
from airflow_region_failover.failover.values import (
    check_duration,
    check_float,
    check_int,
    fail,
    format_duration_ms,
    parse_duration_value,
    parse_float,
    parse_int,
)
from airflow_region_failover.graph.errors import OptionError

TYPE_NAME = "exponential-delay"
INITIAL_KEY = option_key(TYPE_NAME, "initial-backoff")
MAX_KEY = option_key(TYPE_NAME, "max-backoff")
MULTIPLIER_KEY = option_key(TYPE_NAME, "backoff-multiplier")
RESET_KEY = option_key(TYPE_NAME, "reset-backoff-threshold")
JITTER_KEY = option_key(TYPE_NAME, "jitter-factor")
ATTEMPTS_KEY = option_key(TYPE_NAME, "attempts-before-reset-backoff")


class ExponentialDelay(RestartBackoffStrategy):
    """Exponentially growing, jittered backoff with merging and reset (Flink >= 1.19 exponential-delay).

    On a failure at ``now``:

    * if ``now <= next_restart_timestamp`` a restart is already pending: the failure is merged into that
      attempt and ``notify_failure`` returns false (nothing changes);
    * else, if ``now - next_restart_timestamp >= reset_backoff_threshold_ms`` (a quiet period measured from the
      scheduled restart), the attempt counter resets to 0;
    * the backoff is ``trunc(initial * multiplier ** attempt)`` (one truncation, on the power), plus a jitter
      drawn uniformly from ``[-trunc(backoff * jitter), +trunc(backoff * jitter)]``, then clamped to
      ``[initial, max]``; the restart is scheduled at ``now + backoff`` and the counter increments.

    ``can_restart`` is ``counter <= attempts_before_reset_backoff`` (``JAVA_INT_MAX`` means unlimited) and
    ``get_backoff_time`` is the time left until the scheduled restart, ``max(0, next - now)``.

    Deviation from Java, only past ~2^63 ms: where Java's ``long`` would overflow (a huge power plus a positive
    jitter wraps to a negative number and clamps to ``initial``), this port saturates and so clamps to ``max``.
    """

    type_name = TYPE_NAME

    def __init__(
        self,
        initial_backoff_ms: int,
        max_backoff_ms: int,
        backoff_multiplier: float,
        reset_backoff_threshold_ms: int,
        jitter_factor: float,
        attempts_before_reset_backoff: int,
        clock: Clock,
        rng: random.Random,
    ) -> None:
        require(initial_backoff_ms >= 1, "Initial backoff must be at least 1.")
        require(max_backoff_ms >= 1, "Maximum backoff must be at least 1.")
        require(initial_backoff_ms <= max_backoff_ms, "Initial backoff cannot be higher than maximum backoff.")
        require(backoff_multiplier > 1, "Backoff multiplier must be greater than 1.")
        require(
            reset_backoff_threshold_ms >= 1,
            "Threshold duration for exponential backoff reset must be at least 1.",
        )
        require(0 <= jitter_factor <= 1, "Jitter factor must be >= 0 and <= 1.")
        require(attempts_before_reset_backoff >= 1, "The attemptsBeforeResetBackoff must be at least 1.")
        self.initial_backoff_ms = initial_backoff_ms
        self.max_backoff_ms = max_backoff_ms
        self.backoff_multiplier = backoff_multiplier
        self.reset_backoff_threshold_ms = reset_backoff_threshold_ms
        self.jitter_factor = jitter_factor
        self.attempts_before_reset_backoff = attempts_before_reset_backoff
        self._clock = clock
        self._rng = rng
        self._current_restart_attempt = 0
        self._next_restart_timestamp = DEFAULT_NEXT_RESTART_TIMESTAMP

    def notify_failure(self, timestamp_ms: int | None = None) -> bool:
        """Merge into a pending restart (false), or reset if quiet long enough and schedule a new one (true)."""
        now = self._clock() if timestamp_ms is None else timestamp_ms
        if now <= self._next_restart_timestamp:
            return False
        if now - self._next_restart_timestamp >= self.reset_backoff_threshold_ms:
            self._current_restart_attempt = 0
        self._next_restart_timestamp = now + self._actual_backoff_time()
        self._current_restart_attempt += 1
        return True

    def can_restart(self) -> bool:
        """True while the attempts since the last reset are at most ``attempts_before_reset_backoff``."""
        if self.attempts_before_reset_backoff >= JAVA_INT_MAX:
            return True
        return self._current_restart_attempt <= self.attempts_before_reset_backoff

    def get_backoff_time(self) -> int:
        """Milliseconds left until the scheduled restart; raise :class:`RuntimeError` before any failure."""
        if self._next_restart_timestamp == DEFAULT_NEXT_RESTART_TIMESTAMP:
            raise RuntimeError("Please call notify_failure first.")
        return max(0, self._next_restart_timestamp - self._clock())

    def state_dict(self) -> StrategyState:
        """``{"type": "exponential-delay", "current_restart_attempt": n, "next_restart_timestamp_ms": t}``."""
        return {
            "type": self.type_name,
            "current_restart_attempt": self._current_restart_attempt,
            "next_restart_timestamp_ms": self._next_restart_timestamp,
        }

    def load_state(self, state: Mapping[str, object]) -> None:
        """Restore the attempt counter and the scheduled restart time."""
        self._check_state_type(state)
        self._current_restart_attempt = state_int(state, "current_restart_attempt", minimum=0)
        self._next_restart_timestamp = state_int(
            state, "next_restart_timestamp_ms", minimum=DEFAULT_NEXT_RESTART_TIMESTAMP
        )

    def _actual_backoff_time(self) -> int:
        """``clamp(trunc(initial * multiplier**attempt) + jitter, initial, max)``."""
        current = exponential_backoff_ms(
            self.initial_backoff_ms, self.backoff_multiplier, self._current_restart_attempt
        )
        with_jitter = min(current + self._jitter_ms(current), JAVA_LONG_MAX)
        return max(self.initial_backoff_ms, min(with_jitter, self.max_backoff_ms))

    def _jitter_ms(self, current_backoff_ms: int) -> int:
        """A uniform draw from ``[-n, n]`` with ``n = trunc(current * jitter_factor)``; 0 without jitter."""
        if self.jitter_factor == 0:
            return 0
        offset = java_long(current_backoff_ms * self.jitter_factor)
        return self._rng.randint(-offset, offset)

    def __repr__(self) -> str:
        return (
            f"ExponentialDelay(initial_backoff_ms={self.initial_backoff_ms}, "
            f"max_backoff_ms={self.max_backoff_ms}, backoff_multiplier={self.backoff_multiplier}, "
            f"reset_backoff_threshold_ms={self.reset_backoff_threshold_ms}, "
            f"jitter_factor={self.jitter_factor}, "
            f"attempts_before_reset_backoff={self.attempts_before_reset_backoff}, "
            f"current_restart_attempt={self._current_restart_attempt}, "
            f"next_restart_timestamp_ms={self._next_restart_timestamp})"
        )


def exponential_backoff_ms(initial_ms: int, multiplier: float, attempt: int) -> int:
    """Flink's un-jittered backoff ``(long) (initial * Math.pow(multiplier, attempt))``: truncated once."""
    try:
        power = math.pow(multiplier, attempt)
    except OverflowError:
        power = math.inf
    return java_long(float(initial_ms) * power)


@dataclass(frozen=True)
class ExponentialDelayConfig:
    """``exponential-delay``: jittered exponential backoff, reset after a quiet period (Flink >= 1.19)."""

    initial_backoff_ms: int = 1_000
    max_backoff_ms: int = 60_000
    backoff_multiplier: float = 1.5
    reset_backoff_threshold_ms: int = 3_600_000
    jitter_factor: float = 0.1
    attempts_before_reset_backoff: int = JAVA_INT_MAX

    type_name: ClassVar[str] = TYPE_NAME
    keys: ClassVar[Mapping[str, str]] = {
        "initial_backoff_ms": INITIAL_KEY,
        "max_backoff_ms": MAX_KEY,
        "backoff_multiplier": MULTIPLIER_KEY,
        "reset_backoff_threshold_ms": RESET_KEY,
        "jitter_factor": JITTER_KEY,
        "attempts_before_reset_backoff": ATTEMPTS_KEY,
    }

    def __post_init__(self) -> None:
        check_duration(INITIAL_KEY, self.initial_backoff_ms, 1)
        check_duration(MAX_KEY, self.max_backoff_ms, 1)
        if self.initial_backoff_ms > self.max_backoff_ms:
            raise OptionError(
                f"{INITIAL_KEY}: {format_duration_ms(self.initial_backoff_ms)} is higher than "
                f"{MAX_KEY} ({format_duration_ms(self.max_backoff_ms)}); lower initial-backoff or raise max-backoff"
            )
        check_float(MULTIPLIER_KEY, self.backoff_multiplier, "a number greater than 1, e.g. 1.5")
        if not self.backoff_multiplier > 1:
            fail(MULTIPLIER_KEY, self.backoff_multiplier, "a number greater than 1, e.g. 1.5")
        check_duration(RESET_KEY, self.reset_backoff_threshold_ms, 1)
        check_float(JITTER_KEY, self.jitter_factor, "a number from 0 to 1, e.g. 0.1")
        if not 0 <= self.jitter_factor <= 1:
            fail(JITTER_KEY, self.jitter_factor, "a number from 0 to 1, e.g. 0.1")
        check_int(ATTEMPTS_KEY, self.attempts_before_reset_backoff, 1,
                  f"a whole number of attempts >= 1 ({JAVA_INT_MAX} for unlimited)")

    @classmethod
    def from_options(cls, options: Mapping[str, object]) -> ExponentialDelayConfig:
        """Read this type's keys (defaults for keys not given)."""
        d = cls()

        def duration(key: str, default: int) -> int:
            return parse_duration_value(options[key], key) if key in options else default

        def number(key: str, default: float) -> float:
            return parse_float(options[key], key) if key in options else default

        return cls(
            duration(INITIAL_KEY, d.initial_backoff_ms),
            duration(MAX_KEY, d.max_backoff_ms),
            number(MULTIPLIER_KEY, d.backoff_multiplier),
            duration(RESET_KEY, d.reset_backoff_threshold_ms),
            number(JITTER_KEY, d.jitter_factor),
            parse_int(options[ATTEMPTS_KEY], ATTEMPTS_KEY) if ATTEMPTS_KEY in options
            else d.attempts_before_reset_backoff,
        )

    def create(self, clock: Clock, rng: random.Random) -> ExponentialDelay:
        """A fresh strategy reading ``clock`` and drawing jitter from ``rng``."""
        return ExponentialDelay(
            self.initial_backoff_ms, self.max_backoff_ms, float(self.backoff_multiplier),
            self.reset_backoff_threshold_ms, float(self.jitter_factor), self.attempts_before_reset_backoff,
            clock, rng,
        )

    def to_options(self) -> dict[str, str]:
        """The type-specific options as Flink writes them."""
        return {
            INITIAL_KEY: format_duration_ms(self.initial_backoff_ms),
            MAX_KEY: format_duration_ms(self.max_backoff_ms),
            MULTIPLIER_KEY: repr(float(self.backoff_multiplier)),
            RESET_KEY: format_duration_ms(self.reset_backoff_threshold_ms),
            JITTER_KEY: repr(float(self.jitter_factor)),
            ATTEMPTS_KEY: str(self.attempts_before_reset_backoff),
        }

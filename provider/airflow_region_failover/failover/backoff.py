"""Restart backoff strategies: *whether* and *when* to restart after a failure (Flink >= 1.19 semantics).

A port of Flink's ``org.apache.flink.runtime.executiongraph.failover`` strategies
(``NoRestartBackoffTimeStrategy``, ``FixedDelayRestartBackoffTimeStrategy``,
``FailureRateRestartBackoffTimeStrategy``, ``ExponentialDelayRestartBackoffTimeStrategy``) with the same
interface: :meth:`~RestartBackoffStrategy.notify_failure` (returns whether the failure starts a new restart
attempt), :meth:`~RestartBackoffStrategy.can_restart` and :meth:`~RestartBackoffStrategy.get_backoff_time` (ms).

Time and randomness are injected: a *clock* is any callable returning the current time in milliseconds
(:class:`ManualClock` for tests and previews) and jitter is drawn from an injected :class:`random.Random`.
Nothing here reads the system clock or global randomness.

Strategies are stateful, like Flink's.  Their state is a small JSON-able dict (:meth:`state_dict`) that a
run-time loop persists between failures and hands back with :meth:`load_state` to a strategy created from the
same configuration.  The random generator is not part of the state: give a restored strategy a freshly
seeded one (Flink uses ``ThreadLocalRandom``, so jitter is not reproducible there either).
"""

from __future__ import annotations

import math
import random
from abc import ABC, abstractmethod
from collections import deque
from collections.abc import Callable, Mapping

JAVA_INT_MAX = 2**31 - 1
"""``Integer.MAX_VALUE``: Flink's default (\"infinite\") ``attempts-before-reset-backoff``."""
JAVA_LONG_MAX = 2**63 - 1
"""``Long.MAX_VALUE``: Flink's times are ``long`` milliseconds."""
DEFAULT_NEXT_RESTART_TIMESTAMP = -(2**31)
"""Flink's ``Integer.MIN_VALUE`` sentinel: no restart scheduled yet (no failure seen)."""

Clock = Callable[[], int]
"""A clock: returns the current time in milliseconds."""
StrategyState = dict[str, object]
"""A strategy's JSON-able state: ``{"type": <strategy type>, ...}``."""


class InvalidStateError(ValueError):
    """A persisted strategy or budget state does not fit the strategy/budget it is loaded into."""


class ManualClock:
    """A clock that only moves when told to (Flink's ``ManualClock``): ``clock()`` returns the time in ms."""

    def __init__(self, now_ms: int = 0) -> None:
        self._now_ms = now_ms

    def __call__(self) -> int:
        """Return the current time in milliseconds."""
        return self._now_ms

    def advance(self, millis: int) -> None:
        """Move the clock ``millis`` milliseconds forward."""
        self._now_ms += millis

    def set(self, now_ms: int) -> None:
        """Set the clock to ``now_ms``."""
        self._now_ms = now_ms


class RestartBackoffStrategy(ABC):
    """Decides whether failed tasks may be restarted and how long to wait first (Flink's interface).

    Call :meth:`notify_failure` once per task failure, then :meth:`can_restart`; if it is true, restart after
    :meth:`get_backoff_time` milliseconds.
    """

    type_name: str = ""
    """Flink's main value of ``restart-strategy.type`` for this strategy."""

    @abstractmethod
    def notify_failure(self, timestamp_ms: int | None = None) -> bool:
        """Record a failure at ``timestamp_ms`` (default: the clock's now); return whether it is a new attempt.

        Only the exponential-delay strategy returns false: for a failure merged into the pending attempt.
        """

    @abstractmethod
    def can_restart(self) -> bool:
        """Return whether a restart may be conducted after the failures notified so far."""

    @abstractmethod
    def get_backoff_time(self) -> int:
        """Return how many milliseconds to wait before the restart."""

    @abstractmethod
    def state_dict(self) -> StrategyState:
        """Return the mutable state as a JSON-able dict, tagged with ``"type"``."""

    @abstractmethod
    def load_state(self, state: Mapping[str, object]) -> None:
        """Replace the mutable state by ``state`` (from :meth:`state_dict`); raise :class:`InvalidStateError`."""

    def _check_state_type(self, state: Mapping[str, object]) -> None:
        """Refuse a state persisted by another type of strategy."""
        if state.get("type") != self.type_name:
            raise InvalidStateError(
                f"state of a {state.get('type')!r} restart strategy cannot be loaded into {self.type_name!r}"
            )


class NoRestart(RestartBackoffStrategy):
    """Never restart (``none``/``off``/``disable``): ``can_restart`` is always false, backoff 0."""

    type_name = "disable"

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


class FixedDelay(RestartBackoffStrategy):
    """Restart at most ``attempts`` times, each after ``delay_ms`` (Flink's fixed-delay strategy).

    Every failure increments the attempt counter; ``can_restart`` is ``counter <= attempts``, so exactly
    ``attempts`` failures are restarted and failure ``attempts + 1`` fails the job.
    """

    type_name = "fixed-delay"

    def __init__(self, attempts: int, delay_ms: int) -> None:
        _require(attempts >= 0, "Maximum number of restart attempts must be at least 0.")
        _require(delay_ms >= 0, "Backoff time between restart attempts must be at least 0 ms.")
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
        self._current_restart_attempt = _state_int(state, "current_restart_attempt", minimum=0)

    def __repr__(self) -> str:
        return (
            f"FixedDelay(attempts={self.attempts}, delay_ms={self.delay_ms}, "
            f"current_restart_attempt={self._current_restart_attempt})"
        )


class FailureRate(RestartBackoffStrategy):
    """Restart unless more than ``max_failures_per_interval`` failures fell within the interval (inclusive).

    Flink keeps the last ``max + 1`` failure times; once it holds ``max + 1`` of them, a restart is allowed only
    if the oldest is *more* than ``failure_rate_interval_ms`` before now: ``max + 1`` failures spanning exactly
    the interval fail the job.  The delay before each restart is fixed.
    """

    type_name = "failure-rate"

    def __init__(
        self, max_failures_per_interval: int, failure_rate_interval_ms: int, delay_ms: int, clock: Clock
    ) -> None:
        _require(
            max_failures_per_interval > 0,
            "Maximum number of restart attempts per time unit must be greater than 0.",
        )
        _require(failure_rate_interval_ms > 0, "Failures interval must be greater than 0 ms.")
        _require(delay_ms >= 0, "Backoff time must be at least 0 ms.")
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
        timestamps = _state_int_list(state, "failure_timestamps")
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

    type_name = "exponential-delay"

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
        _require(initial_backoff_ms >= 1, "Initial backoff must be at least 1.")
        _require(max_backoff_ms >= 1, "Maximum backoff must be at least 1.")
        _require(initial_backoff_ms <= max_backoff_ms, "Initial backoff cannot be higher than maximum backoff.")
        _require(backoff_multiplier > 1, "Backoff multiplier must be greater than 1.")
        _require(
            reset_backoff_threshold_ms >= 1,
            "Threshold duration for exponential backoff reset must be at least 1.",
        )
        _require(0 <= jitter_factor <= 1, "Jitter factor must be >= 0 and <= 1.")
        _require(attempts_before_reset_backoff >= 1, "The attemptsBeforeResetBackoff must be at least 1.")
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
        self._current_restart_attempt = _state_int(state, "current_restart_attempt", minimum=0)
        self._next_restart_timestamp = _state_int(
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


def java_long(value: float) -> int:
    """Java's ``(long) value``: truncate toward zero, saturate at the ``long`` range, NaN becomes 0."""
    if math.isnan(value):
        return 0
    if value >= JAVA_LONG_MAX:
        return JAVA_LONG_MAX
    if value <= -JAVA_LONG_MAX - 1:
        return -JAVA_LONG_MAX - 1
    return int(value)


def _require(condition: bool, message: str) -> None:
    """Flink's ``checkArgument``: raise :class:`ValueError` with ``message`` unless ``condition``."""
    if not condition:
        raise ValueError(message)


def _state_int(state: Mapping[str, object], field: str, *, minimum: int) -> int:
    """Read integer ``field`` (at least ``minimum``) from a persisted state."""
    value = state.get(field)
    if not isinstance(value, int) or isinstance(value, bool) or value < minimum:
        raise InvalidStateError(f"state field {field!r} must be an integer >= {minimum}, got {value!r}")
    return value


def _state_int_list(state: Mapping[str, object], field: str) -> list[int]:
    """Read a list of integers ``field`` from a persisted state."""
    value = state.get(field)
    if not isinstance(value, list) or not all(isinstance(item, int) and not isinstance(item, bool) for item in value):
        raise InvalidStateError(f"state field {field!r} must be a list of integers, got {value!r}")
    return list(value)

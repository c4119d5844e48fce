"""The interface every restart backoff strategy implements (*whether* and *when* to restart; Flink >= 1.19).

Each strategy lives in its own module of this package, as Flink keeps them (``NoRestartBackoffTimeStrategy``,
``FixedDelayRestartBackoffTimeStrategy``, ``FailureRateRestartBackoffTimeStrategy``,
``ExponentialDelayRestartBackoffTimeStrategy``), beside its frozen configuration and ``from_options()``. The
interface is Flink's: :meth:`~RestartBackoffStrategy.notify_failure` (returns whether the failure starts a new restart
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
from collections.abc import Callable, Mapping
from typing import ClassVar, Protocol

from airflow_region_failover.failover.values import JAVA_INT_MAX, JAVA_LONG_MAX
from airflow_region_failover.graph.errors import RegionFailoverError

__all__ = ["JAVA_INT_MAX", "JAVA_LONG_MAX"]  # re-exported: strategies and tests read them from here

DEFAULT_NEXT_RESTART_TIMESTAMP = -(2**31)
"""Flink's ``Integer.MIN_VALUE`` sentinel: no restart scheduled yet (no failure seen)."""

Clock = Callable[[], int]
"""A clock: returns the current time in milliseconds."""
StrategyState = dict[str, object]
"""A strategy's JSON-able state: ``{"type": <strategy type>, ...}``."""


class InvalidStateError(RegionFailoverError):
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


class StrategyConfig(Protocol):
    """The frozen configuration of one restart strategy type (each module defines one)."""

    type_name: ClassVar[str]
    keys: ClassVar[Mapping[str, str]]

    def create(self, clock: Clock, rng: random.Random) -> RestartBackoffStrategy:
        """A fresh strategy reading ``clock`` and drawing jitter from ``rng`` (where it has any)."""
        ...

    def to_options(self) -> dict[str, str]:
        """The type-specific options as Flink writes them."""
        ...


def option_key(type_name: str, option: str) -> str:
    """Flink's key of a type-specific option: ``restart-strategy.<type>.<option>``."""
    return f"restart-strategy.{type_name}.{option}"


def java_long(value: float) -> int:
    """Java's ``(long) value``: truncate toward zero, saturate at the ``long`` range, NaN becomes 0."""
    if math.isnan(value):
        return 0
    if value >= JAVA_LONG_MAX:
        return JAVA_LONG_MAX
    if value <= -JAVA_LONG_MAX - 1:
        return -JAVA_LONG_MAX - 1
    return int(value)




def require(condition: bool, message: str) -> None:
    """Flink's ``checkArgument``: raise :class:`ValueError` with ``message`` unless ``condition``."""
    if not condition:
        raise ValueError(message)


def state_int(state: Mapping[str, object], field: str, *, minimum: int) -> int:
    """Read integer ``field`` (at least ``minimum``) from a persisted state."""
    value = state.get(field)
    if not isinstance(value, int) or isinstance(value, bool) or value < minimum:
        raise InvalidStateError(f"state field {field!r} must be an integer >= {minimum}, got {value!r}")
    return value


def state_int_list(state: Mapping[str, object], field: str) -> list[int]:
    """Read a list of integers ``field`` from a persisted state."""
    value = state.get(field)
    if not isinstance(value, list) or not all(isinstance(item, int) and not isinstance(item, bool) for item in value):
        raise InvalidStateError(f"state field {field!r} must be a list of integers, got {value!r}")
    return list(value)

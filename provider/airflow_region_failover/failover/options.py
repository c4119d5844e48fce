"""Flink's restart/failover option keys → an immutable :class:`FailoverConfig`.

Keys and defaults are Flink's (``RestartStrategyOptions``, ``JobManagerOptions``, Flink >= 1.19):

====================================================================  ===============  ==========
key                                                                   default          kind
====================================================================  ===============  ==========
``restart-strategy.type`` (deprecated alias ``restart-strategy``)      see below        type name
``restart-strategy.fixed-delay.attempts``                             1                int >= 0
``restart-strategy.fixed-delay.delay``                                1 s              duration
``restart-strategy.failure-rate.max-failures-per-interval``           1                int >= 1
``restart-strategy.failure-rate.failure-rate-interval``               1 min            duration > 0
``restart-strategy.failure-rate.delay``                               1 s              duration
``restart-strategy.exponential-delay.initial-backoff``                1 s              duration >= 1 ms
``restart-strategy.exponential-delay.max-backoff``                    1 min            duration >= initial
``restart-strategy.exponential-delay.backoff-multiplier``             1.5              number > 1
``restart-strategy.exponential-delay.reset-backoff-threshold``        1 h              duration >= 1 ms
``restart-strategy.exponential-delay.jitter-factor``                  0.1              number in [0, 1]
``restart-strategy.exponential-delay.attempts-before-reset-backoff``  2147483647 (∞)   int >= 1
``jobmanager.execution.failover-strategy``                            ``region``       region | full
``restart-strategy.maximum-per-task-failures`` (FLIP-1, ours)         -1 (unlimited)   int >= -1
``restart-strategy.maximum-total-task-failures`` (FLIP-1, ours)       -1 (unlimited)   int >= -1
====================================================================  ===============  ==========

Type names (case-insensitive): ``none``/``off``/``disable``, ``fixed-delay``/``fixeddelay``,
``failure-rate``/``failurerate``, ``exponential-delay``/``exponentialdelay``.  When no type is set, Flink picks
``disable`` (no restart) for a job without checkpointing and ``exponential-delay`` *with its default values*
(the ``exponential-delay.*`` keys are not read) for a job with checkpointing; :func:`parse_options` does the
same through its ``checkpointing`` flag, which defaults to false — so the default here is **no restart**.  The
product's own default comes later from ``airflow.cfg``.

Durations use Flink's syntax (:mod:`.durations`); a bare number is milliseconds.  Values may also be Python
values: ``int`` (a duration as ms), ``float`` for the two numbers, :class:`datetime.timedelta` for durations.
Every bad key or value raises a one-line :class:`OptionError` that names the key, the value and the fix.
"""

from __future__ import annotations

import difflib
import json
import math
import random
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any, ClassVar, Literal, NoReturn

from airflow_region_failover.failover.backoff import (
    JAVA_INT_MAX,
    Clock,
    ExponentialDelay,
    FailureRate,
    FixedDelay,
    NoRestart,
    RestartBackoffStrategy,
)
from airflow_region_failover.failover.budget import (
    MAX_PER_TASK_FAILURES_KEY,
    MAX_TOTAL_TASK_FAILURES_KEY,
    BudgetConfig,
    FailureBudget,
)
from airflow_region_failover.failover.durations import format_duration_ms, parse_duration_ms
from airflow_region_failover.graph.errors import OptionError

RESTART_STRATEGY_TYPE_KEY = "restart-strategy.type"
DEPRECATED_RESTART_STRATEGY_TYPE_KEY = "restart-strategy"
FAILOVER_STRATEGY_KEY = "jobmanager.execution.failover-strategy"

NO_RESTART = "disable"
FIXED_DELAY = "fixed-delay"
FAILURE_RATE = "failure-rate"
EXPONENTIAL_DELAY = "exponential-delay"

RESTART_STRATEGY_ALIASES: Mapping[str, str] = {
    "none": NO_RESTART,
    "off": NO_RESTART,
    "disable": NO_RESTART,
    "fixed-delay": FIXED_DELAY,
    "fixeddelay": FIXED_DELAY,
    "failure-rate": FAILURE_RATE,
    "failurerate": FAILURE_RATE,
    "exponential-delay": EXPONENTIAL_DELAY,
    "exponentialdelay": EXPONENTIAL_DELAY,
}
"""Every accepted ``restart-strategy.type`` value → Flink's main value of that type."""

FailoverStrategyName = Literal["region", "full"]
FAILOVER_STRATEGIES: tuple[FailoverStrategyName, ...] = ("region", "full")

_TYPE_HINT = "use one of none|off|disable, fixed-delay|fixeddelay, failure-rate|failurerate, " + (
    "exponential-delay|exponentialdelay"
)
_INT = re.compile(r"[+-]?[0-9]+\Z")
_FLOAT = re.compile(r"[+-]?(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][+-]?[0-9]+)?\Z")


def _key(type_name: str, option: str) -> str:
    return f"restart-strategy.{type_name}.{option}"


# --------------------------------------------------------------------------------------------------------------
# One frozen config per restart strategy type; each validates itself (naming Flink's key) and creates strategies.
# --------------------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class NoRestartConfig:
    """``restart-strategy.type: none``: never restart."""

    type_name: ClassVar[str] = NO_RESTART
    keys: ClassVar[Mapping[str, str]] = {}

    def create(self, clock: Clock, rng: random.Random) -> NoRestart:
        """The strategy (clock and randomness are unused)."""
        return NoRestart()

    def to_options(self) -> dict[str, str]:
        """The type-specific options (none)."""
        return {}


@dataclass(frozen=True)
class FixedDelayConfig:
    """``fixed-delay``: at most ``attempts`` restarts, each after ``delay_ms``."""

    attempts: int = 1
    delay_ms: int = 1_000

    type_name: ClassVar[str] = FIXED_DELAY
    keys: ClassVar[Mapping[str, str]] = {
        "attempts": _key(FIXED_DELAY, "attempts"),
        "delay_ms": _key(FIXED_DELAY, "delay"),
    }

    def __post_init__(self) -> None:
        _check_int(self.keys["attempts"], self.attempts, 0, "a whole number of restart attempts >= 0")
        _check_duration(self.keys["delay_ms"], self.delay_ms, 0)

    def create(self, clock: Clock, rng: random.Random) -> FixedDelay:
        """A fresh strategy (clock and randomness are unused)."""
        return FixedDelay(self.attempts, self.delay_ms)

    def to_options(self) -> dict[str, str]:
        """The type-specific options as Flink writes them."""
        return {
            self.keys["attempts"]: str(self.attempts),
            self.keys["delay_ms"]: format_duration_ms(self.delay_ms),
        }


@dataclass(frozen=True)
class FailureRateConfig:
    """``failure-rate``: restart unless more than ``max_failures_per_interval`` failures fall in the interval."""

    max_failures_per_interval: int = 1
    failure_rate_interval_ms: int = 60_000
    delay_ms: int = 1_000

    type_name: ClassVar[str] = FAILURE_RATE
    keys: ClassVar[Mapping[str, str]] = {
        "max_failures_per_interval": _key(FAILURE_RATE, "max-failures-per-interval"),
        "failure_rate_interval_ms": _key(FAILURE_RATE, "failure-rate-interval"),
        "delay_ms": _key(FAILURE_RATE, "delay"),
    }

    def __post_init__(self) -> None:
        _check_int(
            self.keys["max_failures_per_interval"],
            self.max_failures_per_interval,
            1,
            "a whole number of failures >= 1",
        )
        _check_duration(self.keys["failure_rate_interval_ms"], self.failure_rate_interval_ms, 1)
        _check_duration(self.keys["delay_ms"], self.delay_ms, 0)

    def create(self, clock: Clock, rng: random.Random) -> FailureRate:
        """A fresh strategy reading ``clock`` (randomness is unused)."""
        return FailureRate(self.max_failures_per_interval, self.failure_rate_interval_ms, self.delay_ms, clock)

    def to_options(self) -> dict[str, str]:
        """The type-specific options as Flink writes them."""
        return {
            self.keys["max_failures_per_interval"]: str(self.max_failures_per_interval),
            self.keys["failure_rate_interval_ms"]: format_duration_ms(self.failure_rate_interval_ms),
            self.keys["delay_ms"]: format_duration_ms(self.delay_ms),
        }


@dataclass(frozen=True)
class ExponentialDelayConfig:
    """``exponential-delay``: jittered exponential backoff, reset after a quiet period (Flink >= 1.19)."""

    initial_backoff_ms: int = 1_000
    max_backoff_ms: int = 60_000
    backoff_multiplier: float = 1.5
    reset_backoff_threshold_ms: int = 3_600_000
    jitter_factor: float = 0.1
    attempts_before_reset_backoff: int = JAVA_INT_MAX

    type_name: ClassVar[str] = EXPONENTIAL_DELAY
    keys: ClassVar[Mapping[str, str]] = {
        "initial_backoff_ms": _key(EXPONENTIAL_DELAY, "initial-backoff"),
        "max_backoff_ms": _key(EXPONENTIAL_DELAY, "max-backoff"),
        "backoff_multiplier": _key(EXPONENTIAL_DELAY, "backoff-multiplier"),
        "reset_backoff_threshold_ms": _key(EXPONENTIAL_DELAY, "reset-backoff-threshold"),
        "jitter_factor": _key(EXPONENTIAL_DELAY, "jitter-factor"),
        "attempts_before_reset_backoff": _key(EXPONENTIAL_DELAY, "attempts-before-reset-backoff"),
    }

    def __post_init__(self) -> None:
        keys = self.keys
        _check_duration(keys["initial_backoff_ms"], self.initial_backoff_ms, 1)
        _check_duration(keys["max_backoff_ms"], self.max_backoff_ms, 1)
        if self.initial_backoff_ms > self.max_backoff_ms:
            raise OptionError(
                f"{keys['initial_backoff_ms']}: {format_duration_ms(self.initial_backoff_ms)} is higher than "
                f"{keys['max_backoff_ms']} ({format_duration_ms(self.max_backoff_ms)}); "
                "lower initial-backoff or raise max-backoff"
            )
        _check_float(keys["backoff_multiplier"], self.backoff_multiplier, "a number greater than 1, e.g. 1.5")
        if not self.backoff_multiplier > 1:
            _fail(keys["backoff_multiplier"], self.backoff_multiplier, "a number greater than 1, e.g. 1.5")
        _check_duration(keys["reset_backoff_threshold_ms"], self.reset_backoff_threshold_ms, 1)
        _check_float(keys["jitter_factor"], self.jitter_factor, "a number from 0 to 1, e.g. 0.1")
        if not 0 <= self.jitter_factor <= 1:
            _fail(keys["jitter_factor"], self.jitter_factor, "a number from 0 to 1, e.g. 0.1")
        _check_int(
            keys["attempts_before_reset_backoff"],
            self.attempts_before_reset_backoff,
            1,
            f"a whole number of attempts >= 1 ({JAVA_INT_MAX} for unlimited)",
        )

    def create(self, clock: Clock, rng: random.Random) -> ExponentialDelay:
        """A fresh strategy reading ``clock`` and drawing jitter from ``rng``."""
        return ExponentialDelay(
            self.initial_backoff_ms,
            self.max_backoff_ms,
            float(self.backoff_multiplier),
            self.reset_backoff_threshold_ms,
            float(self.jitter_factor),
            self.attempts_before_reset_backoff,
            clock,
            rng,
        )

    def to_options(self) -> dict[str, str]:
        """The type-specific options as Flink writes them."""
        keys = self.keys
        return {
            keys["initial_backoff_ms"]: format_duration_ms(self.initial_backoff_ms),
            keys["max_backoff_ms"]: format_duration_ms(self.max_backoff_ms),
            keys["backoff_multiplier"]: repr(float(self.backoff_multiplier)),
            keys["reset_backoff_threshold_ms"]: format_duration_ms(self.reset_backoff_threshold_ms),
            keys["jitter_factor"]: repr(float(self.jitter_factor)),
            keys["attempts_before_reset_backoff"]: str(self.attempts_before_reset_backoff),
        }


RestartStrategyConfig = NoRestartConfig | FixedDelayConfig | FailureRateConfig | ExponentialDelayConfig
"""The configuration of one restart backoff strategy."""

_CONFIG_CLASSES: Mapping[str, type[RestartStrategyConfig]] = {
    NO_RESTART: NoRestartConfig,
    FIXED_DELAY: FixedDelayConfig,
    FAILURE_RATE: FailureRateConfig,
    EXPONENTIAL_DELAY: ExponentialDelayConfig,
}
_DURATION_FIELDS = frozenset(
    {
        "delay_ms",
        "failure_rate_interval_ms",
        "initial_backoff_ms",
        "max_backoff_ms",
        "reset_backoff_threshold_ms",
    }
)
_FLOAT_FIELDS = frozenset({"backoff_multiplier", "jitter_factor"})
_TYPE_OF_KEY: Mapping[str, str] = {key: cls.type_name for cls in _CONFIG_CLASSES.values() for key in cls.keys.values()}
_GENERAL_KEYS = (
    RESTART_STRATEGY_TYPE_KEY,
    DEPRECATED_RESTART_STRATEGY_TYPE_KEY,
    FAILOVER_STRATEGY_KEY,
    MAX_PER_TASK_FAILURES_KEY,
    MAX_TOTAL_TASK_FAILURES_KEY,
)
KNOWN_KEYS: frozenset[str] = frozenset(_GENERAL_KEYS) | frozenset(_TYPE_OF_KEY)
"""Every option key :func:`parse_options` understands."""


@dataclass(frozen=True)
class FailoverConfig:
    """Everything the failover loop needs to know from the options, as one immutable value.

    ``restart_strategy`` decides whether/when to restart, ``failover_strategy`` which subtasks (``region`` or
    ``full``), ``budget`` the FLIP-1 limits.  ``ignored_keys`` lists keys that were given but do not apply (a
    non-strict parse: keys of another restart strategy type; or the deprecated type key shadowed by the new one).
    """

    restart_strategy: RestartStrategyConfig = field(default_factory=NoRestartConfig)
    failover_strategy: FailoverStrategyName = "region"
    budget: BudgetConfig = field(default_factory=BudgetConfig)
    ignored_keys: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if self.failover_strategy not in FAILOVER_STRATEGIES:
            _fail(FAILOVER_STRATEGY_KEY, self.failover_strategy, "region or full")

    def create_strategy(self, clock: Clock, seed: int = 0) -> RestartBackoffStrategy:
        """A fresh restart backoff strategy reading ``clock``, with jitter from ``random.Random(seed)``."""
        return self.restart_strategy.create(clock, random.Random(seed))

    def restore_strategy(self, state: Mapping[str, object], clock: Clock, seed: int = 0) -> RestartBackoffStrategy:
        """A strategy continuing from ``state`` (see ``state_dict``); raises ``InvalidStateError`` on a mismatch.

        Its jitter comes from a generator seeded by ``seed`` *and* the state, so successive restores draw
        different (yet reproducible) jitter.
        """
        restore_seed = f"{seed}:{json.dumps(dict(state), sort_keys=True, default=repr)}"
        strategy = self.restart_strategy.create(clock, random.Random(restore_seed))
        strategy.load_state(state)
        return strategy

    def create_budget(self) -> FailureBudget:
        """A fresh FLIP-1 failure budget."""
        return self.budget.create()

    def restore_budget(self, state: Mapping[str, object]) -> FailureBudget:
        """A budget continuing from ``state`` (see :meth:`FailureBudget.state_dict`)."""
        budget = self.budget.create()
        budget.load_state(state)
        return budget

    def to_options(self) -> dict[str, str]:
        """The effective options, every key explicit; :func:`parse_options` reads them back to an equal value."""
        options = {RESTART_STRATEGY_TYPE_KEY: self.restart_strategy.type_name}
        options.update(self.restart_strategy.to_options())
        options[FAILOVER_STRATEGY_KEY] = self.failover_strategy
        options.update(self.budget.to_options())
        return options


def parse_options(options: Mapping[str, object], *, checkpointing: bool = False, strict: bool = True) -> FailoverConfig:
    """Read Flink-style option keys into a :class:`FailoverConfig` (see the module doc for keys and defaults).

    Unknown keys are errors.  ``strict`` (default): a ``restart-strategy.<type>.*`` key of another type than the
    chosen one is an error too; with ``strict=False`` it is ignored, as Flink does, and listed in
    ``ignored_keys`` (for layered configurations such as ``airflow.cfg`` defaults plus per-DAG overrides).
    ``checkpointing`` selects Flink's default when no type is set: ``exponential-delay`` with default values if
    true, no restart if false.
    """
    _check_known_keys(options)
    type_name, type_key, ignored = _restart_type(options, checkpointing)
    ignored.extend(_keys_of_other_types(options, type_name, type_key, strict))
    if type_key is None:
        restart: RestartStrategyConfig = _CONFIG_CLASSES[type_name]()
    else:
        restart = _restart_config(options, type_name)
    return FailoverConfig(
        restart_strategy=restart,
        failover_strategy=_failover_strategy(options),
        budget=_budget(options),
        ignored_keys=tuple(sorted(ignored)),
    )


def parse_restart_strategy_type(value: object, key: str = RESTART_STRATEGY_TYPE_KEY) -> str:
    """Map an accepted type name (any case, any alias) to Flink's main value, e.g. ``"OFF"`` → ``"disable"``."""
    if not isinstance(value, str):
        _fail(key, value, _TYPE_HINT)
    main = RESTART_STRATEGY_ALIASES.get(value.strip().lower())
    if main is None:
        raise OptionError(f"{key}: {value!r} is not a restart strategy; {_TYPE_HINT}")
    return main


# --------------------------------------------------------------------------------------------------------------
# Parsing steps
# --------------------------------------------------------------------------------------------------------------


def _check_known_keys(options: Mapping[str, object]) -> None:
    """Refuse any key this module does not know, suggesting the closest known one."""
    for key in options:
        if key in KNOWN_KEYS:
            continue
        close = difflib.get_close_matches(str(key), sorted(KNOWN_KEYS), n=1, cutoff=0.6)
        hint = (
            f"did you mean {close[0]!r}?"
            if close
            else f"use {RESTART_STRATEGY_TYPE_KEY}, restart-strategy.<type>.<option>, {FAILOVER_STRATEGY_KEY}, "
            f"{MAX_PER_TASK_FAILURES_KEY} or {MAX_TOTAL_TASK_FAILURES_KEY}"
        )
        raise OptionError(f"{key}: unknown failover/restart-strategy option key; {hint}")


def _restart_type(options: Mapping[str, object], checkpointing: bool) -> tuple[str, str | None, list[str]]:
    """The chosen type's main value, the key it came from (``None`` = default) and shadowed keys."""
    ignored: list[str] = []
    for key in (RESTART_STRATEGY_TYPE_KEY, DEPRECATED_RESTART_STRATEGY_TYPE_KEY):
        if key in options:
            if key == RESTART_STRATEGY_TYPE_KEY and DEPRECATED_RESTART_STRATEGY_TYPE_KEY in options:
                ignored.append(DEPRECATED_RESTART_STRATEGY_TYPE_KEY)
            return parse_restart_strategy_type(options[key], key), key, ignored
    return (EXPONENTIAL_DELAY if checkpointing else NO_RESTART), None, ignored


def _keys_of_other_types(
    options: Mapping[str, object], type_name: str, type_key: str | None, strict: bool
) -> list[str]:
    """Type-specific keys that do not apply to the chosen type (an error when ``strict``)."""
    others = [key for key in options if key in _TYPE_OF_KEY and (type_key is None or _TYPE_OF_KEY[key] != type_name)]
    if others and strict:
        key = others[0]
        chosen = f"{type_name!r}" if type_key else f"unset (so {type_name!r})"
        raise OptionError(
            f"{key}: applies only to {RESTART_STRATEGY_TYPE_KEY}={_TYPE_OF_KEY[key]}, but the type is {chosen}; "
            f"set {RESTART_STRATEGY_TYPE_KEY}: {_TYPE_OF_KEY[key]} or remove the key"
        )
    return others


def _restart_config(options: Mapping[str, object], type_name: str) -> RestartStrategyConfig:
    """Build the chosen type's config from its keys (defaults for keys not given)."""
    cls = _CONFIG_CLASSES[type_name]
    values: dict[str, Any] = {
        name: _parse_field(name, key, options[key]) for name, key in cls.keys.items() if key in options
    }
    return cls(**values)


def _parse_field(name: str, key: str, value: object) -> int | float:
    """Parse one type-specific value by the kind of its field."""
    if name in _DURATION_FIELDS:
        return parse_duration_value(value, key)
    if name in _FLOAT_FIELDS:
        return _parse_float(value, key)
    return _parse_int(value, key)


def _failover_strategy(options: Mapping[str, object]) -> FailoverStrategyName:
    """``jobmanager.execution.failover-strategy``: ``region`` (default) or ``full``, any case."""
    value = options.get(FAILOVER_STRATEGY_KEY, "region")
    text = value.strip().lower() if isinstance(value, str) else None
    for name in FAILOVER_STRATEGIES:
        if text == name:
            return name
    raise OptionError(
        f"{FAILOVER_STRATEGY_KEY}: {value!r} is not a failover strategy; use region (restart the failed "
        "pipelined region and what it needs) or full (restart everything)"
    )


def _budget(options: Mapping[str, object]) -> BudgetConfig:
    """The FLIP-1 budgets (``-1`` = unlimited when not given)."""
    values = {
        name: _parse_int(options[key], key)
        for name, key in (
            ("max_per_task_failures", MAX_PER_TASK_FAILURES_KEY),
            ("max_total_task_failures", MAX_TOTAL_TASK_FAILURES_KEY),
        )
        if key in options
    }
    return BudgetConfig(**values)


# --------------------------------------------------------------------------------------------------------------
# Values
# --------------------------------------------------------------------------------------------------------------


def parse_duration_value(value: object, key: str) -> int:
    """A duration option in ms: a Flink duration string, an ``int`` (ms) or a :class:`~datetime.timedelta`."""
    if isinstance(value, str):
        return parse_duration_ms(value, key)
    if isinstance(value, timedelta):
        if value < timedelta(0):
            _fail(key, value, "a duration >= 0, e.g. '10 s'")
        return value // timedelta(milliseconds=1)
    if isinstance(value, int) and not isinstance(value, bool):
        if value < 0:
            _fail(key, value, "a duration >= 0, e.g. '10 s'")
        return value
    return _fail(key, value, "a duration such as '500 ms', '10 s', '1 min'")


def _parse_int(value: object, key: str) -> int:
    """A whole number that fits Flink's ``Integer`` (range checks are the config's)."""
    if isinstance(value, int) and not isinstance(value, bool):
        number = value
    elif isinstance(value, str) and _INT.match(value.strip()):
        number = int(value.strip())
    else:
        return _fail(key, value, "a whole number, e.g. '3'")
    if not -(2**31) <= number <= JAVA_INT_MAX:
        raise OptionError(f"{key}: {value!r} does not fit a 32-bit integer; use at most {JAVA_INT_MAX}")
    return number


def _parse_float(value: object, key: str) -> float:
    """A finite decimal number such as ``1.5`` or ``2e0``."""
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        number = float(value)
    elif isinstance(value, str) and _FLOAT.match(value.strip()):
        number = float(value.strip())
    else:
        return _fail(key, value, "a decimal number, e.g. '0.1' or '1.5'")
    if not math.isfinite(number):
        _fail(key, value, "a finite decimal number, e.g. '0.1' or '1.5'")
    return number


def _check_int(key: str, value: object, minimum: int, fix: str) -> None:
    """Refuse a non-``int`` or an ``int`` below ``minimum``, naming ``key``."""
    if not isinstance(value, int) or isinstance(value, bool) or value < minimum:
        _fail(key, value, fix)


def _check_float(key: str, value: object, fix: str) -> None:
    """Refuse anything but a finite ``int``/``float``, naming ``key``."""
    if not isinstance(value, (int, float)) or isinstance(value, bool) or not math.isfinite(value):
        _fail(key, value, fix)


def _check_duration(key: str, value: object, minimum_ms: int) -> None:
    """Refuse a duration (ms) that is not an ``int`` or is below ``minimum_ms``, naming ``key``."""
    if not isinstance(value, int) or isinstance(value, bool) or value < minimum_ms:
        shown = format_duration_ms(value) if isinstance(value, int) and value >= 0 else repr(value)
        raise OptionError(
            f"{key}: {shown} is not allowed; use a duration of at least {format_duration_ms(minimum_ms)}, e.g. '10 s'"
        )


def _fail(key: str, value: object, fix: str) -> NoReturn:
    """Raise the one-line :class:`OptionError` ``"<key>: <value> is not valid; use <fix>"``."""
    raise OptionError(f"{key}: {value!r} is not valid; use {fix}")

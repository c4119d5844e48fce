"""Flink's failover/restart option keys -> one immutable :class:`FailoverConfig`, and how option layers combine.

Keys (Flink's ``RestartStrategyOptions`` / ``JobManagerOptions``, >= 1.19, plus FLIP-1's budgets):

* ``restart-strategy.type`` (deprecated alias key ``restart-strategy``): which restart strategy
  (:mod:`.backoff`); its own keys are ``restart-strategy.<type>.<option>`` and documented in its module;
* ``jobmanager.execution.failover-strategy``: ``region`` (default) or ``full`` (:class:`FailoverStrategy`);
* ``restart-strategy.maximum-per-task-failures`` / ``...maximum-total-task-failures``: FLIP-1 budgets
  (:mod:`.budget`, ``-1`` = unlimited);
* ``restart-strategy.non-recoverable-errors``: exception class names (``;``-separated, simple or qualified) whose
  failures end the run instead of a restart (:mod:`.classify`; bare default: none — the product's default is
  ``[region_failover] non_recoverable_errors``);
* ``execution.checkpointing.*``, ``state.checkpoints.*``, ``state.backend.incremental``,
  ``execution.state-recovery.path``: what checkpointed steps do (:mod:`.checkpointing`).

When no type is set, Flink picks ``disable`` for a job without checkpointing and ``exponential-delay`` *with its
default values* (its keys are not read) with checkpointing; :func:`parse_options` does the same through its
``checkpointing`` flag (default false, so the bare default here is **no restart**; the product's own default
comes from airflow.cfg, layered by :func:`resolve`). Values follow :mod:`.values`. Every bad key or value raises
a one-line :class:`OptionError` naming the key, the value and the fix. Options are parsed once per job (the job
spec keeps the :class:`FailoverConfig`), never per failure.
"""

from __future__ import annotations

import difflib
import json
import random
from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import Enum

from airflow_region_failover.failover.backoff import (
    CONFIGS,
    RESTART_STRATEGY_TYPE_KEY,
    TYPE_OF_KEY,
    Clock,
    ExponentialDelayConfig,
    NoRestartConfig,
    RestartBackoffStrategy,
    RestartStrategyConfig,
    parse_type,
)
from airflow_region_failover.failover.budget import (
    MAX_PER_TASK_FAILURES_KEY,
    MAX_TOTAL_TASK_FAILURES_KEY,
    BudgetConfig,
    FailureBudget,
)
from airflow_region_failover.failover.checkpointing import CHECKPOINT_KEYS, CheckpointConfig, parse_checkpointing
from airflow_region_failover.failover.error_class import (
    NON_RECOVERABLE_ERRORS_KEY,
    format_error_names,
    parse_error_names,
)
from airflow_region_failover.failover.values import parse_int
from airflow_region_failover.graph.errors import OptionError

DEPRECATED_RESTART_STRATEGY_TYPE_KEY = "restart-strategy"
FAILOVER_STRATEGY_KEY = "jobmanager.execution.failover-strategy"


class FailoverStrategy(str, Enum):
    """*Which* subtasks restart: the failed region and what it needs (``region``) or everything (``full``)."""

    REGION = "region"
    FULL = "full"

    @classmethod
    def parse(cls, value: object, key: str = FAILOVER_STRATEGY_KEY) -> FailoverStrategy:
        """``region`` or ``full`` in any case (or a member); :class:`OptionError` naming ``key`` otherwise."""
        if isinstance(value, cls):
            return value
        text = value.strip().lower() if isinstance(value, str) else None
        for member in cls:
            if text == member.value:
                return member
        raise OptionError(
            f"{key}: {value!r} is unknown; use region (restart the failed pipelined region and what it needs) or "
            "full (restart everything)"
        )


_GENERAL_KEYS = (
    RESTART_STRATEGY_TYPE_KEY,
    DEPRECATED_RESTART_STRATEGY_TYPE_KEY,
    FAILOVER_STRATEGY_KEY,
    MAX_PER_TASK_FAILURES_KEY,
    MAX_TOTAL_TASK_FAILURES_KEY,
    NON_RECOVERABLE_ERRORS_KEY,
)
KNOWN_KEYS: frozenset[str] = frozenset(_GENERAL_KEYS) | frozenset(TYPE_OF_KEY) | CHECKPOINT_KEYS
"""Every option key :func:`parse_options` understands."""


@dataclass(frozen=True)
class FailoverConfig:
    """Everything the failover loop needs to know from the options, as one immutable value.

    ``restart_strategy`` decides whether/when to restart, ``failover_strategy`` which subtasks, ``budget`` the
    FLIP-1 limits, ``checkpointing`` what checkpointed steps do, ``non_recoverable_errors`` the exception class
    names whose failures are not restarted (:mod:`.classify`). ``ignored_keys`` lists keys that were given but
    do not apply (a non-strict parse: keys of
    another restart strategy type; or the deprecated type key shadowed by the new one).
    """

    restart_strategy: RestartStrategyConfig = field(default_factory=NoRestartConfig)
    failover_strategy: FailoverStrategy = FailoverStrategy.REGION
    budget: BudgetConfig = field(default_factory=BudgetConfig)
    ignored_keys: tuple[str, ...] = ()
    checkpointing: CheckpointConfig = field(default_factory=CheckpointConfig)
    non_recoverable_errors: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        object.__setattr__(self, "failover_strategy", FailoverStrategy.parse(self.failover_strategy))
        object.__setattr__(self, "non_recoverable_errors",
                           parse_error_names(self.non_recoverable_errors, NON_RECOVERABLE_ERRORS_KEY))

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
        options[FAILOVER_STRATEGY_KEY] = self.failover_strategy.value
        options.update(self.budget.to_options())
        options.update(self.checkpointing.to_options())
        options[NON_RECOVERABLE_ERRORS_KEY] = format_error_names(self.non_recoverable_errors)
        return options


def parse_options(options: Mapping[str, object], *, checkpointing: bool = False, strict: bool = True) -> FailoverConfig:
    """Read Flink-style option keys into a :class:`FailoverConfig` (see the module doc for keys and defaults).

    Unknown keys are errors. ``strict`` (default): a ``restart-strategy.<type>.*`` key of another type than the
    chosen one is an error too; with ``strict=False`` it is ignored, as Flink does, and listed in
    ``ignored_keys``. ``checkpointing`` selects Flink's default when no type is set.
    """
    _check_known_keys(options)
    type_name, type_key, ignored = _restart_type(options, checkpointing)
    ignored.extend(_keys_of_other_types(options, type_name, type_key, strict))
    config_class = CONFIGS[type_name]
    restart: RestartStrategyConfig = config_class() if type_key is None else config_class.from_options(options)
    return FailoverConfig(
        restart_strategy=restart,
        failover_strategy=FailoverStrategy.parse(options.get(FAILOVER_STRATEGY_KEY, FailoverStrategy.REGION)),
        budget=_budget(options),
        ignored_keys=tuple(sorted(ignored)),
        checkpointing=parse_checkpointing(options),
        non_recoverable_errors=parse_error_names(options.get(NON_RECOVERABLE_ERRORS_KEY, ""),
                                                 NON_RECOVERABLE_ERRORS_KEY),
    )


def resolve(defaults: Mapping[str, str], job_options: Mapping[str, str]) -> dict[str, str]:
    """The effective options of a job: ``defaults`` (airflow.cfg) overridden by ``job_options``, validated.

    Rule: defaults of another restart strategy type than the job's are dropped (a job choosing
    ``exponential-delay`` does not inherit ``fixed-delay`` settings from airflow.cfg). :class:`OptionError`
    names the first bad key (``[region_failover]`` for a bad default type).
    """
    if RESTART_STRATEGY_TYPE_KEY in job_options:
        chosen = parse_type(job_options[RESTART_STRATEGY_TYPE_KEY])
        default_type = parse_type(defaults.get(RESTART_STRATEGY_TYPE_KEY, chosen),
                                  f"[region_failover] {RESTART_STRATEGY_TYPE_KEY}")
        if chosen != default_type:
            defaults = {k: v for k, v in defaults.items() if k not in TYPE_OF_KEY}
    options = {**defaults, **job_options}
    parse_options(options)
    return dict(sorted(options.items()))


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
            f"{MAX_PER_TASK_FAILURES_KEY}, {MAX_TOTAL_TASK_FAILURES_KEY}, {NON_RECOVERABLE_ERRORS_KEY} or a "
            "checkpointing key"
        )
        raise OptionError(f"{key}: unknown failover/restart-strategy option key; {hint}")


def _restart_type(options: Mapping[str, object], checkpointing: bool) -> tuple[str, str | None, list[str]]:
    """The chosen type's main value, the key it came from (``None`` = default) and shadowed keys."""
    ignored: list[str] = []
    for key in (RESTART_STRATEGY_TYPE_KEY, DEPRECATED_RESTART_STRATEGY_TYPE_KEY):
        if key in options:
            if key == RESTART_STRATEGY_TYPE_KEY and DEPRECATED_RESTART_STRATEGY_TYPE_KEY in options:
                ignored.append(DEPRECATED_RESTART_STRATEGY_TYPE_KEY)
            return parse_type(options[key], key), key, ignored
    default = ExponentialDelayConfig if checkpointing else NoRestartConfig
    return default.type_name, None, ignored


def _keys_of_other_types(
    options: Mapping[str, object], type_name: str, type_key: str | None, strict: bool
) -> list[str]:
    """Type-specific keys that do not apply to the chosen type (an error when ``strict``)."""
    others = [key for key in options if key in TYPE_OF_KEY and (type_key is None or TYPE_OF_KEY[key] != type_name)]
    if others and strict:
        key = others[0]
        chosen = f"{type_name!r}" if type_key else f"unset (so {type_name!r})"
        raise OptionError(
            f"{key}: applies only to {RESTART_STRATEGY_TYPE_KEY}={TYPE_OF_KEY[key]}, but the type is {chosen}; "
            f"set {RESTART_STRATEGY_TYPE_KEY}: {TYPE_OF_KEY[key]} or remove the key"
        )
    return others


def _budget(options: Mapping[str, object]) -> BudgetConfig:
    """The FLIP-1 budgets (``-1`` = unlimited when not given)."""
    values = {
        name: parse_int(options[key], key)
        for name, key in (
            ("max_per_task_failures", MAX_PER_TASK_FAILURES_KEY),
            ("max_total_task_failures", MAX_TOTAL_TASK_FAILURES_KEY),
        )
        if key in options
    }
    return BudgetConfig(**values)

"""*Whether and when* to restart: Flink's restart backoff strategies, one module each, and their registry.

Rule: ``restart-strategy.type`` names a strategy by Flink's main value or an alias, in any case
(``none``/``off``/``disable``, ``fixed-delay``/``fixeddelay``, ``failure-rate``/``failurerate``,
``exponential-delay``/``exponentialdelay``); :func:`parse_type` maps it to the main value and :data:`CONFIGS` to
the strategy's frozen configuration class, whose ``from_options()`` reads the type's own keys.
"""

from __future__ import annotations

from collections.abc import Mapping

from airflow_region_failover.failover.backoff.base import (
    Clock,
    InvalidStateError,
    ManualClock,
    RestartBackoffStrategy,
    StrategyConfig,
)
from airflow_region_failover.failover.backoff.exponential_delay import ExponentialDelay, ExponentialDelayConfig
from airflow_region_failover.failover.backoff.failure_rate import FailureRate, FailureRateConfig
from airflow_region_failover.failover.backoff.fixed_delay import FixedDelay, FixedDelayConfig
from airflow_region_failover.failover.backoff.none import NoRestart, NoRestartConfig
from airflow_region_failover.failover.values import fail
from airflow_region_failover.graph.errors import OptionError

RESTART_STRATEGY_TYPE_KEY = "restart-strategy.type"

RestartStrategyConfig = NoRestartConfig | FixedDelayConfig | FailureRateConfig | ExponentialDelayConfig
"""The configuration of one restart backoff strategy."""

CONFIGS: Mapping[str, type[RestartStrategyConfig]] = {
    cls.type_name: cls for cls in (NoRestartConfig, FixedDelayConfig, FailureRateConfig, ExponentialDelayConfig)
}
"""Flink's main type value -> the configuration class of that strategy."""

ALIASES: Mapping[str, str] = {
    "none": NoRestartConfig.type_name,
    "off": NoRestartConfig.type_name,
    "disable": NoRestartConfig.type_name,
    "fixed-delay": FixedDelayConfig.type_name,
    "fixeddelay": FixedDelayConfig.type_name,
    "failure-rate": FailureRateConfig.type_name,
    "failurerate": FailureRateConfig.type_name,
    "exponential-delay": ExponentialDelayConfig.type_name,
    "exponentialdelay": ExponentialDelayConfig.type_name,
}
"""Every accepted ``restart-strategy.type`` value -> Flink's main value of that type."""

TYPE_HINT = (
    "use one of none|off|disable, fixed-delay|fixeddelay, failure-rate|failurerate, "
    "exponential-delay|exponentialdelay"
)

TYPE_OF_KEY: Mapping[str, str] = {key: cls.type_name for cls in CONFIGS.values() for key in cls.keys.values()}
"""Every type-specific key -> the type it belongs to."""


def parse_type(value: object, key: str = RESTART_STRATEGY_TYPE_KEY) -> str:
    """Map an accepted type name (any case, any alias) to Flink's main value, e.g. ``"OFF"`` -> ``"disable"``."""
    if not isinstance(value, str):
        fail(key, value, TYPE_HINT)
    main = ALIASES.get(value.strip().lower())
    if main is None:
        raise OptionError(f"{key}: {value!r} is not a restart strategy; {TYPE_HINT}")
    return main


__all__ = [
    "ALIASES",
    "CONFIGS",
    "RESTART_STRATEGY_TYPE_KEY",
    "TYPE_OF_KEY",
    "Clock",
    "ExponentialDelay",
    "ExponentialDelayConfig",
    "FailureRate",
    "FailureRateConfig",
    "FixedDelay",
    "FixedDelayConfig",
    "InvalidStateError",
    "ManualClock",
    "NoRestart",
    "NoRestartConfig",
    "RestartBackoffStrategy",
    "RestartStrategyConfig",
    "StrategyConfig",
    "parse_type",
]

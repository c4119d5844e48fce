"""Option keys → FailoverConfig.

The ``test_flink_*`` tests port ``RestartBackoffTimeStrategyFactoryLoaderTest`` (the configuration-driven cases:
``test*StrategySpecifiedInClusterConfig``, ``testInvalidStrategySpecifiedInClusterConfig``,
``testNoStrategySpecifiedWhenCheckpointingEnabled/Disabled``) and the defaults of ``RestartStrategyOptions``.
"""

from __future__ import annotations

import json
import random
from datetime import timedelta

import pytest
from hypothesis import given
from hypothesis import strategies as st

from airflow_region_failover.exceptions import OptionError
from airflow_region_failover.failover.backoff import ALIASES as RESTART_STRATEGY_ALIASES
from airflow_region_failover.failover.backoff import (
    ExponentialDelay,
    ExponentialDelayConfig,
    FailureRate,
    FailureRateConfig,
    FixedDelay,
    FixedDelayConfig,
    InvalidStateError,
    ManualClock,
    NoRestart,
    NoRestartConfig,
)
from airflow_region_failover.failover.backoff import parse_type as parse_restart_strategy_type
from airflow_region_failover.failover.backoff.base import JAVA_INT_MAX
from airflow_region_failover.failover.budget import BudgetConfig
from airflow_region_failover.failover.options import KNOWN_KEYS, FailoverConfig, parse_options
from tests.unit.failover.option_keys import ED, FD, FR, TYPE

# --- types, aliases and defaults ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("value", "strategy_class"),
    [
        ("none", NoRestart),
        ("off", NoRestart),
        ("disable", NoRestart),
        ("NONE", NoRestart),
        ("fixed-delay", FixedDelay),
        ("fixeddelay", FixedDelay),
        ("Fixed-Delay", FixedDelay),
        ("failure-rate", FailureRate),
        ("failurerate", FailureRate),
        ("exponential-delay", ExponentialDelay),
        ("exponentialdelay", ExponentialDelay),
        (" exponential-delay ", ExponentialDelay),
    ],
)
def test_flink_strategy_specified_in_config(value: str, strategy_class: type) -> None:
    # RestartBackoffTimeStrategyFactoryLoaderTest#test*StrategySpecifiedInClusterConfig (type is lower-cased)
    config = parse_options({TYPE: value})
    assert isinstance(config.create_strategy(ManualClock(), seed=1), strategy_class)


def test_flink_deprecated_type_key() -> None:
    # RestartStrategyOptions.RESTART_STRATEGY.withDeprecatedKeys("restart-strategy")
    assert parse_options({"restart-strategy": "fixed-delay"}).restart_strategy == FixedDelayConfig()
    both = parse_options({TYPE: "failure-rate", "restart-strategy": "fixed-delay"})
    assert both.restart_strategy == FailureRateConfig()
    assert both.ignored_keys == ("restart-strategy",)


def test_flink_no_strategy_when_checkpointing_disabled() -> None:  # testNoStrategySpecifiedWhenCheckpointingDisabled
    config = parse_options({})
    assert config == FailoverConfig()
    assert config.restart_strategy == NoRestartConfig()
    assert config.failover_strategy == "region"
    assert config.budget == BudgetConfig(-1, -1)


def test_flink_no_strategy_when_checkpointing_enabled() -> None:  # testNoStrategySpecifiedWhenCheckpointingEnabled
    config = parse_options({}, checkpointing=True)
    assert config.restart_strategy == ExponentialDelayConfig()
    strategy = config.create_strategy(ManualClock())
    assert isinstance(strategy, ExponentialDelay)
    assert (strategy.initial_backoff_ms, strategy.max_backoff_ms, strategy.backoff_multiplier) == (1_000, 60_000, 1.5)
    assert (strategy.reset_backoff_threshold_ms, strategy.jitter_factor) == (3_600_000, 0.1)
    assert strategy.attempts_before_reset_backoff == JAVA_INT_MAX


def test_flink_defaults() -> None:  # RestartStrategyOptions defaults (Flink >= 1.19's option names and defaults)
    assert FixedDelayConfig() == FixedDelayConfig(attempts=1, delay_ms=1_000)
    assert FailureRateConfig() == FailureRateConfig(1, 60_000, 1_000)
    assert ExponentialDelayConfig() == ExponentialDelayConfig(1_000, 60_000, 1.5, 3_600_000, 0.1, JAVA_INT_MAX)
    assert parse_options({TYPE: "fixed-delay"}).restart_strategy == FixedDelayConfig()
    assert parse_options({TYPE: "failure-rate"}).restart_strategy == FailureRateConfig()
    assert parse_options({TYPE: "exponential-delay"}).restart_strategy == ExponentialDelayConfig()


def test_every_alias_maps_to_a_main_value() -> None:
    assert set(RESTART_STRATEGY_ALIASES.values()) == {"disable", "fixed-delay", "failure-rate", "exponential-delay"}
    assert parse_restart_strategy_type("OFF") == "disable"


def test_seed_example_fixed_delay() -> None:  # the seed's example: 3 attempts, 10 s (written '10000 ms')
    config = parse_options({TYPE: "fixed-delay", FD + "attempts": "3", FD + "delay": "10000 ms"})
    assert config.restart_strategy == FixedDelayConfig(3, 10_000)


def test_seed_example_failure_rate() -> None:
    config = parse_options(
        {
            TYPE: "failure-rate",
            FR + "max-failures-per-interval": "3",
            FR + "failure-rate-interval": "5 min",
            FR + "delay": "10 s",
        }
    )
    assert config.restart_strategy == FailureRateConfig(3, 300_000, 10_000)


def test_seed_example_exponential_delay() -> None:
    config = parse_options(
        {
            TYPE: "exponential-delay",
            ED + "initial-backoff": "10 s",
            ED + "max-backoff": "2 min",
            ED + "backoff-multiplier": "1.4",
            ED + "reset-backoff-threshold": "10 min",
            ED + "jitter-factor": "0.1",
            ED + "attempts-before-reset-backoff": "10",
        }
    )
    assert config.restart_strategy == ExponentialDelayConfig(10_000, 120_000, 1.4, 600_000, 0.1, 10)


def test_failover_strategy_and_budgets() -> None:
    config = parse_options(
        {
            "jobmanager.execution.failover-strategy": "FULL",
            "restart-strategy.maximum-per-task-failures": "2",
            "restart-strategy.maximum-total-task-failures": "10",
        }
    )
    assert config.failover_strategy == "full"
    assert config.budget == BudgetConfig(2, 10)


def test_python_values_are_accepted() -> None:
    config = parse_options(
        {
            TYPE: "exponential-delay",
            ED + "initial-backoff": timedelta(seconds=2),
            ED + "max-backoff": 90_000,
            ED + "backoff-multiplier": 2,
            ED + "jitter-factor": 0.0,
            ED + "attempts-before-reset-backoff": 5,
        }
    )
    assert config.restart_strategy == ExponentialDelayConfig(2_000, 90_000, 2.0, 3_600_000, 0.0, 5)


def test_non_strict_ignores_keys_of_other_types_like_flink() -> None:
    options = {TYPE: "fixed-delay", ED + "max-backoff": "10 ss", FR + "delay": "1 s"}
    config = parse_options(options, strict=False)
    assert config.restart_strategy == FixedDelayConfig()
    assert config.ignored_keys == (ED + "max-backoff", FR + "delay")


def test_checkpointing_default_ignores_configured_exponential_keys_like_flink() -> None:
    config = parse_options({ED + "initial-backoff": "5 s"}, checkpointing=True, strict=False)
    assert config.restart_strategy == ExponentialDelayConfig()  # Flink uses the default values here
    assert config.ignored_keys == (ED + "initial-backoff",)


# --- every bad option → one line naming the key ----------------------------------------------------------------

BAD_OPTIONS = [
    ({TYPE: "invalid-strategy"}, TYPE),  # testInvalidStrategySpecifiedInClusterConfig
    ({TYPE: ""}, TYPE),
    ({TYPE: "fixed delay"}, TYPE),
    ({"restart-strategy": "bogus"}, "restart-strategy"),
    ({TYPE: 3}, TYPE),
    ({"restart-strategy.fixed-delay.atempts": "1"}, "restart-strategy.fixed-delay.atempts"),
    ({"restart-strategy.fixed-delay.max-backoff": "1 s"}, "restart-strategy.fixed-delay.max-backoff"),
    ({"some.other.key": "1"}, "some.other.key"),
    ({TYPE: "fixed-delay", ED + "max-backoff": "1 min"}, ED + "max-backoff"),  # another type's key (strict)
    ({FD + "attempts": "3"}, FD + "attempts"),  # no type set: the key would silently do nothing
    ({TYPE: "none", FD + "delay": "1 s"}, FD + "delay"),
    ({TYPE: "fixed-delay", FD + "attempts": "-1"}, FD + "attempts"),
    ({TYPE: "fixed-delay", FD + "attempts": "three"}, FD + "attempts"),
    ({TYPE: "fixed-delay", FD + "attempts": "1.5"}, FD + "attempts"),
    ({TYPE: "fixed-delay", FD + "attempts": ""}, FD + "attempts"),
    ({TYPE: "fixed-delay", FD + "attempts": "2147483648"}, FD + "attempts"),
    ({TYPE: "fixed-delay", FD + "attempts": True}, FD + "attempts"),
    ({TYPE: "fixed-delay", FD + "delay": "10 ss"}, FD + "delay"),
    ({TYPE: "fixed-delay", FD + "delay": "-1 s"}, FD + "delay"),
    ({TYPE: "fixed-delay", FD + "delay": ""}, FD + "delay"),
    ({TYPE: "fixed-delay", FD + "delay": -5}, FD + "delay"),
    ({TYPE: "fixed-delay", FD + "delay": timedelta(seconds=-1)}, FD + "delay"),
    ({TYPE: "fixed-delay", FD + "delay": 1.5}, FD + "delay"),
    ({TYPE: "failure-rate", FR + "max-failures-per-interval": "0"}, FR + "max-failures-per-interval"),
    ({TYPE: "failure-rate", FR + "max-failures-per-interval": "-3"}, FR + "max-failures-per-interval"),
    ({TYPE: "failure-rate", FR + "failure-rate-interval": "0 s"}, FR + "failure-rate-interval"),
    ({TYPE: "failure-rate", FR + "failure-rate-interval": "1 fortnight"}, FR + "failure-rate-interval"),
    ({TYPE: "failure-rate", FR + "delay": "soon"}, FR + "delay"),
    ({TYPE: "exponential-delay", ED + "initial-backoff": "0 ms"}, ED + "initial-backoff"),
    ({TYPE: "exponential-delay", ED + "initial-backoff": "2 min"}, ED + "initial-backoff"),  # > max 1 min
    ({TYPE: "exponential-delay", ED + "max-backoff": "500 ms"}, ED + "initial-backoff"),  # < initial 1 s
    ({TYPE: "exponential-delay", ED + "max-backoff": "0"}, ED + "max-backoff"),
    ({TYPE: "exponential-delay", ED + "backoff-multiplier": "1"}, ED + "backoff-multiplier"),
    ({TYPE: "exponential-delay", ED + "backoff-multiplier": "0.5"}, ED + "backoff-multiplier"),
    ({TYPE: "exponential-delay", ED + "backoff-multiplier": "-2"}, ED + "backoff-multiplier"),
    ({TYPE: "exponential-delay", ED + "backoff-multiplier": "x1.5"}, ED + "backoff-multiplier"),
    ({TYPE: "exponential-delay", ED + "backoff-multiplier": "inf"}, ED + "backoff-multiplier"),
    ({TYPE: "exponential-delay", ED + "backoff-multiplier": float("nan")}, ED + "backoff-multiplier"),
    ({TYPE: "exponential-delay", ED + "reset-backoff-threshold": "0 s"}, ED + "reset-backoff-threshold"),
    ({TYPE: "exponential-delay", ED + "jitter-factor": "1.1"}, ED + "jitter-factor"),
    ({TYPE: "exponential-delay", ED + "jitter-factor": "-0.1"}, ED + "jitter-factor"),
    ({TYPE: "exponential-delay", ED + "jitter-factor": "nan"}, ED + "jitter-factor"),
    ({TYPE: "exponential-delay", ED + "attempts-before-reset-backoff": "0"}, ED + "attempts-before-reset-backoff"),
    ({TYPE: "exponential-delay", ED + "attempts-before-reset-backoff": "-1"}, ED + "attempts-before-reset-backoff"),
    ({"jobmanager.execution.failover-strategy": "individual"}, "jobmanager.execution.failover-strategy"),
    ({"jobmanager.execution.failover-strategy": ""}, "jobmanager.execution.failover-strategy"),
    ({"restart-strategy.maximum-per-task-failures": "-2"}, "restart-strategy.maximum-per-task-failures"),
    ({"restart-strategy.maximum-per-task-failures": "many"}, "restart-strategy.maximum-per-task-failures"),
    ({"restart-strategy.maximum-total-task-failures": "-5"}, "restart-strategy.maximum-total-task-failures"),
    ({"restart-strategy.maximum-total-task-failures": "1e3"}, "restart-strategy.maximum-total-task-failures"),
]


@pytest.mark.parametrize(("options", "key"), BAD_OPTIONS)
def test_bad_option_is_one_line_naming_the_key(options: dict[str, object], key: str) -> None:
    with pytest.raises(OptionError) as info:
        parse_options(options)
    message = str(info.value)
    assert message.startswith(f"{key}: "), message
    assert "\n" not in message
    assert any(word in message for word in ("use", "write", "set", "did you mean", "lower")), message


def test_unknown_key_suggests_the_closest() -> None:
    with pytest.raises(OptionError, match=r"did you mean 'restart-strategy\.fixed-delay\.attempts'"):
        parse_options({"restart-strategy.fixed-delay.atempts": "1"})


def test_programmatic_configs_validate_too() -> None:
    with pytest.raises(OptionError, match=r"^restart-strategy\.fixed-delay\.attempts: "):
        FixedDelayConfig(attempts=-1)
    with pytest.raises(OptionError, match=r"^restart-strategy\.exponential-delay\.jitter-factor: "):
        ExponentialDelayConfig(jitter_factor=2.0)
    with pytest.raises(OptionError, match=r"^jobmanager\.execution\.failover-strategy: "):
        FailoverConfig(failover_strategy="partial")  # type: ignore[arg-type]
    with pytest.raises(OptionError, match=r"^restart-strategy\.maximum-total-task-failures: "):
        BudgetConfig(max_total_task_failures=-7)


# --- round trips ----------------------------------------------------------------------------------------------

durations = st.integers(min_value=1, max_value=10**10)
restart_configs = st.one_of(
    st.just(NoRestartConfig()),
    st.builds(FixedDelayConfig, st.integers(0, JAVA_INT_MAX), st.integers(0, 10**10)),
    st.builds(FailureRateConfig, st.integers(1, JAVA_INT_MAX), durations, st.integers(0, 10**10)),
    st.tuples(
        durations,
        st.integers(0, 10**10),
        st.floats(1.0001, 100),
        durations,
        st.floats(0, 1),
        st.integers(1, JAVA_INT_MAX),
    ).map(lambda p: ExponentialDelayConfig(p[0], p[0] + p[1], p[2], p[3], p[4], p[5])),
)
configs = st.builds(
    FailoverConfig,
    restart_configs,
    st.sampled_from(["region", "full"]),
    st.builds(BudgetConfig, st.integers(-1, 1000), st.integers(-1, 1000)),
)


@given(configs)
def test_to_options_round_trips(config: FailoverConfig) -> None:
    options = config.to_options()
    assert set(options) <= KNOWN_KEYS
    assert all(isinstance(value, str) for value in options.values())
    assert parse_options(options) == config


@given(configs, st.integers(0, 10**6))
def test_every_valid_config_creates_a_strategy(config: FailoverConfig, seed: int) -> None:
    strategy = config.create_strategy(ManualClock(), seed)
    assert strategy.type_name == config.restart_strategy.type_name
    budget = config.create_budget()
    assert budget.exhausted() is None


def test_restore_strategy_through_json() -> None:
    config = parse_options({TYPE: "exponential-delay", ED + "jitter-factor": "0.5"})
    clock = ManualClock(1_000)
    strategy = config.create_strategy(clock, seed=7)
    strategy.notify_failure()
    state = json.loads(json.dumps(strategy.state_dict()))
    restored = config.restore_strategy(state, clock, seed=7)
    assert restored.state_dict() == strategy.state_dict()
    assert restored.get_backoff_time() == strategy.get_backoff_time()
    again = config.restore_strategy(state, clock, seed=7)
    clock.advance(10**7)
    restored.notify_failure()
    again.notify_failure()
    assert restored.state_dict() == again.state_dict()  # restoring is reproducible
    other = parse_options({TYPE: "fixed-delay"})
    with pytest.raises(InvalidStateError):
        other.restore_strategy(state, clock)


def test_restore_budget() -> None:
    config = parse_options({"restart-strategy.maximum-per-task-failures": "1"})
    budget = config.create_budget()
    budget.record("a#0")
    budget.record("a#0")
    restored = config.restore_budget(json.loads(json.dumps(budget.state_dict())))
    assert restored.exhausted() == budget.exhausted() is not None


def test_seeded_strategies_are_reproducible() -> None:
    config = parse_options({TYPE: "exponential-delay", ED + "jitter-factor": "1"})
    runs = []
    for _ in range(2):
        clock = ManualClock()
        strategy = config.create_strategy(clock, seed=42)
        seen = []
        for _ in range(8):
            strategy.notify_failure()
            seen.append(strategy.get_backoff_time())
            clock.advance(seen[-1] + 1)
        runs.append(seen)
    assert runs[0] == runs[1]
    assert random.Random(42).random() == random.Random(42).random()

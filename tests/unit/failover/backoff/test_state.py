"""The restart strategies' state: JSON round trip, restore from a decision log, refused states; the manual clock."""

from __future__ import annotations

import json
import random

import pytest
from hypothesis import given
from hypothesis import strategies as st

from airflow_region_failover.failover.backoff import (
    ExponentialDelay,
    FailureRate,
    FixedDelay,
    InvalidStateError,
    ManualClock,
    NoRestart,
    RestartBackoffStrategy,
)
from airflow_region_failover.failover.backoff.base import DEFAULT_NEXT_RESTART_TIMESTAMP
from tests.unit.failover.backoff.timelines import timeline


def json_round_trip(state: dict[str, object]) -> dict[str, object]:
    loaded = json.loads(json.dumps(state))
    assert isinstance(loaded, dict)
    return loaded


def make_all(clock: ManualClock, rng: random.Random) -> list[RestartBackoffStrategy]:
    return [
        NoRestart(),
        FixedDelay(3, 100),
        FailureRate(2, 1_000, 100, clock),
        ExponentialDelay(10, 1_000, 1.5, 500, 0.5, 4, clock, rng),
    ]


@given(timeline, st.integers(min_value=0, max_value=59), st.integers(min_value=0, max_value=1_000))
def test_restored_strategy_behaves_like_the_original(events: list[tuple[str, int]], cut: int, seed: int) -> None:
    clock = ManualClock()
    originals = make_all(clock, random.Random(seed))
    restored: list[RestartBackoffStrategy] | None = None
    for index, (op, advance) in enumerate(events):
        if index == cut:  # persist, then continue with restored copies (same randomness from here on)
            rng = random.Random()
            rng.setstate(originals[-1]._rng.getstate())  # type: ignore[attr-defined]
            restored = make_all(clock, rng)
            for copy, original in zip(restored, originals, strict=True):
                copy.load_state(json_round_trip(original.state_dict()))
        clock.advance(advance)
        for strategy in originals + (restored or []):
            if op == "failure":
                strategy.notify_failure()
        if restored is not None:
            for copy, original in zip(restored, originals, strict=True):
                assert copy.state_dict() == original.state_dict()
                assert copy.can_restart() == original.can_restart()


def test_state_dicts() -> None:
    clock = ManualClock(5)
    strategies = make_all(clock, random.Random(0))
    assert [s.state_dict() for s in strategies] == [
        {"type": "disable"},
        {"type": "fixed-delay", "current_restart_attempt": 0},
        {"type": "failure-rate", "failure_timestamps": []},
        {
            "type": "exponential-delay",
            "current_restart_attempt": 0,
            "next_restart_timestamp_ms": DEFAULT_NEXT_RESTART_TIMESTAMP,
        },
    ]
    for strategy in strategies:
        strategy.notify_failure()
    assert strategies[1].state_dict()["current_restart_attempt"] == 1
    assert strategies[2].state_dict()["failure_timestamps"] == [5]
    assert strategies[3].state_dict()["next_restart_timestamp_ms"] == 5 + strategies[3].get_backoff_time()


def test_failure_rate_state_keeps_only_what_flink_holds() -> None:
    strategy = FailureRate(2, 1_000, 0, ManualClock(100))
    strategy.load_state({"type": "failure-rate", "failure_timestamps": [1, 2, 3, 4, 5]})
    assert strategy.state_dict()["failure_timestamps"] == [3, 4, 5]
    assert not strategy.can_restart()


@pytest.mark.parametrize(
    ("strategy", "state", "match"),
    [
        (FixedDelay(1, 0), {"type": "exponential-delay"}, "cannot be loaded"),
        (FixedDelay(1, 0), {"type": "fixed-delay"}, "current_restart_attempt"),
        (FixedDelay(1, 0), {"type": "fixed-delay", "current_restart_attempt": -1}, "current_restart_attempt"),
        (FixedDelay(1, 0), {"type": "fixed-delay", "current_restart_attempt": True}, "current_restart_attempt"),
        (FailureRate(1, 1, 0, ManualClock()), {"type": "failure-rate", "failure_timestamps": ["x"]}, "timestamps"),
        (
            ExponentialDelay(1, 2, 2.0, 1, 0, 1, ManualClock(), random.Random(0)),
            {"type": "exponential-delay", "current_restart_attempt": 0, "next_restart_timestamp_ms": "soon"},
            "next_restart_timestamp_ms",
        ),
        (NoRestart(), {"type": "fixed-delay"}, "cannot be loaded"),
    ],
)
def test_bad_state_is_refused(strategy: RestartBackoffStrategy, state: dict[str, object], match: str) -> None:
    with pytest.raises(InvalidStateError, match=match):
        strategy.load_state(state)


def test_manual_clock() -> None:
    clock = ManualClock()
    assert clock() == 0
    clock.advance(5)
    clock.set(100)
    clock.advance(1)
    assert clock() == 101

"""The restart-strategy preview (the CLI's ``backoff``): a strategy and budgets replayed on a timeline of events."""

from __future__ import annotations

import pytest

from airflow_region_failover.exceptions import OptionError, RegionFailoverError
from airflow_region_failover.failover.preview import preview
from tests.unit.failover.option_keys import ED, FD, FR, TYPE


def test_preview_exponential_delay_merges_and_grows() -> None:
    options = {
        TYPE: "exponential-delay",
        ED + "initial-backoff": "1 s",
        ED + "backoff-multiplier": "2",
        ED + "max-backoff": "10 s",
        ED + "jitter-factor": "0",
    }
    events = [
        {"t": 0, "op": "check"},
        {"t": 0, "op": "failure"},
        {"t": 500, "op": "failure"},  # restart pending until 1000: merged
        {"t": 900, "op": "check"},
        {"t": 2_000, "op": "failure"},
        {"t": 5_000, "op": "failure"},
        {"t": 5_000 + 4_000 + 3_600_000, "op": "failure"},  # an hour after the scheduled restart: reset
    ]
    assert preview(options, events, seed=3) == [
        {"t": 0, "op": "check", "new_attempt": None, "can_restart": True, "backoff_ms": None},
        {"t": 0, "op": "failure", "new_attempt": True, "can_restart": True, "backoff_ms": 1_000},
        {"t": 500, "op": "failure", "new_attempt": False, "can_restart": True, "backoff_ms": 500},
        {"t": 900, "op": "check", "new_attempt": None, "can_restart": True, "backoff_ms": 100},
        {"t": 2_000, "op": "failure", "new_attempt": True, "can_restart": True, "backoff_ms": 2_000},
        {"t": 5_000, "op": "failure", "new_attempt": True, "can_restart": True, "backoff_ms": 4_000},
        {"t": 3_609_000, "op": "failure", "new_attempt": True, "can_restart": True, "backoff_ms": 1_000},
    ]


def test_preview_fixed_delay_and_default_none() -> None:
    events = [{"t": t, "op": "failure"} for t in (0, 10, 20)]
    rows = preview({TYPE: "fixed-delay", FD + "attempts": "2", FD + "delay": "20 s"}, events, seed=0)
    assert [(r["can_restart"], r["backoff_ms"]) for r in rows] == [(True, 20_000), (True, 20_000), (False, 20_000)]
    rows = preview({}, events[:1], seed=0)
    assert rows == [{"t": 0, "op": "failure", "new_attempt": True, "can_restart": False, "backoff_ms": 0}]


def test_preview_failure_rate_window() -> None:
    options = {TYPE: "failure-rate", FR + "max-failures-per-interval": "2", FR + "failure-rate-interval": "1 s"}
    events = [
        {"t": 0, "op": "failure"},
        {"t": 400, "op": "failure"},
        {"t": 1_000, "op": "failure"},
        {"t": 1_001, "op": "check"},
    ]
    assert [r["can_restart"] for r in preview(options, events, seed=0)] == [True, True, False, True]


def test_preview_budgets() -> None:
    options = {TYPE: "fixed-delay", FD + "attempts": "100", "restart-strategy.maximum-per-task-failures": "1"}
    events = [
        {"t": 0, "op": "failure", "task": "a#0"},
        {"t": 1, "op": "failure", "task": "b#0"},
        {"t": 2, "op": "failure", "task": "a#0"},
    ]
    assert [r["can_restart"] for r in preview(options, events, seed=0)] == [True, True, False]


def test_preview_is_reproducible_with_a_seed() -> None:
    options = {TYPE: "exponential-delay"}
    events = [{"t": t * 100_000, "op": "failure"} for t in range(10)]
    assert preview(options, events, seed=5) == preview(options, events, seed=5)


@pytest.mark.parametrize(
    ("events", "match"),
    [
        ({"t": 0, "op": "failure"}, "not a list"),
        ([{"t": 5, "op": "failure"}, {"t": 4, "op": "check"}], r"events\[1\]: t=4 goes back in time"),
        ([{"t": -1, "op": "failure"}], r"events\[0\]"),
        ([{"t": "0", "op": "failure"}], r"events\[0\]"),
        ([{"t": 0, "op": "crash"}], r"events\[0\]: 'op'"),
        ([{"t": 0}], r"events\[0\]: 'op'"),
        ([{"t": 0, "op": "failure", "when": 1}], r"events\[0\]: unknown field"),
        ([{"t": 0, "op": "check", "task": "a#0"}], r"events\[0\]: 'task'"),
        ([[0, "failure"]], r"events\[0\]"),
    ],
)
def test_preview_bad_events(events: object, match: str) -> None:
    with pytest.raises(RegionFailoverError, match=match):
        preview({}, events, seed=0)  # type: ignore[arg-type]


def test_preview_bad_option_is_an_option_error() -> None:
    with pytest.raises(OptionError, match=r"^restart-strategy\.fixed-delay\.delay: '10 ss'"):
        preview({TYPE: "fixed-delay", FD + "delay": "10 ss"}, [], seed=0)

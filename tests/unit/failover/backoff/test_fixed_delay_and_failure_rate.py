"""The counting restart strategies: ``none``, ``fixed-delay`` and ``failure-rate``.

The ``test_flink_*`` tests port Flink's own unit tests (flink-runtime/src/test/java/org/apache/flink/runtime/
executiongraph/failover/): ``NoRestartBackoffTimeStrategy`` (behaviour of the enum), ``FixedDelayRestartBackoff
TimeStrategyTest`` and ``FailureRateRestartBackoffTimeStrategyTest``. Flink's ``ManualClock`` starts at 0.
"""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from airflow_region_failover.failover.backoff import FailureRate, FixedDelay, ManualClock, NoRestart

# ==============================================================================================================
# NoRestartBackoffTimeStrategy
# ==============================================================================================================


def test_flink_no_restart() -> None:
    strategy = NoRestart()
    assert strategy.notify_failure() is True
    assert strategy.can_restart() is False
    assert strategy.get_backoff_time() == 0
    assert strategy.type_name == "disable"


# ==============================================================================================================
# FixedDelayRestartBackoffTimeStrategyTest
# ==============================================================================================================


def test_flink_fixed_delay_number_of_restarts() -> None:  # testNumberOfRestarts
    number_of_restarts = 3
    strategy = FixedDelay(number_of_restarts, 0)
    for _ in range(number_of_restarts):
        strategy.notify_failure()
        # two calls to can_restart() to make sure it is not used to maintain the counter
        assert strategy.can_restart()
        assert strategy.can_restart()
    strategy.notify_failure()
    assert not strategy.can_restart()


def test_flink_fixed_delay_backoff_time() -> None:  # testBackoffTime
    assert FixedDelay(1, 10_000).get_backoff_time() == 10_000


def test_fixed_delay_zero_attempts_never_restarts() -> None:
    strategy = FixedDelay(0, 5)
    assert strategy.can_restart()  # nothing failed yet
    assert strategy.notify_failure() is True
    assert not strategy.can_restart()


@given(st.integers(min_value=0, max_value=50), st.integers(min_value=1, max_value=120))
def test_fixed_delay_allows_exactly_attempts_restarts(attempts: int, failures: int) -> None:
    strategy = FixedDelay(attempts, 1_000)
    allowed = 0
    for _ in range(failures):
        assert strategy.notify_failure() is True
        allowed += strategy.can_restart()
    assert allowed == min(attempts, failures)


# ==============================================================================================================
# FailureRateRestartBackoffTimeStrategyTest
# ==============================================================================================================


def test_flink_failure_rate_many_failures_within_rate() -> None:  # testManyFailuresWithinRate
    num_failures, interval_ms = 3, 1
    clock = ManualClock()
    strategy = FailureRate(1, interval_ms, 0, clock)
    for _ in range(num_failures):
        strategy.notify_failure()
        assert strategy.can_restart()
        clock.advance(interval_ms + 1)
    assert strategy.can_restart()


def test_flink_failure_rate_failures_exceeding_rate() -> None:  # testFailuresExceedingRate
    num_failures, interval_ms = 3, 10_000
    strategy = FailureRate(num_failures, interval_ms, 0, ManualClock())
    for _ in range(num_failures):
        strategy.notify_failure()
        assert strategy.can_restart()
    strategy.notify_failure()
    assert not strategy.can_restart()


def test_flink_failure_rate_backoff_time() -> None:  # testBackoffTime
    assert FailureRate(1, 1, 10_000, ManualClock()).get_backoff_time() == 10_000


def test_failure_rate_window_is_inclusive() -> None:
    clock = ManualClock()
    strategy = FailureRate(2, 1_000, 0, clock)
    for t in (0, 400, 1_000):  # three failures spanning exactly the interval: more than 2 within it
        clock.set(t)
        strategy.notify_failure()
    assert not strategy.can_restart()
    clock.set(1_001)  # the oldest is now more than the interval ago
    assert strategy.can_restart()


def reference_failure_rate(failures: list[int], now: int, max_failures: int, interval: int) -> bool:
    """Brute force: refuse iff the (max+1)-th most recent failure is at most ``interval`` before now."""
    if len(failures) <= max_failures:
        return True
    return now - failures[-(max_failures + 1)] > interval


@given(
    st.integers(min_value=1, max_value=5),
    st.integers(min_value=1, max_value=50),
    st.lists(st.tuples(st.booleans(), st.integers(min_value=0, max_value=30)), max_size=40),
)
def test_failure_rate_matches_sliding_window(max_failures: int, interval: int, steps: list[tuple[bool, int]]) -> None:
    clock = ManualClock()
    strategy = FailureRate(max_failures, interval, 7, clock)
    failures: list[int] = []
    for is_failure, advance in steps:
        clock.advance(advance)
        if is_failure:
            assert strategy.notify_failure() is True
            failures.append(clock())
        assert strategy.can_restart() == reference_failure_rate(failures, clock(), max_failures, interval)
        assert strategy.get_backoff_time() == 7


def test_other_constructor_checks() -> None:
    with pytest.raises(ValueError, match="at least 0"):
        FixedDelay(-1, 0)
    with pytest.raises(ValueError, match="at least 0 ms"):
        FixedDelay(1, -1)
    with pytest.raises(ValueError, match="greater than 0"):
        FailureRate(0, 1, 0, ManualClock())
    with pytest.raises(ValueError, match="greater than 0 ms"):
        FailureRate(1, 0, 0, ManualClock())

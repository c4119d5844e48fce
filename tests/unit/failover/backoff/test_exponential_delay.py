"""The ``exponential-delay`` restart strategy.

The ``test_flink_*`` tests port Flink's ``ExponentialDelayRestartBackoffTimeStrategyTest`` (Flink >= 1.19, with
merging and ``attemptsBeforeResetBackoff``; flink-runtime/src/test/java/org/apache/flink/runtime/executiongraph/
failover/). Flink's ``ManualClock`` starts at 0.
"""

from __future__ import annotations

import random
from collections.abc import Callable

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from airflow_region_failover.failover.backoff import ExponentialDelay, ManualClock, RestartBackoffStrategy
from airflow_region_failover.failover.backoff.base import JAVA_INT_MAX, JAVA_LONG_MAX, java_long
from airflow_region_failover.failover.backoff.exponential_delay import exponential_backoff_ms
from tests.unit.failover.backoff.timelines import timeline

INT_MAX = JAVA_INT_MAX


def exponential(
    clock: ManualClock,
    initial: int,
    maximum: int,
    multiplier: float,
    threshold: int,
    jitter: float,
    attempts: int,
    rng: random.Random | None = None,
) -> ExponentialDelay:
    """Flink's constructor argument order: (clock, initial, max, multiplier, threshold, jitter, attempts)."""
    return ExponentialDelay(initial, maximum, multiplier, threshold, jitter, attempts, clock, rng or random.Random(0))


def test_flink_exponential_max_attempts() -> None:  # testMaxAttempts
    max_attempts, max_backoff = 13, 3
    clock = ManualClock()
    strategy = exponential(clock, 1, max_backoff, 1.2, 10, 0.25, max_attempts)
    for _ in range(max_attempts + 1):
        assert strategy.can_restart()
        assert strategy.notify_failure() is True
        clock.advance(max_backoff + 1)
    assert not strategy.can_restart()


def test_flink_exponential_not_call_notify_failure() -> None:  # testNotCallNotifyFailure
    strategy = exponential(ManualClock(), 42, 45, 2.0, 8, 0, 10)
    with pytest.raises(RuntimeError, match=r"Please call notify_failure first\."):
        strategy.get_backoff_time()


def test_flink_exponential_initial_backoff() -> None:  # testInitialBackoff
    strategy = exponential(ManualClock(), 42, 45, 2.0, 8, 0, INT_MAX)
    strategy.notify_failure()
    assert strategy.get_backoff_time() == 42


def test_flink_exponential_max_backoff() -> None:  # testMaxBackoff
    max_backoff = 6
    strategy = exponential(ManualClock(), 1, max_backoff, 2.0, 8, 0.25, INT_MAX)
    for _ in range(10):
        strategy.notify_failure()
        assert strategy.get_backoff_time() <= max_backoff


def test_flink_exponential_reset_backoff() -> None:  # testResetBackoff
    initial, threshold = 1, 8
    clock = ManualClock()
    strategy = exponential(clock, initial, 5, 2.0, threshold, 0.25, INT_MAX)
    assert strategy.notify_failure() is True
    clock.advance(threshold + strategy.get_backoff_time() - 1)
    assert strategy.notify_failure() is True
    assert strategy.get_backoff_time() == 2, "Backoff should be increased"
    clock.advance(threshold + strategy.get_backoff_time())
    assert strategy.notify_failure() is True
    assert strategy.get_backoff_time() == initial, "Backoff should be reset"


def test_flink_exponential_backoff_multiplier() -> None:  # testBackoffMultiplier
    initial, max_backoff = 4, 300
    clock = ManualClock()
    strategy = exponential(clock, initial, max_backoff, 2.3, INT_MAX, 0, 10)
    for expected in (4, 9, 21):  # 4, trunc(4 * 2.3), trunc(4 * 2.3 * 2.3): truncated once, on the power
        assert strategy.notify_failure() is True
        assert strategy.get_backoff_time() == expected
        clock.advance(max_backoff + 1)


def random_range(
    make: Callable[[], RestartBackoffStrategy], clock: ManualClock, advance: int, failures: int
) -> set[int]:
    """Flink's assertCorrectRandomRangeWithFailureCount: 1000 fresh strategies, the set of backoffs seen."""
    seen = set()
    for _ in range(1000):
        strategy = make()
        for _ in range(failures):
            clock.advance(advance)
            assert strategy.notify_failure() is True
        seen.add(strategy.get_backoff_time())
    return seen


def test_flink_exponential_jitter() -> None:  # testJitter
    initial, max_backoff = 2, 7
    clock = ManualClock()
    rng = random.Random(1)

    def make() -> RestartBackoffStrategy:
        return exponential(clock, initial, max_backoff, 2.0, INT_MAX, 0.25, INT_MAX, rng)

    assert random_range(make, clock, max_backoff + 1, 2) == {3, 4, 5}
    assert random_range(make, clock, max_backoff + 1, 3) == {6, 7}
    assert random_range(make, clock, max_backoff + 1, 4) == {7}


def test_flink_exponential_jitter_no_higher_than_max() -> None:  # testJitterNoHigherThanMax
    max_backoff = 7
    clock = ManualClock()
    rng = random.Random(2)

    def make() -> RestartBackoffStrategy:
        return exponential(clock, 1, max_backoff, 2.0, INT_MAX, 1.0, INT_MAX, rng)

    assert random_range(make, clock, max_backoff + 1, 1) == {1, 2}
    assert random_range(make, clock, max_backoff + 1, 2) == {1, 2, 3, 4}
    assert random_range(make, clock, max_backoff + 1, 3) == {1, 2, 3, 4, 5, 6, 7}


def test_flink_exponential_multiple_settings() -> None:  # testMultipleSettings
    clock = ManualClock()
    initial, max_backoff, threshold = 1, 9, 80
    strategy = exponential(clock, initial, max_backoff, 2.0, threshold, 0.25, INT_MAX)

    # ensure initial data
    assert strategy.notify_failure() is True
    assert strategy.can_restart()
    assert strategy.get_backoff_time() == initial

    # ensure backoff time is initial after the first failure
    clock.advance(threshold + 1)
    assert strategy.notify_failure() is True
    assert strategy.can_restart()
    assert strategy.get_backoff_time() == initial

    # ensure backoff increases until threshold is reached
    clock.advance(4)
    assert strategy.notify_failure() is True
    assert strategy.can_restart()
    assert strategy.get_backoff_time() == 2

    # ensure backoff is reset after threshold is reached
    clock.advance(threshold + 9 + 1)
    assert strategy.notify_failure() is True
    assert strategy.can_restart()
    assert strategy.get_backoff_time() == 1
    clock.advance(max_backoff + 1)

    # ensure backoff still increases
    assert strategy.notify_failure() is True
    assert strategy.can_restart()
    assert strategy.get_backoff_time() == 2


def check_multiple_exceptions_are_merged(clock: ManualClock, expected_backoff: int, strategy: ExponentialDelay) -> None:
    """Flink's checkMultipleExceptionsAreMerged: only the first failure of a round is a new attempt."""
    expected_new_attempt = True
    for advance in range(expected_backoff):
        for _ in range(10):
            assert strategy.notify_failure() is expected_new_attempt
            expected_new_attempt = False
            assert strategy.can_restart()
            assert strategy.get_backoff_time() == expected_backoff - advance
        clock.advance(1)


def test_flink_exponential_merge_multiple_exceptions_into_one_attempt() -> None:  # testMergeMultipleExceptions...
    clock = ManualClock()
    initial, multiplier, max_backoff, threshold = 2, 2.0, 6, 80
    strategy = exponential(clock, initial, max_backoff, multiplier, threshold, 0.0, 3)

    current = initial  # all exceptions merged into one attempt if the time is the same
    check_multiple_exceptions_are_merged(clock, current, strategy)

    clock.advance(1)  # a new round: a new exception is a new attempt
    current = int(current * multiplier)
    check_multiple_exceptions_are_merged(clock, current, strategy)

    clock.advance(1)
    current = max_backoff
    check_multiple_exceptions_are_merged(clock, current, strategy)

    clock.advance(1)  # a new round, and it reaches max attempts
    assert strategy.notify_failure() is True
    assert not strategy.can_restart()


def test_flink_exponential_merging_works_with_resetting() -> None:  # testMergingExceptionsWorksWithResetting
    clock = ManualClock()
    initial, multiplier, max_backoff, threshold = 2, 2.0, 6, 80
    strategy = exponential(clock, initial, max_backoff, multiplier, threshold, 0.0, 3)
    for _ in range(10):
        current = initial
        check_multiple_exceptions_are_merged(clock, current, strategy)
        clock.advance(1)
        current = int(current * multiplier)
        check_multiple_exceptions_are_merged(clock, current, strategy)
        clock.advance(1)
        current = max_backoff
        check_multiple_exceptions_are_merged(clock, current, strategy)
        clock.advance(threshold)  # after the threshold the strategy resets


def test_flink_docs_example_without_jitter() -> None:
    """The "Task Failure Recovery" page: initial 1 s, multiplier 2, max 10 s → 1, 2, 4, 8, 10, 10 s."""
    clock = ManualClock(1_700_000_000_000)
    strategy = exponential(clock, 1_000, 10_000, 2.0, 3_600_000, 0.0, INT_MAX)
    seen = []
    for _ in range(6):
        strategy.notify_failure()
        seen.append(strategy.get_backoff_time())
        clock.advance(strategy.get_backoff_time() + 1)
    assert seen == [1_000, 2_000, 4_000, 8_000, 10_000, 10_000]


def test_flink_docs_example_jitter_range() -> None:
    """The docs: with jitter 0.1, the 3rd retry waits 3.6-4.4 s and the 4th 7.2-8.8 s."""
    for seed in range(200):
        clock = ManualClock()
        strategy = exponential(clock, 1_000, 10_000, 2.0, 3_600_000, 0.1, INT_MAX, random.Random(seed))
        seen = []
        for _ in range(4):
            strategy.notify_failure()
            seen.append(strategy.get_backoff_time())
            clock.advance(seen[-1] + 1)
        assert 3_600 <= seen[2] <= 4_400
        assert 7_200 <= seen[3] <= 8_800


def test_exponential_reset_is_measured_from_the_scheduled_restart() -> None:
    clock = ManualClock()
    strategy = exponential(clock, 10, 1_000, 2.0, 100, 0.0, INT_MAX)
    strategy.notify_failure()  # restart scheduled at 10
    clock.set(11)
    strategy.notify_failure()  # attempt 2: backoff 20, restart at 31
    clock.set(31 + 99)  # 99 ms after the scheduled restart: no reset yet
    strategy.notify_failure()
    assert strategy.get_backoff_time() == 40
    clock.set(130 + 40 + 100)  # exactly the threshold after the scheduled restart at 170: reset
    strategy.notify_failure()
    assert strategy.get_backoff_time() == 10


def test_exponential_attempt_counter_resets_with_backoff() -> None:
    clock = ManualClock()
    strategy = exponential(clock, 1, 4, 2.0, 50, 0.0, 2)
    for _ in range(2):
        strategy.notify_failure()
        clock.advance(strategy.get_backoff_time() + 1)
    strategy.notify_failure()
    assert not strategy.can_restart()  # third attempt, only two allowed
    clock.advance(strategy.get_backoff_time() + 50)
    strategy.notify_failure()
    assert strategy.can_restart()  # quiet period: counter reset, this is attempt 1 again
    assert strategy.get_backoff_time() == 1


def test_explicit_failure_timestamp_overrides_clock() -> None:
    clock = ManualClock(1_000)
    strategy = exponential(clock, 100, 1_000, 2.0, 10_000, 0.0, INT_MAX)
    assert strategy.notify_failure(timestamp_ms=950) is True
    assert strategy.get_backoff_time() == 50  # restart at 1050, now is 1000
    assert strategy.notify_failure(timestamp_ms=1_050) is False  # on the scheduled time: merged


def test_exponential_backoff_truncates_once_on_the_power() -> None:
    # Flink: (long) (initial * Math.pow(multiplier, attempt)); not a product of truncated steps
    assert [exponential_backoff_ms(4, 2.3, n) for n in range(4)] == [4, 9, 21, 48]
    assert exponential_backoff_ms(3, 1.5, 3) == 10  # 3 * 3.375 = 10.125 (step-wise truncation would give 9)
    assert exponential_backoff_ms(1_000, 1.5, 10_000) == JAVA_LONG_MAX  # overflow saturates like (long) inf


def test_java_long_cast() -> None:
    assert java_long(2.9) == 2
    assert java_long(-2.9) == -2
    assert java_long(float("nan")) == 0
    assert java_long(float("inf")) == JAVA_LONG_MAX
    assert java_long(-float("inf")) == -JAVA_LONG_MAX - 1


def test_exponential_huge_attempts_stay_within_bounds() -> None:
    clock = ManualClock()
    strategy = exponential(clock, 1_000, 60_000, 1.5, 3_600_000, 1.0, INT_MAX, random.Random(3))
    for _ in range(2_000):  # the power overflows a double long before this
        strategy.notify_failure()
        assert 1_000 <= strategy.get_backoff_time() <= 60_000
        clock.advance(strategy.get_backoff_time() + 1)


@pytest.mark.parametrize(
    ("args", "message"),
    [
        ((0, 10, 2.0, 10, 0.1, 1), "Initial backoff must be at least 1."),
        ((5, 4, 2.0, 10, 0.1, 1), "Initial backoff cannot be higher than maximum backoff."),
        ((1, 10, 1.0, 10, 0.1, 1), "Backoff multiplier must be greater than 1."),
        ((1, 10, 2.0, 0, 0.1, 1), "Threshold duration for exponential backoff reset must be at least 1."),
        ((1, 10, 2.0, 10, 1.5, 1), "Jitter factor must be >= 0 and <= 1."),
        ((1, 10, 2.0, 10, 0.1, 0), "The attemptsBeforeResetBackoff must be at least 1."),
    ],
)
def test_exponential_constructor_checks(args: tuple[int, int, float, int, float, int], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        ExponentialDelay(*args, ManualClock(), random.Random(0))


exponential_params = st.tuples(
    st.integers(min_value=1, max_value=10_000),  # initial
    st.integers(min_value=0, max_value=100_000),  # max - initial
    st.floats(min_value=1.0001, max_value=10.0),  # multiplier
    st.integers(min_value=1, max_value=100_000),  # threshold
    st.floats(min_value=0.0, max_value=1.0),  # jitter
    st.integers(min_value=1, max_value=INT_MAX),  # attempts before reset
)


@settings(max_examples=200)
@given(exponential_params, timeline, st.integers(min_value=0, max_value=2**32))
def test_exponential_properties(
    params: tuple[int, int, float, int, float, int], events: list[tuple[str, int]], seed: int
) -> None:
    """Backoff within [initial, max] when scheduled; merge iff a restart is pending; counter matches attempts."""
    initial, extra, multiplier, threshold, jitter, attempts = params
    maximum = initial + extra
    clock = ManualClock()
    strategy = ExponentialDelay(initial, maximum, multiplier, threshold, jitter, attempts, clock, random.Random(seed))
    scheduled: int | None = None
    for op, advance in events:
        clock.advance(advance)
        if op == "failure":
            pending = scheduled is not None and clock() <= scheduled
            assert strategy.notify_failure() is (not pending)
            if not pending:
                assert initial <= strategy.get_backoff_time() <= maximum
                scheduled = clock() + strategy.get_backoff_time()
        if scheduled is not None:
            assert strategy.get_backoff_time() == max(0, scheduled - clock())
            assert 0 <= strategy.get_backoff_time() <= maximum
        state = strategy.state_dict()
        counter = state["current_restart_attempt"]
        assert isinstance(counter, int)
        assert strategy.can_restart() == (attempts >= INT_MAX or counter <= attempts)

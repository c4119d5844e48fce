"""Flink duration syntax.  Ports ``flink-core/src/test/java/org/apache/flink/util/TimeUtilsTest.java``."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from airflow_region_failover.failover.values import JAVA_LONG_MAX, format_duration_ms, parse_duration_ms
from airflow_region_failover.graph.errors import OptionError

KEY = "restart-strategy.fixed-delay.delay"


def ms(text: str) -> int:
    return parse_duration_ms(text, KEY)


# --- TimeUtilsTest#testParseDurationNanos/Micros/Millis/Seconds/Minutes/Hours/Days -----------------------------


@pytest.mark.parametrize(
    "text", ["424562ns", "424562nano", "424562nanos", "424562nanosecond", "424562nanoseconds", "424562 ns"]
)
def test_nanos_truncate_to_millis(text: str) -> None:
    assert ms(text) == 0  # 424562 ns = 0.42 ms; Duration.toMillis() truncates
    assert ms(text.replace("424562", "4245620000")) == 4245


@pytest.mark.parametrize(
    "text",
    [
        "565731µs",
        "565731micro",
        "565731micros",
        "565731microsecond",
        "565731microseconds",
        "565731 µs",
        "565731us",
        "565731 US",
    ],
)
def test_micros(text: str) -> None:
    assert ms(text) == 565


@pytest.mark.parametrize(
    "text", ["1234", "1234ms", "1234milli", "1234millis", "1234millisecond", "1234milliseconds", "1234 ms"]
)
def test_millis(text: str) -> None:
    assert ms(text) == 1234


@pytest.mark.parametrize("text", ["667766s", "667766sec", "667766secs", "667766second", "667766seconds", "667766 s"])
def test_seconds(text: str) -> None:
    assert ms(text) == 667766 * 1000


@pytest.mark.parametrize("text", ["7657623m", "7657623min", "7657623minute", "7657623minutes", "7657623 min"])
def test_minutes(text: str) -> None:
    assert ms(text) == 7657623 * 60_000


@pytest.mark.parametrize("text", ["987654h", "987654hour", "987654hours", "987654 h"])
def test_hours(text: str) -> None:
    assert ms(text) == 987654 * 3_600_000


@pytest.mark.parametrize("text", ["987654d", "987654day", "987654days", "987654 d"])
def test_days(text: str) -> None:
    assert ms(text) == 987654 * 86_400_000


def test_upper_case() -> None:  # TimeUtilsTest#testParseDurationUpperCase
    assert ms("1 MICRO") == 0
    assert ms("1000 MICRO") == 1
    assert ms("1 MS") == 1
    assert ms("1 S") == 1000
    assert ms("1 MIN") == 60_000
    assert ms("1 H") == 3_600_000
    assert ms("1 D") == 86_400_000


def test_trim() -> None:  # TimeUtilsTest#testParseDurationTrim
    assert ms("      155      ") == 155
    assert ms("      155      ms   ") == 155


def test_design_examples() -> None:
    assert [ms(t) for t in ("10 ms", "10ms", "20 s", "1 min", "2 h", "1 d")] == [
        10,
        10,
        20_000,
        60_000,
        7_200_000,
        86_400_000,
    ]


# --- TimeUtilsTest#testParseDurationInvalid / testParseDurationNumberOverflow, plus ours ------------------------


@pytest.mark.parametrize(
    "text",
    [
        "",  # empty
        "     ",  # blank
        "foobar or fubar or foo bazz",  # no number
        "16 gjah",  # wrong unit
        "16 16 17 18 ms",  # multiple numbers
        "-100 ms",  # negative number
        "-1 s",
        "+1 s",
        "10 ss",
        "1.5 s",
        "s",
        "100000000000000000000000000000000 ms",  # numeric overflow
        "106751991167301 d",  # more than 2^63-1 ms
    ],
)
def test_invalid_names_key_value_and_fix(text: str) -> None:
    with pytest.raises(OptionError) as info:
        ms(text)
    message = str(info.value)
    assert message.startswith(f"{KEY}: ")
    assert repr(text) in message
    assert "e.g." in message
    assert "\n" not in message


def test_non_string_is_refused() -> None:
    with pytest.raises(OptionError, match=KEY):
        parse_duration_ms(10, KEY)  # type: ignore[arg-type]


def test_largest_long() -> None:
    assert ms(f"{JAVA_LONG_MAX}") == JAVA_LONG_MAX
    assert ms(f"{JAVA_LONG_MAX} ns") == JAVA_LONG_MAX // 10**6


@pytest.mark.parametrize(
    ("millis", "text"),
    [(0, "0 ms"), (1, "1 ms"), (1500, "1500 ms"), (60_000, "1 min"), (3_601_000, "3601 s"), (86_400_000, "1 d")],
)
def test_format_uses_highest_exact_unit(millis: int, text: str) -> None:  # ~TimeUtils.formatWithHighestUnit
    assert format_duration_ms(millis) == text


@given(st.integers(min_value=0, max_value=JAVA_LONG_MAX))
def test_format_parse_round_trip(millis: int) -> None:
    assert ms(format_duration_ms(millis)) == millis


@given(st.integers(min_value=0, max_value=10**12), st.sampled_from(["", " "]))
def test_seconds_are_thousand_millis(n: int, blank: str) -> None:
    assert ms(f"{n}{blank}s") == 1000 * ms(f"{n}{blank}ms")

"""Option values as Flink reads them: durations (``TimeUtils.parseDuration``) and numbers, each refused with a
one-line :class:`OptionError` naming the key, the value and the fix.

Durations, rule (as Flink): after trimming, a duration is a run of ASCII digits, optional blanks, then an optional unit
label, case-insensitive.  No label means milliseconds (``"1000"`` is one second).  Labels:

=============  ===========================================================
days           ``d``, ``day``, ``days``
hours          ``h``, ``hour``, ``hours``
minutes        ``min``, ``m``, ``minute``, ``minutes``
seconds        ``s``, ``sec``, ``secs``, ``second``, ``seconds``
milliseconds   ``ms``, ``milli``, ``millis``, ``millisecond``, ``milliseconds``
microseconds   ``µs``, ``us``, ``micro``, ``micros``, ``microsecond``, ``microseconds``
nanoseconds    ``ns``, ``nano``, ``nanos``, ``nanosecond``, ``nanoseconds``
=============  ===========================================================

``us`` (ASCII for ``µs``) is the only label Flink lacks.  The result is truncated to whole milliseconds, as
``java.time.Duration.toMillis()`` does (``1500 us`` is 1 ms).  Signs, fractions, several numbers, unknown units
and values that do not fit a Java ``long`` are refused with a one-line :class:`OptionError` that names the key.
"""

from __future__ import annotations

import math
import re
from datetime import timedelta
from typing import NoReturn

from airflow_region_failover.graph.errors import OptionError

JAVA_INT_MAX = 2**31 - 1
"""``Integer.MAX_VALUE``: Flink's integer options are Java ``int`` (and its \"infinite\" attempts)."""
JAVA_LONG_MAX = 2**63 - 1
"""Largest Java ``long``: Flink's durations and timestamps are ``long`` milliseconds."""
_INT = re.compile(r"[+-]?[0-9]+\Z")
_FLOAT = re.compile(r"[+-]?(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][+-]?[0-9]+)?\Z")

_UNIT_LABELS: tuple[tuple[int, tuple[str, ...]], ...] = (
    (86_400 * 10**9, ("d", "day", "days")),
    (3_600 * 10**9, ("h", "hour", "hours")),
    (60 * 10**9, ("min", "m", "minute", "minutes")),
    (10**9, ("s", "sec", "secs", "second", "seconds")),
    (10**6, ("ms", "milli", "millis", "millisecond", "milliseconds")),
    (10**3, ("µs", "\u03bcs", "us", "micro", "micros", "microsecond", "microseconds")),
    (1, ("ns", "nano", "nanos", "nanosecond", "nanoseconds")),
)
_NANOS_PER_UNIT: dict[str, int] = {label: nanos for nanos, labels in _UNIT_LABELS for label in labels}

_HINT = "write a whole number and a unit, e.g. '500 ms', '10 s', '1 min', '2 h', '1 d' (a bare number is ms)"
_DIGITS = frozenset("0123456789")

# Units used to print a duration back, largest first (Flink's formatWithHighestUnit, at ms resolution).
_FORMAT_UNITS: tuple[tuple[int, str], ...] = (
    (86_400_000, "d"),
    (3_600_000, "h"),
    (60_000, "min"),
    (1_000, "s"),
    (1, "ms"),
)


def parse_duration_ms(value: str, key: str) -> int:
    """Parse a Flink duration such as ``"10 s"``, ``"10s"``, ``"1 min"`` or ``"250"`` into milliseconds.

    ``key`` is the option the value came from; every error names it, the value and the fix on one line.
    """
    if not isinstance(value, str):
        raise OptionError(f"{key}: {value!r} is not a duration; {_HINT}")
    text = value.strip()
    if not text:
        raise OptionError(f"{key}: {value!r} is an empty duration; {_HINT}")
    number, label = _split_number(text)
    if not number:
        reason = "durations cannot be negative" if text[0] in "+-" else "it does not start with a number"
        raise OptionError(f"{key}: {value!r} is not a duration ({reason}); {_HINT}")
    return _to_millis(int(number), label, value, key)


def format_duration_ms(millis: int) -> str:
    """Print ``millis`` in the largest unit that loses no precision (``60000`` → ``"1 min"``, ``0`` → ``"0 ms"``).

    :func:`parse_duration_ms` reads the result back to the same number.
    """
    if millis == 0:
        return "0 ms"
    for size, label in _FORMAT_UNITS:
        if millis % size == 0:
            return f"{millis // size} {label}"
    raise AssertionError("unreachable: every integer is a whole number of ms")


def _split_number(text: str) -> tuple[str, str]:
    """Split ``text`` into its leading ASCII digits and the trimmed, lower-cased rest (Flink's unit label)."""
    pos = 0
    while pos < len(text) and text[pos] in _DIGITS:
        pos += 1
    return text[:pos], text[pos:].strip().lower()


def _to_millis(amount: int, label: str, value: str, key: str) -> int:
    """Convert ``amount`` of unit ``label`` to whole milliseconds, refusing unknown units and overflow."""
    if amount > JAVA_LONG_MAX:
        raise OptionError(f"{key}: {value!r} does not fit a 64-bit number; {_HINT}")
    if not label:
        return amount
    nanos_per_unit = _NANOS_PER_UNIT.get(label)
    if nanos_per_unit is None:
        raise OptionError(
            f"{key}: {value!r} has an unknown time unit {label!r}; {_HINT}; units: "
            "ns, us/µs, ms, s, min/m, h, d (and their long forms like 'millis', 'seconds', 'minutes')"
        )
    millis = amount * nanos_per_unit // 10**6
    if millis > JAVA_LONG_MAX:
        raise OptionError(f"{key}: {value!r} is too long (more than 2^63-1 ms); {_HINT}")
    return millis


# -- values of any option: a duration given as text, ms or timedelta; whole and decimal numbers -----------------


def parse_duration_value(value: object, key: str) -> int:
    """A duration option in ms: a Flink duration string, an ``int`` (ms) or a :class:`~datetime.timedelta`."""
    if isinstance(value, str):
        return parse_duration_ms(value, key)
    if isinstance(value, timedelta):
        if value < timedelta(0):
            fail(key, value, "a duration >= 0, e.g. '10 s'")
        return value // timedelta(milliseconds=1)
    if isinstance(value, int) and not isinstance(value, bool):
        if value < 0:
            fail(key, value, "a duration >= 0, e.g. '10 s'")
        return value
    return fail(key, value, "a duration such as '500 ms', '10 s', '1 min'")


def parse_int(value: object, key: str) -> int:
    """A whole number that fits Flink's ``Integer`` (range checks are the caller's)."""
    if isinstance(value, int) and not isinstance(value, bool):
        number = value
    elif isinstance(value, str) and _INT.match(value.strip()):
        number = int(value.strip())
    else:
        return fail(key, value, "a whole number, e.g. '3'")
    if not -(2**31) <= number <= JAVA_INT_MAX:
        raise OptionError(f"{key}: {value!r} does not fit a 32-bit integer; use at most {JAVA_INT_MAX}")
    return number


def parse_float(value: object, key: str) -> float:
    """A finite decimal number such as ``1.5`` or ``2e0``."""
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        number = float(value)
    elif isinstance(value, str) and _FLOAT.match(value.strip()):
        number = float(value.strip())
    else:
        return fail(key, value, "a decimal number, e.g. '0.1' or '1.5'")
    if not math.isfinite(number):
        fail(key, value, "a finite decimal number, e.g. '0.1' or '1.5'")
    return number


def check_int(key: str, value: object, minimum: int, fix: str) -> None:
    """Refuse a non-``int`` or an ``int`` below ``minimum``, naming ``key``."""
    if not isinstance(value, int) or isinstance(value, bool) or value < minimum:
        fail(key, value, fix)


def check_float(key: str, value: object, fix: str) -> None:
    """Refuse anything but a finite ``int``/``float``, naming ``key``."""
    if not isinstance(value, (int, float)) or isinstance(value, bool) or not math.isfinite(value):
        fail(key, value, fix)


def check_duration(key: str, value: object, minimum_ms: int) -> None:
    """Refuse a duration (ms) that is not an ``int`` or is below ``minimum_ms``, naming ``key``."""
    if not isinstance(value, int) or isinstance(value, bool) or value < minimum_ms:
        shown = format_duration_ms(value) if isinstance(value, int) and value >= 0 else repr(value)
        raise OptionError(
            f"{key}: {shown} is not allowed; use a duration of at least {format_duration_ms(minimum_ms)}, e.g. '10 s'"
        )


def fail(key: str, value: object, fix: str) -> NoReturn:
    """Raise the one-line :class:`OptionError` ``"<key>: <value> is not valid; use <fix>"``."""
    raise OptionError(f"{key}: {value!r} is not valid; use {fix}")

"""Flink's duration syntax (``org.apache.flink.util.TimeUtils.parseDuration``), in integer milliseconds.

Rule (as Flink): after trimming, a duration is a run of ASCII digits, optional blanks, then an optional unit
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

from airflow_region_failover.graph.errors import OptionError

JAVA_LONG_MAX = 2**63 - 1
"""Largest Java ``long``: Flink's durations and timestamps are ``long`` milliseconds."""

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

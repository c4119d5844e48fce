"""Reading the ``[region_failover]`` section of airflow.cfg (declared with defaults in :mod:`.provider_info`).

Rule: every reader falls back to the given default outside Airflow (the pure CLI, tests without Airflow), and a
malformed value that the provider cannot use raises :class:`OptionError` naming the option — except in the
failover loop's own tuning values (:func:`float_value`), which fall back rather than stop the listener.
"""

from __future__ import annotations

import json
from typing import Any

from airflow_region_failover.graph.errors import OptionError

SECTION = "region_failover"


def value(key: str, fallback: str) -> str:
    """``[region_failover] key`` (``fallback`` outside Airflow or when unset)."""
    try:
        from airflow.configuration import conf
    except ImportError:  # pragma: no cover - outside Airflow
        return fallback
    return str(conf.get(SECTION, key, fallback=fallback))


def float_value(key: str, fallback: float) -> float:
    """``[region_failover] key`` as a number; ``fallback`` when it is unset, unreadable or not a number."""
    try:
        return float(value(key, str(fallback)))
    except Exception:
        return fallback


def json_object(key: str, what: str) -> dict[str, Any]:
    """``[region_failover] key`` as a JSON object (empty when unset); :class:`OptionError` naming it otherwise."""
    raw = value(key, "{}") or "{}"
    try:
        parsed = json.loads(raw)
    except json.JSONDecodeError:
        parsed = None
    if not isinstance(parsed, dict):
        raise OptionError(f"[{SECTION}] {key} {raw!r} must be a JSON object of {what}")
    return parsed

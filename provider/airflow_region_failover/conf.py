"""What the deployment configured: the ``[region_failover]`` section of airflow.cfg (declared with defaults in
:mod:`.provider_info`) and Airflow connections.

Rules: every reader falls back to the given default outside Airflow (the pure CLI, tests without Airflow), and a
malformed value that the provider cannot use raises :class:`OptionError` naming the option — except the failover
loop's own tuning values (:func:`float_value`), which fall back rather than stop the listener. Connections are
looked up one way everywhere (:func:`connection`): the Task SDK's ``BaseHook.get_connection``, which reads the
secrets backends of the process it runs in (the supervisor in a worker, the metadata DB in the scheduler and the
API server), so secrets never live in this provider's own configuration.
"""

from __future__ import annotations

import json
from typing import Any

from airflow_region_failover.exceptions import OptionError
from airflow_region_failover.failover.backoff import RESTART_STRATEGY_TYPE_KEY
from airflow_region_failover.failover.options import FAILOVER_STRATEGY_KEY

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


def option_text(key: object, option: object) -> str:
    """An option value as Flink writes it: ints, floats, bools and timedeltas are converted; anything else is an
    error naming the key."""
    from datetime import timedelta

    if isinstance(option, bool):
        return "true" if option else "false"
    if isinstance(option, (str, int, float)):
        return str(option)
    if isinstance(option, timedelta):
        return f"{int(option / timedelta(milliseconds=1))} ms"
    raise OptionError(f"option {key!r}: value {option!r} must be a string such as '3' or '10 s'")


def restart_defaults() -> dict[str, str]:
    """The ``[region_failover]`` failover/restart defaults as Flink keys (:class:`OptionError` naming a bad one)."""
    extra = json_object("restart_strategy_options", "Flink keys")
    options = {str(k): option_text(k, v) for k, v in extra.items()}
    options[FAILOVER_STRATEGY_KEY] = value("failover_strategy", "region")
    options[RESTART_STRATEGY_TYPE_KEY] = value("restart_strategy", "fixed-delay")
    return options


def connection(conn_id: str) -> Any:
    """The Airflow connection ``conn_id``, from the secrets backends of this process (see the module rule)."""
    from airflow.sdk import BaseHook

    return BaseHook.get_connection(conn_id)

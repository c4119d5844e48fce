"""What the deployment configured: the ``[region_failover]`` section of airflow.cfg and Airflow connections.

Rules (the openlineage provider's ``conf.py`` is the model):

- **One getter per option**, named as the option, typed: the only place that reads ``[region_failover]``. Its
  default is the one declared in :data:`~airflow_region_failover.provider_info.CONFIG_OPTIONS` (what ``airflow
  config list`` shows); it applies when the option is unset, and outside Airflow (the pure CLI, tests without
  Airflow). ``tests/unit/test_conf.py`` checks that every declared option has its getter, that every getter is
  used, and that no module reads the section past them.
- **A bad value** is an :class:`OptionError` naming the option (``[region_failover] key``), its value and the fix —
  except the failover loop's own timing (:func:`watch_interval`, :func:`watch_lookback`, :func:`max_start_delay`)
  and :func:`enabled`, read in the scheduler where a plugin must never stop it: those log that same one-line error
  as a warning and use the declared default.
- **Connections** are looked up one way everywhere (:func:`connection`): the Task SDK's
  ``BaseHook.get_connection``, which reads the secrets backends of the process it runs in (the supervisor in a
  worker, the metadata DB in the scheduler and the API server), so secrets never live in this configuration.
"""

from __future__ import annotations

import json
import logging
import math
from collections.abc import Callable
from typing import Any, TypeVar

from airflow_region_failover.exceptions import OptionError
from airflow_region_failover.failover.backoff import RESTART_STRATEGY_TYPE_KEY, TYPE_HINT, parse_type
from airflow_region_failover.failover.error_class import (
    NAMES_HINT,
    NON_RECOVERABLE_ERRORS_KEY,
    format_error_names,
    parse_error_names,
)
from airflow_region_failover.failover.options import FAILOVER_STRATEGY_KEY, FailoverStrategy
from airflow_region_failover.provider_info import CONFIG_OPTIONS, CONFIG_SECTION

SECTION = CONFIG_SECTION
SPARK_IO_MODES = ("executors", "driver")
JVM_IO_MODES = ("auto", "cluster", "off")
"""The values of ``store_jvm_io`` (:class:`~airflow_region_failover.store.dataplane.s3a.Mode`)."""
log = logging.getLogger(__name__)
_Number = TypeVar("_Number", int, float)


def declared_default(key: str) -> str:
    """The default :data:`CONFIG_OPTIONS` declares for ``key`` (``KeyError``: not an option of the provider)."""
    return CONFIG_OPTIONS[key].default


def _text(key: str) -> str:
    """``[region_failover] key`` as text: airflow.cfg or ``AIRFLOW__REGION_FAILOVER__KEY``, else its declared
    default (also outside Airflow)."""
    default = declared_default(key)
    try:
        from airflow.configuration import conf  # deferred: the pure CLI runs without Airflow
    except ImportError:  # pragma: no cover - outside Airflow
        return default
    return str(conf.get(SECTION, key, fallback=default))


def _bad(key: str, raw: str, fix: str) -> OptionError:
    return OptionError(f"[{SECTION}] {key} = {raw!r}: {fix} (AIRFLOW__{SECTION.upper()}__{key.upper()})")


def _optional(key: str) -> str | None:
    return _text(key).strip() or None


def _seconds(key: str, *, zero: bool = False) -> float:
    """A number of seconds (> 0, or >= 0 with ``zero``); anything else: a warning and the declared default."""
    raw = _text(key)
    try:
        value = float(raw)
    except ValueError:
        value = math.nan
    if math.isfinite(value) and (value > 0 or (zero and value == 0)):
        return value
    error = _bad(key, raw, f"use a number of seconds {'>=' if zero else '>'} 0")
    log.warning("region failover: %s; using the default %s", error, declared_default(key))
    return float(declared_default(key))


def _limit(key: str, parse: Callable[[str], _Number], fix: str) -> _Number | None:
    """An optional limit: empty is ``None`` (no limit); else ``parse`` of it, a finite number >= 0, or
    :class:`OptionError` with ``fix`` (nan compares false with everything: refused, not kept by accident)."""
    raw = _text(key)
    if not raw.strip():
        return None
    try:
        value: _Number | None = parse(raw)
    except ValueError:
        value = None
    if value is None or not (value >= 0 and value != math.inf):  # no float(): a huge whole number is fine
        raise _bad(key, raw, fix)
    return value


def _json_object(key: str, what: str) -> dict[str, Any]:
    raw = _text(key)
    try:
        parsed = json.loads(raw.strip() or "{}")
    except json.JSONDecodeError:
        parsed = None
    if not isinstance(parsed, dict):
        raise _bad(key, raw, f"use a JSON object of {what}")
    return parsed


# -- the failover loop ----------------------------------------------------------------------------------------
def enabled() -> bool:
    """``[region_failover] enabled``: whether the failover loop acts (a bad value: warning, default)."""
    raw = _text("enabled")
    value = raw.strip().lower()
    if value in {"true", "t", "1"}:
        return True
    if value in {"false", "f", "0"}:
        return False
    log.warning("region failover: %s; using the default %s", _bad("enabled", raw, "use True or False"),
                declared_default("enabled"))
    return declared_default("enabled") == "True"


def api_conn_id() -> str:
    """``[region_failover] api_conn_id``: the connection through which the failover loop clears tasks."""
    conn_id = _optional("api_conn_id")
    if conn_id is None:
        raise _bad("api_conn_id", "", "name the http connection of the Airflow API")
    return conn_id


def watch_interval() -> float:
    """``[region_failover] watch_interval``: seconds between two watcher passes (> 0)."""
    return _seconds("watch_interval")


def watch_lookback() -> float:
    """``[region_failover] watch_lookback``: seconds of history the watcher re-reads (> 0)."""
    return _seconds("watch_lookback")


def max_start_delay() -> float:
    """``[region_failover] max_start_delay``: the most seconds a restarted task waits for its restart time (>= 0)."""
    return _seconds("max_start_delay", zero=True)


def failover_strategy() -> str:
    """``[region_failover] failover_strategy``: ``region`` or ``full``."""
    raw = _text("failover_strategy")
    return FailoverStrategy.parse(raw, key=f"[{SECTION}] failover_strategy").value


def restart_strategy() -> str:
    """``[region_failover] restart_strategy``: a restart-strategy type name (Flink's, any alias)."""
    raw = _text("restart_strategy")
    try:
        parse_type(raw)
    except OptionError:
        raise _bad("restart_strategy", raw, TYPE_HINT) from None
    return raw.strip()


def restart_strategy_options() -> dict[str, str]:
    """``[region_failover] restart_strategy_options``: further Flink keys -> values (as Flink writes them)."""
    return {str(k): option_text(k, v) for k, v in _json_object("restart_strategy_options", "Flink keys").items()}


def non_recoverable_errors() -> tuple[str, ...]:
    """``[region_failover] non_recoverable_errors``: exception class names whose failures are not restarted."""
    raw = _text("non_recoverable_errors")
    try:
        return parse_error_names(raw, f"[{SECTION}] non_recoverable_errors")
    except OptionError:
        raise _bad("non_recoverable_errors", raw, f"use {NAMES_HINT}, or leave it empty (none)") from None


def restart_defaults() -> dict[str, str]:
    """The deployment's failover/restart defaults as Flink keys: :func:`restart_strategy_options` with
    :func:`failover_strategy`, :func:`restart_strategy` and :func:`non_recoverable_errors` over them."""
    options = restart_strategy_options()
    options[FAILOVER_STRATEGY_KEY] = failover_strategy()
    options[RESTART_STRATEGY_TYPE_KEY] = restart_strategy()
    options.setdefault(NON_RECOVERABLE_ERRORS_KEY, format_error_names(non_recoverable_errors()))
    return options


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


# -- the result store -----------------------------------------------------------------------------------------
def store_bucket() -> str:
    """``[region_failover] store_bucket`` (required: declared without a default)."""
    bucket = _optional("store_bucket")
    if bucket is None:
        raise _bad("store_bucket", _text("store_bucket"), "set the S3 bucket of the result store")
    return bucket


def store_prefix() -> str:
    """``[region_failover] store_prefix``: the result store's key prefix inside the bucket."""
    return _text("store_prefix").strip()


def store_aws_conn_id() -> str:
    """``[region_failover] store_aws_conn_id``: the ``aws`` connection of the result store."""
    conn_id = _optional("store_aws_conn_id")
    if conn_id is None:
        raise _bad("store_aws_conn_id", "", "name the aws connection of the result store")
    return conn_id


def _choice(key: str, choices: tuple[str, ...]) -> str:
    """One of ``choices``; anything else: :class:`OptionError` naming them."""
    raw = _text(key)
    if raw.strip() not in choices:
        raise _bad(key, raw, f"set it to {' or '.join(repr(c) for c in choices)}")
    return raw.strip()


def store_spark_io() -> str:
    """``[region_failover] store_spark_io``: ``executors`` or ``driver``."""
    return _choice("store_spark_io", SPARK_IO_MODES)


def store_jvm_io() -> str:
    """``[region_failover] store_jvm_io``: ``auto``, ``cluster`` or ``off`` (:class:`.store.dataplane.s3a.Mode`)."""
    return _choice("store_jvm_io", JVM_IO_MODES)


def store_verify_jvm_reads() -> bool:
    """``[region_failover] store_verify_jvm_reads``: whether what Spark's own reader reads is hashed too (True or
    False; anything else: :class:`OptionError` naming the option)."""
    raw = _text("store_verify_jvm_reads")
    value = raw.strip().lower()
    if value not in {"true", "false"}:
        raise _bad("store_verify_jvm_reads", raw, "set it to True or False")
    return value == "true"


def store_keep_last_runs() -> int | None:
    """``[region_failover] store_keep_last_runs``: runs kept per DAG (``None``: no limit)."""
    return _limit("store_keep_last_runs", int, "use a whole number of runs >= 0, or leave it empty (no limit)")


def store_keep_days() -> float | None:
    """``[region_failover] store_keep_days``: days a finished run's results are kept (``None``: no limit)."""
    return _limit("store_keep_days", float, "use a number of days >= 0, or leave it empty (no limit)")


def store_min_grace_seconds() -> float:
    """``[region_failover] store_min_grace_seconds``: the grace floor ``G0`` of every sweeper of the store, which
    every writer relies on (:mod:`.store.content`); a finite number of seconds > 0, else :class:`OptionError`."""
    raw = _text("store_min_grace_seconds")
    try:
        value = float(raw)
    except ValueError:
        value = math.nan
    if not (math.isfinite(value) and value > 0):
        default = declared_default("store_min_grace_seconds")
        raise _bad("store_min_grace_seconds", raw, f"use a number of seconds > 0 (default {default}: "
                   f"{float(default) / 60:g} min)")
    return value


def publish_root() -> str | None:
    """``[region_failover] publish_root``: where published Delta tables go (``None``: under the store)."""
    return _optional("publish_root")


# -- Spark ------------------------------------------------------------------------------------------------------
def spark_conn_id() -> str | None:
    """``[region_failover] spark_conn_id``: the default Spark connection of steps (``None``: embedded Spark)."""
    return _optional("spark_conn_id")


def spark_submit_conn_id() -> str | None:
    """``[region_failover] spark_submit_conn_id``: the default ``spark`` connection of script steps."""
    return _optional("spark_submit_conn_id")


def spark_master() -> str:
    """``[region_failover] spark_master``: the master URL of embedded Spark (empty: the declared default)."""
    return _optional("spark_master") or declared_default("spark_master")


def spark_conf() -> dict[str, str]:
    """``[region_failover] spark_conf``: extra Spark configuration, key -> value."""
    return {str(k): str(v) for k, v in _json_object("spark_conf", "Spark options").items()}


def connection(conn_id: str) -> Any:
    """The Airflow connection ``conn_id``, from the secrets backends of this process (see the module rule)."""
    from airflow.sdk import BaseHook  # deferred: only adapters that run inside Airflow look connections up

    return BaseHook.get_connection(conn_id)

"""Configuration a command needs, checked before Airflow is imported (importing it takes seconds).

Rule: an option is *set* when ``AIRFLOW__REGION_FAILOVER__<KEY>`` (or its ``_CMD`` / ``_SECRET`` form) is in the
environment, or ``[region_failover]`` of the ``airflow.cfg`` Airflow reads (``$AIRFLOW_CONFIG``, else
``$AIRFLOW_HOME/airflow.cfg``, ``AIRFLOW_HOME`` defaulting to ``~/airflow``) has ``<key>``, ``<key>_cmd`` or
``<key>_secret``. A required option set nowhere is an :class:`~airflow_region_failover.exceptions.OptionError`
naming it and its environment variable, the same line Airflow's own read of it gives; anything set is left for
Airflow to read (and judge).
"""

from __future__ import annotations

import configparser
import os
from pathlib import Path

from airflow_region_failover.exceptions import OptionError
from airflow_region_failover.provider_info import CONFIG_SECTION

REQUIRED = {"store_bucket": "set the S3 bucket of the result store"}
"""Options without a default that the store commands need, and the fix."""


def airflow_cfg() -> Path:
    """The ``airflow.cfg`` Airflow reads."""
    if os.environ.get("AIRFLOW_CONFIG"):
        return Path(os.environ["AIRFLOW_CONFIG"]).expanduser()
    return Path(os.environ.get("AIRFLOW_HOME") or "~/airflow").expanduser() / "airflow.cfg"


def is_set(key: str) -> bool:
    """Whether ``[region_failover] key`` is set in the environment or ``airflow.cfg`` (module rule)."""
    variable = f"AIRFLOW__{CONFIG_SECTION.upper()}__{key.upper()}"
    if any(os.environ.get(variable + suffix) for suffix in ("", "_CMD", "_SECRET")):
        return True
    parser = configparser.ConfigParser(interpolation=None, strict=False)
    try:
        parser.read(airflow_cfg(), encoding="utf-8")
    except (OSError, configparser.Error):
        return True  # a file we cannot parse: Airflow reads it and says what is wrong
    if not parser.has_section(CONFIG_SECTION):
        return False
    return any(parser.get(CONFIG_SECTION, key + suffix, fallback="").strip() for suffix in ("", "_cmd", "_secret"))


def require_store() -> None:
    """:class:`OptionError` for the first option of :data:`REQUIRED` that is set nowhere."""
    for key, fix in REQUIRED.items():
        if not is_set(key):
            variable = f"AIRFLOW__{CONFIG_SECTION.upper()}__{key.upper()}"
            raise OptionError(f"[{CONFIG_SECTION}] {key} = '': {fix} ({variable})")

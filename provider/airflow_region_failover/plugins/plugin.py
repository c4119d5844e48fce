"""The Airflow plugin: the failover listener (worker + scheduler), the history view, and nothing else.

Rules (modelled on the openlineage provider's plugin): registered through the ``airflow.plugins`` entry point;
importing it is cheap and never fails the component that loads it — the listener and the views are imported
inside a guard, so if one cannot be built the plugin logs why and registers nothing of it.
``[region_failover] enabled = False`` turns the failover loop off.
"""

from __future__ import annotations

import logging
from typing import Any

from airflow.plugins_manager import AirflowPlugin

log = logging.getLogger(__name__)


def _listeners() -> list[Any]:
    try:
        from airflow_region_failover import conf  # deferred: a failure is logged

        if not conf.enabled():  # [region_failover] enabled = False: the listener is not even imported
            return []
        from airflow_region_failover.plugins.listener import FailoverListener  # deferred: a failure is logged

        return [FailoverListener()]
    except Exception:
        log.exception("region failover: listener not registered")
        return []


def _fastapi_apps() -> list[dict[str, Any]]:
    try:
        from airflow_region_failover.plugins.views import URL_PREFIX, create_app  # deferred: a failure is logged

        return [{"app": create_app(), "url_prefix": URL_PREFIX, "name": "Region failover views"}]
    except Exception:
        log.exception("region failover: views not registered")
        return []


def _base_path() -> str:
    """The path of ``[api] base_url`` (``/airflow`` behind a proxy serving Airflow there; empty by default): the
    views' links are relative to the host, so they must carry it."""
    try:
        from urllib.parse import urlsplit

        from airflow.configuration import conf

        return urlsplit(conf.get("api", "base_url", fallback="") or "").path.rstrip("/")
    except Exception:
        return ""


def _external_views() -> list[dict[str, Any]]:
    """The "Failover" tab of every DAG run and the "Failover dry run" tab of every DAG (plugins/views.py)."""
    base = _base_path()
    return [
        {
            "name": "Failover",
            "href": base + "/region-failover/run/{DAG_ID}/{RUN_ID}",
            "destination": "dag_run",
            "url_route": "region_failover",
        },
        {
            "name": "Failover dry run",
            "href": base + "/region-failover/plan/{DAG_ID}",
            "destination": "dag",
            "url_route": "region_failover_dry_run",
        },
    ]


class RegionFailoverPlugin(AirflowPlugin):  # type: ignore[misc]
    """Region failover: failure listeners, a failover view on every DAG run, a dry-run view on every DAG."""

    name = "region_failover"
    listeners = _listeners()
    fastapi_apps = _fastapi_apps()
    external_views = _external_views()

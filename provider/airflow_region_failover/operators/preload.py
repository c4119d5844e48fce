"""The dotted path users write in airflow.cfg, ``[celery] celery_config_options =
airflow_region_failover.operators.preload.CELERY_CONFIG``, kept where it has always been: the preloading itself
lives beside the listener that also uses it (:mod:`airflow_region_failover.plugins.preload`)."""

from __future__ import annotations

from typing import Any

from airflow_region_failover.plugins import preload


def __getattr__(name: str) -> Any:
    """``CELERY_CONFIG``: Airflow's default Celery configuration plus the preloading ``worker_init`` handler, built
    when the Celery executor first reads it (:func:`~airflow_region_failover.plugins.preload.celery_config`)."""
    if name == "CELERY_CONFIG":
        return preload.celery_config()
    raise AttributeError(name)

"""Airflow plugins-folder shim for deployments that mount a plugins folder instead of relying on the
``airflow.plugins`` entry point of the installed provider (e.g. ``docker/compose.yaml``).

Loading both is harmless: Airflow registers a plugin name once and skips the second one.
"""

from airflow_region_failover.plugins.plugin import RegionFailoverPlugin

__all__ = ["RegionFailoverPlugin"]

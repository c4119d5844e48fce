"""A DAG scheduled on the Delta table the e2e variant of the daily job publishes (``tests/e2e/publishing.py``):
Airflow runs it once per asset event, i.e. once per new table version; its task reads the version from the
event's ``extra``.

    [Asset s3://<bucket>/region-failover/tables/rf_e2e_daily_prices] --> read_version
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from airflow.sdk import DAG, task

from airflow_region_failover import published_table

TABLE = "rf_e2e_daily_prices"

with DAG(
    dag_id="rf_e2e_daily_consumer",
    schedule=[published_table(TABLE)],
    start_date=datetime(2026, 1, 1),
    catchup=False,
    tags=["region-failover", "e2e", "delta"],
):

    @task
    def read_version(*, triggering_asset_events: Any = None) -> list[int]:
        """The table versions whose events triggered this run (one per run: one event per new version)."""
        versions = [int(event.extra["version"]) for events in triggering_asset_events.values() for event in events]
        print(f"consumed table versions {versions}")
        return versions

    read_version()

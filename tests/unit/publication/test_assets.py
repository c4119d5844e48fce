"""A published table is an Airflow Asset: the publishing task declares an alias outlet and adds exactly one event
for the table's Asset when its commit made a new table version, none when the run was already published — unless
the version this run committed in an earlier try has no event yet (that try ended before Airflow recorded it).

    report#0 --\\
    report#1 ----> report.publish --(alias region-failover-table:totals)--> Asset(s3://bkt/rf/tables/totals)
"""

from __future__ import annotations

from datetime import datetime, timezone
from types import SimpleNamespace
from typing import Any

import pytest
from airflow.sdk import Asset, AssetAlias
from airflow.sdk.execution_time.context import OutletEventAccessors

from airflow_region_failover import published_table
from airflow_region_failover.exceptions import GraphError
from airflow_region_failover.publication import delta
from airflow_region_failover.publication import operator as publishing
from airflow_region_failover.store.config import StoreConfig
from airflow_region_failover.store.s3.clients import S3Access
from tests.unit.rendering.test_publish_rendering import build

URI = "s3://bkt/rf/tables/totals"
ALIAS = AssetAlias(name="region-failover-table:totals")


def run_publisher(monkeypatch: pytest.MonkeyPatch, committed: bool, run_commit: dict[str, Any] | None = None,
                  announced: tuple[int, ...] = ()) -> tuple[OutletEventAccessors, dict[str, Any]]:
    """Execute the publishing task of :func:`build`'s DAG against a publication that ``committed`` (or not, when
    the table holds ``run_commit`` of this run, or nothing of it), with events already ``announced`` versions."""
    store = SimpleNamespace(config=StoreConfig(bucket="bkt", prefix="rf", access=S3Access()))
    monkeypatch.setattr(publishing, "default_store", lambda: store)
    monkeypatch.delenv("AIRFLOW__REGION_FAILOVER__PUBLISH_ROOT", raising=False)
    outcome = delta.PublishOutcome(URI, committed, 4 if committed else 3, rows=7,
                                   reason="" if committed else "already published")
    monkeypatch.setattr(publishing.tables, "publish", lambda *args, **kwargs: outcome)
    monkeypatch.setattr(publishing.tables, "run_commit", lambda target, dag_id, run_id: run_commit)
    no_consumer_yet(monkeypatch)
    inlet = {ALIAS: [SimpleNamespace(extra={"table": "totals", "version": v}) for v in announced]}
    task = build().get_task("report.publish")
    run = SimpleNamespace(dag_id="publish_test", run_id="scheduled__2026-01-02",
                          logical_date=datetime(2026, 1, 2, tzinfo=timezone.utc), data_interval_end=None,
                          run_after=None)
    events = OutletEventAccessors()
    result = task.execute({"dag_run": run, "outlet_events": events, "inlet_events": inlet})
    return events, result


def no_consumer_yet(monkeypatch: pytest.MonkeyPatch) -> None:
    """The task's supervisor finds no active Asset for any URI (no consumer DAG parsed yet)."""
    from airflow.sdk.exceptions import ErrorType
    from airflow.sdk.execution_time import task_runner
    from airflow.sdk.execution_time.comms import ErrorResponse
    from airflow.sdk.execution_time.context import OutletEventAccessor

    supervisor = SimpleNamespace(send=lambda msg: ErrorResponse(error=ErrorType.ASSET_NOT_FOUND))
    monkeypatch.setattr(task_runner, "SUPERVISOR_COMMS", supervisor, raising=False)
    monkeypatch.setattr(OutletEventAccessor, "_asset_ref_cache", {})


def test_the_publishing_task_declares_its_tables_alias_and_no_plain_asset() -> None:
    task = build().get_task("report.publish")
    assert task.outlets == [ALIAS] and task.inlets == [ALIAS]


def test_a_new_table_version_gets_one_asset_event_naming_the_version(monkeypatch: pytest.MonkeyPatch) -> None:
    events, result = run_publisher(monkeypatch, committed=True)
    (event,) = events[ALIAS].asset_alias_events
    assert event.dest_asset_key.uri == URI and event.dest_asset_key.name == URI
    assert event.extra == {"table": "totals", "version": 4, "mode": "append", "run_key": "2026-01-02T00:00:00Z",
                           "rows": 7}
    assert result["committed"] and result["version"] == 4


def test_a_run_already_published_emits_no_asset_event(monkeypatch: pytest.MonkeyPatch) -> None:
    """A whole-run clear or a restart: this run's version 3 has its event."""
    events, result = run_publisher(monkeypatch, committed=False, run_commit={"version": 3}, announced=(2, 3))
    assert events[ALIAS].asset_alias_events == []
    assert not result["committed"]


def test_a_date_another_run_published_emits_no_asset_event(monkeypatch: pytest.MonkeyPatch) -> None:
    events, _ = run_publisher(monkeypatch, committed=False, run_commit=None)
    assert events[ALIAS].asset_alias_events == []


def test_a_version_committed_by_a_try_that_died_before_success_is_announced_once(
        monkeypatch: pytest.MonkeyPatch) -> None:
    events, _ = run_publisher(monkeypatch, committed=False, run_commit={"version": 3, delta.ROWS_KEY: "7"},
                              announced=(2,))
    (event,) = events[ALIAS].asset_alias_events
    assert event.dest_asset_key.uri == URI and event.extra["version"] == 3 and event.extra["rows"] == 7


def test_published_table_is_the_asset_the_publisher_emits(monkeypatch: pytest.MonkeyPatch, tmp_path: Any) -> None:
    monkeypatch.setenv("AIRFLOW__REGION_FAILOVER__STORE_BUCKET", "bkt")
    monkeypatch.setenv("AIRFLOW__REGION_FAILOVER__STORE_PREFIX", "rf")
    monkeypatch.delenv("AIRFLOW__REGION_FAILOVER__PUBLISH_ROOT", raising=False)
    assert published_table("totals") == Asset(uri=URI)
    monkeypatch.setenv("AIRFLOW__REGION_FAILOVER__PUBLISH_ROOT", str(tmp_path))
    assert published_table("totals") == Asset(uri=(tmp_path / "totals").as_uri())
    with pytest.raises(GraphError, match="'to tals' is not a table name"):
        published_table("to tals")

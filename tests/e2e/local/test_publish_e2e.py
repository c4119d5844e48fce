"""The example daily job (``dags/daily_prices.py``, as ``rf_e2e_daily``) publishing its summary to a Delta table
on the embedded stack: three logical dates -> exactly three table versions, three asset events and three runs of
the DAG scheduled on the table; a cleared run publishes nothing again and emits no event.

    catalog#0 ==+==> summary#0 --> summary.publish --> s3://<bucket>/region-failover/tables/rf_e2e_daily_prices
    catalog#1 ==/                                        (Asset) --> rf_e2e_daily_consumer: read_version
"""

from __future__ import annotations

import re
from typing import Any

import pytest

from airflow_region_failover.publication import delta as tables
from airflow_region_failover.publication.declaration import default_root, table_uri
from airflow_region_failover.publication.operator import asset_uri
from tests.e2e.publishing import CONSUMER_ID, DAG_ID, DATES, FAILING, PREFETCH, TABLE
from tests.e2e.scenarios import _post, _the_decision

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(1500)]


@pytest.mark.prefetch(*PREFETCH)
def test_three_logical_dates_publish_three_versions_and_a_cleared_run_none(e2e: Any) -> None:
    """The three runs (one per logical date, started with the stack) each append one version. In the second,
    summary#0 fails once: region failover restarts it together with its publishing task (left
    ``upstream_failed``), which then publishes once. A person clearing that whole run re-runs its publishing
    task, which finds the date published and adds nothing."""
    runs = {}
    for day in DATES:
        _, run_id, state = e2e.finished(f"daily-{day}")
        assert state == "success", e2e.explain(DAG_ID, run_id)
        runs[day] = run_id
    config = e2e.store.config
    target = tables.target_for(table_uri(default_root(config.bucket, config.prefix), TABLE), config.access)
    history = list(tables.open_table(target).history())
    assert sorted(h["version"] for h in history) == [0, 1, 2], history
    assert sorted(h["region_failover.run_key"] for h in history) == [f"{d}T00:00:00Z" for d in DATES]
    events = one_event_and_one_consumer_run_per_version(e2e, asset_uri(target.uri), history, runs)
    rows = tables.open_table(target).to_pyarrow_table().to_pylist()
    assert sorted({str(r["day"]) for r in rows}) == list(DATES)
    assert len(rows) == 3 * 4 and all(r["products"] == 1_000 for r in rows), rows

    # slowly changing data: a catalog group is repriced every other day, so of the two commits of a group's
    # unchanged content (neighbouring days) the later one uploads nothing; every task log says what it uploaded
    uploads = []
    for run_id in runs.values():
        for task in ("catalog.0", "catalog.1"):
            log = e2e.stack.task_log(DAG_ID, run_id, task, 1)
            found = re.search(r"committed catalog#\d .*uploaded (\d+) of (\d+) bytes", log)
            assert found, log[-3000:]
            uploads.append((int(found.group(1)), int(found.group(2))))
    assert sorted(new == 0 for new, _ in uploads) == [False] * 4 + [True] * 2, uploads
    assert all(new in (0, total) and total > 0 for new, total in uploads), uploads

    middle = runs[FAILING]
    assert sorted(_the_decision(e2e, DAG_ID, middle)["restart"]) == ["summary.0", "summary.publish"]
    assert e2e.tries(DAG_ID, middle)["summary.0"] == 2
    # a person re-runs the whole run: its publishing task runs again and publishes nothing
    before = e2e.tries(DAG_ID, middle)["summary.publish"]
    _post(e2e, f"/dags/{DAG_ID}/dagRuns/{middle}/clear", {"dry_run": False, "only_failed": False})
    e2e.wait_until(lambda: e2e.tries(DAG_ID, middle)["summary.publish"] > before, 300, "the publish task re-ran")
    assert e2e.final_state(DAG_ID, middle) == "success", e2e.explain(DAG_ID, middle)
    log = e2e.stack.task_log(DAG_ID, middle, "summary.publish", e2e.tries(DAG_ID, middle)["summary.publish"])
    assert "not published again" in log and "already published" in log, log[-3000:]
    assert sorted(h["version"] for h in tables.open_table(target).history()) == [0, 1, 2]
    # ...and emits no asset event (registered with the task's success, before the run ends), so no consumer run
    assert asset_events(e2e, asset_uri(target.uri)) == events
    assert len(e2e.api.get(f"/dags/{CONSUMER_ID}/dagRuns")["dag_runs"]) == len(DATES)


def asset_events(e2e: Any, uri: str) -> list[dict[str, Any]]:
    """Every asset event of the table's Asset (the REST API's view), oldest first."""
    (asset,) = [a for a in e2e.api.get("/assets", uri_pattern=TABLE)["assets"] if a["uri"] == uri]
    events = e2e.api.get("/assets/events", asset_id=asset["id"], order_by="timestamp")["asset_events"]
    return [{k: e[k] for k in ("id", "extra", "source_dag_id", "source_run_id", "source_task_id")} for e in events]


def one_event_and_one_consumer_run_per_version(e2e: Any, uri: str, history: list[dict[str, Any]],
                                               runs: dict[str, str]) -> list[dict[str, Any]]:
    """Each table version has exactly one asset event, from the run that published it and naming the version,
    and the consumer DAG ran once per event, each run triggered by that one event and succeeding."""
    events = asset_events(e2e, uri)
    by_version = {e["extra"]["version"]: e for e in events}
    assert len(events) == len(DATES) and sorted(by_version) == [0, 1, 2], events
    for entry in history:
        event = by_version[entry["version"]]
        assert event["source_run_id"] == runs[entry["region_failover.run_key"][:10]], (event, entry)
        assert (event["source_dag_id"], event["source_task_id"]) == (DAG_ID, "summary.publish")
        assert event["extra"]["run_key"] == entry["region_failover.run_key"] and event["extra"]["table"] == TABLE

    def consumer_runs() -> list[dict[str, Any]]:
        return [r for r in e2e.api.get(f"/dags/{CONSUMER_ID}/dagRuns")["dag_runs"] if r["state"] == "success"]

    e2e.wait_until(lambda: len(consumer_runs()) >= len(DATES), 300, "the consumer DAG ran once per version")
    consumed = []
    for run in consumer_runs():
        upstream = e2e.api.get(f"/dags/{CONSUMER_ID}/dagRuns/{run['dag_run_id']}/upstreamAssetEvents")
        consumed.append([e["extra"]["version"] for e in upstream["asset_events"]])
    assert sorted(consumed) == [[0], [1], [2]], consumed
    return events

"""Publishing a committed sink result as a Delta table on a real S3 server (SeaweedFS on loopback), through
delta-rs: exactly once per run, nothing visible from a publisher killed between staging and commit.

    report#0 --\\
                +--> [store: result "report", 2 committed partitions] --publish--> s3://.../tables/<t> (Delta)
    report#1 --/
"""

from __future__ import annotations

import json
import secrets
import signal
import subprocess
import sys
from datetime import datetime, timezone
from typing import Any

import pyarrow as pa
import pytest

from airflow_region_failover.graph.ids import PartitionId
from airflow_region_failover.publication import delta
from airflow_region_failover.publication.declaration import (
    Publication,
    PublishMode,
    RunTimes,
    table_uri,
    transaction_of,
)
from airflow_region_failover.store.keys import AttemptId
from airflow_region_failover.store.result_store import ResultStore

pytestmark = pytest.mark.integration

DAG, RESULT = "daily_prices", "report"
DAY1 = RunTimes(DAG, "scheduled__2026-01-01", datetime(2026, 1, 1, tzinfo=timezone.utc))
DAY2 = RunTimes(DAG, "scheduled__2026-01-02", datetime(2026, 1, 2, tzinfo=timezone.utc))

PUBLISHER = r"""
import json, os, signal, sys
from airflow_region_failover.publication.declaration import Publication, PublishMode, RunTimes
from airflow_region_failover.publication.declaration import transaction_of
from datetime import datetime
from airflow_region_failover.store.result_store import ResultStore
from airflow_region_failover.publication import delta
cfg = json.loads(sys.stdin.readline())
store = ResultStore.from_endpoint(cfg["endpoint"], cfg["access_key"], cfg["secret_key"], cfg["bucket"],
                                  prefix=cfg["prefix"])
if cfg["kill"]:
    def killed(*args, **kwargs):
        print("STAGED", flush=True)
        os.kill(os.getpid(), signal.SIGKILL)  # between staging and commit
    delta.commit = killed
run = RunTimes(cfg["dag"], cfg["run"], datetime.fromisoformat(cfg["day"]))
txn = transaction_of(Publication("report", cfg["table"], PublishMode(cfg["mode"])), run)
target = delta.target_for(cfg["uri"], store.config.access)
outcome = delta.publish(store, cfg["dag"], cfg["run"], "report", 2, target, txn)
print("OUTCOME", json.dumps({"committed": outcome.committed, "version": outcome.version}), flush=True)
"""


@pytest.fixture
def store(s3_server: Any) -> ResultStore:
    return ResultStore.from_endpoint(s3_server.endpoint_url, s3_server.access_key, s3_server.secret_key,
                                     s3_server.bucket, prefix=f"it-{secrets.token_hex(4)}")


def produce(store: ResultStore, run: RunTimes, day: int) -> None:
    """Two committed partitions of the sink result (3 rows each, values depend on the day)."""
    for i in range(2):
        rows = pa.table({"item": [f"i{i}-{k}" for k in range(3)], "price": [day * 10.0 + k for k in range(3)],
                         "at": pa.array([datetime(2026, 1, day)] * 3, pa.timestamp("ns"))})
        store.write_arrow(rows, AttemptId(run.dag_id, run.run_id, PartitionId(RESULT, i), 1))


def target(store: ResultStore, name: str) -> delta.TableTarget:
    root = f"s3://{store.config.bucket}/{store.config.prefix}/tables"
    return delta.target_for(table_uri(root, name), store.config.access)


def publish(store: ResultStore, tgt: delta.TableTarget, run: RunTimes, mode: PublishMode = PublishMode.APPEND,
            table: str = "prices") -> delta.PublishOutcome:
    txn = transaction_of(Publication(RESULT, table, mode), run)
    return delta.publish(store, run.dag_id, run.run_id, RESULT, 2, tgt, txn)


def history(tgt: delta.TableTarget) -> list[dict[str, Any]]:
    return list(delta.open_table(tgt).history())


def table_files(store: ResultStore, name: str) -> set[str]:
    """The names of the data files under the table's location (a raw listing, as a sweeper would see it)."""
    from airflow_region_failover.store.s3.clients import client_for

    pages = client_for(store.config.access).get_paginator("list_objects_v2").paginate(
        Bucket=store.config.bucket, Prefix=f"{store.config.prefix}/tables/{name}/")
    return {o["Key"].rsplit("/", 1)[-1] for page in pages for o in page.get("Contents", [])
            if o["Key"].endswith(".parquet")}


def run_publisher(store: ResultStore, s3: Any, tgt: delta.TableTarget, run: RunTimes, kill: bool) -> str:
    cfg = {"endpoint": s3.endpoint_url, "access_key": s3.access_key, "secret_key": s3.secret_key,
           "bucket": s3.bucket, "prefix": store.config.prefix, "kill": kill, "dag": run.dag_id, "run": run.run_id,
           "day": run.logical_date.isoformat(), "table": "prices", "mode": "append", "uri": tgt.uri}
    proc = subprocess.run([sys.executable, "-c", PUBLISHER], input=json.dumps(cfg) + "\n", capture_output=True,
                          text=True, timeout=300)
    if kill:
        assert proc.returncode == -signal.SIGKILL, proc.stderr[-2000:]
    else:
        assert proc.returncode == 0, proc.stderr[-2000:]
    return proc.stdout


def test_the_same_run_published_twice_is_one_table_version(store: ResultStore) -> None:
    produce(store, DAY1, 1)
    tgt = target(store, "prices")
    first = publish(store, tgt, DAY1)
    again = publish(store, tgt, DAY1)  # a retry, a re-run of the sink, a clear of the whole run
    assert first.committed and first.version == 0 and first.rows == 6 and first.files == 2
    assert not again.committed and "already published" in again.reason
    assert [h["version"] for h in history(tgt)] == [0]
    table = delta.open_table(tgt).to_pyarrow_table()
    assert table.num_rows == 6 and table.schema.field("at").type == pa.timestamp("us", tz="UTC")
    produce(store, DAY2, 2)
    assert publish(store, tgt, DAY2).version == 1
    assert not publish(store, tgt, DAY1).committed  # an older date re-run after a newer one: still published once
    assert [h["version"] for h in history(tgt)] == [1, 0]
    assert history(tgt)[0]["region_failover.run_key"] == "2026-01-02T00:00:00Z"
    day1 = delta.run_commit(tgt, DAG, DAY1.run_id)  # which version a run published (its event's version)
    assert day1 is not None and day1["version"] == 0 and day1[delta.ROWS_KEY] == "6"
    assert delta.run_commit(tgt, DAG, "manual__never") is None
    assert sorted(delta.open_table(tgt).to_pyarrow_table().column("price").to_pylist()) == sorted(
        [10.0, 11.0, 12.0] * 2 + [20.0, 21.0, 22.0] * 2)


def test_a_publisher_killed_between_staging_and_commit_leaves_the_table_unchanged_then_publishes_once(
        store: ResultStore, s3_server: Any) -> None:
    produce(store, DAY1, 1)
    produce(store, DAY2, 2)
    tgt = target(store, "prices")
    assert publish(store, tgt, DAY1).committed
    before = delta.open_table(tgt).to_pyarrow_table()
    out = run_publisher(store, s3_server, tgt, DAY2, kill=True)
    assert "STAGED" in out
    assert len(table_files(store, "prices")) == 4, "two staged files were uploaded"
    assert [h["version"] for h in history(tgt)] == [0], "no version from the killed publisher"
    assert delta.open_table(tgt).to_pyarrow_table().equals(before)
    out = run_publisher(store, s3_server, tgt, DAY2, kill=False)
    assert '"committed": true' in out and '"version": 1' in out
    out = run_publisher(store, s3_server, tgt, DAY2, kill=False)
    assert '"committed": false' in out
    assert [h["version"] for h in history(tgt)] == [1, 0]
    assert delta.open_table(tgt).to_pyarrow_table().num_rows == 12


def test_two_publishers_of_one_run_racing_commit_once(store: ResultStore, monkeypatch: pytest.MonkeyPatch) -> None:
    """Both passed the check before either committed: delta-rs refuses the second commit with the same app id
    (a real conflict), the loser re-reads, finds the run published and deletes its staged files."""
    produce(store, DAY1, 1)
    tgt = target(store, "prices")
    txn = transaction_of(Publication(RESULT, "prices", PublishMode.APPEND), DAY1)
    parts = [store.read_arrow(store.manifest(DAG, DAY1.run_id, PartitionId(RESULT, i))) for i in range(2)]
    older = RunTimes(DAG, "other", datetime(2025, 12, 31))
    produce(store, older, 1)
    assert publish(store, tgt, older).committed  # the table exists
    stale = delta.open_table(tgt)  # the loser's snapshot, read before the winner commits
    winner, loser = delta.stage(tgt, parts), delta.stage(tgt, parts)
    assert delta.commit(tgt, winner, txn, {}).committed
    handles = iter([stale])
    monkeypatch.setattr(delta, "open_table", lambda t: next(handles, None) or delta.deltalake().DeltaTable(
        t.uri, storage_options=dict(t.storage_options)))
    monkeypatch.setattr(delta, "recorded_version", lambda table, app: None if table is stale
                        else table.transaction_version(app))
    outcome = delta.commit(tgt, loser, txn, {})
    assert not outcome.committed and "already published" in outcome.reason
    assert [h["version"] for h in history(tgt)] == [1, 0]
    assert not set(loser.paths) & table_files(store, "prices"), "the loser's staged files are deleted"


def test_overwrite_replaces_with_newer_runs_only(store: ResultStore) -> None:
    produce(store, DAY1, 1)
    produce(store, DAY2, 2)
    tgt = target(store, "latest")
    assert publish(store, tgt, DAY2, PublishMode.OVERWRITE, "latest").committed
    older = publish(store, tgt, DAY1, PublishMode.OVERWRITE, "latest")  # a late backfill of an older date
    assert not older.committed and "superseded" in older.reason
    assert not publish(store, tgt, DAY2, PublishMode.OVERWRITE, "latest").committed
    assert sorted(delta.open_table(tgt).to_pyarrow_table().column("price").to_pylist()) == [20.0, 20.0, 21.0,
                                                                                             21.0, 22.0, 22.0]
    assert [h["version"] for h in history(tgt)] == [0]


def test_append_refuses_other_columns_and_duckdb_reads_the_table(store: ResultStore, tmp_path: Any) -> None:
    produce(store, DAY1, 1)
    local = delta.target_for(table_uri(str(tmp_path), "prices"), None)
    assert publish(store, local, DAY1).committed
    other = RunTimes(DAG, "manual__x", None, None, datetime(2026, 2, 1, tzinfo=timezone.utc))
    store.write_arrow(pa.table({"sku": ["a"]}), AttemptId(DAG, other.run_id, PartitionId(RESULT, 0), 1))
    store.write_arrow(pa.table({"sku": ["b"]}), AttemptId(DAG, other.run_id, PartitionId(RESULT, 1), 1))
    with pytest.raises(delta.PublishError, match="append only adds rows of the same columns"):
        publish(store, local, other)
    duckdb = pytest.importorskip("duckdb")
    dataset = delta.open_table(local).to_pyarrow_dataset()  # noqa: F841 - read by name below
    assert duckdb.sql("SELECT count(*), sum(price) FROM dataset").fetchall() == [(6, 2 * (10 + 11 + 12))]


def test_a_commit_whose_answer_was_lost_keeps_its_files(store: ResultStore, monkeypatch: pytest.MonkeyPatch) -> None:
    """The commit lands but the publisher sees an error: the re-check finds its own commit (by its token) and
    reports it committed — it must not delete the files that version references."""
    produce(store, DAY1, 1)
    produce(store, DAY2, 2)
    tgt = target(store, "prices")
    assert publish(store, tgt, DAY1).committed
    real = delta.deltalake().DeltaTable.create_write_transaction

    def lost(self: Any, *args: Any, **kwargs: Any) -> None:
        real(self, *args, **kwargs)
        raise OSError("connection reset by peer")  # the answer is lost after the log entry was written

    monkeypatch.setattr(delta.deltalake().DeltaTable, "create_write_transaction", lost)
    outcome = publish(store, tgt, DAY2)
    assert outcome.committed and outcome.version == 1
    assert [h["version"] for h in history(tgt)] == [1, 0]
    assert delta.open_table(tgt).to_pyarrow_table().num_rows == 12, "every file of version 1 is still there"

"""A writer that is still working keeps its objects however long it is quiet: a Spark job's tasks announce and
upload their objects when they finish, the driver commits after the *last* one; a straggler (or executors
queued for longer than the grace) left the early objects unannounced for the sweeper, which deleted them, and the
commit failed on every retry — on moto's in-memory S3 with a grace floor of 2 s standing in for 15 min. The floor
lowered as a deployment lowers it (``[region_failover] store_min_grace_seconds``) reaches the writer: its heartbeat
beats every quarter of it, so a sweep at that grace keeps the writer too.

    producer#0 (tasks done, driver waiting for a straggler) ==> r#0      sweeper: every 0.3 s, grace 2 s
"""

from __future__ import annotations

import dataclasses
import time

import pyarrow as pa
import pytest

from airflow_region_failover.graph.ids import PartitionId
from airflow_region_failover.store.config import config_from_airflow
from airflow_region_failover.store.dataplane import parquet
from airflow_region_failover.store.dataplane.types import Target, Written
from airflow_region_failover.store.gc import lifecycle
from airflow_region_failover.store.keys import AttemptId
from airflow_region_failover.store.result_store import ResultStore

GRACE = 2.0
P = PartitionId("r", 0)
TABLE = pa.table({"x": list(range(1_000))})


def write_with_a_straggler(short: ResultStore, monkeypatch: pytest.MonkeyPatch) -> None:
    """Write ``TABLE`` with ``short`` while the last task straggles for 3 graces and gc sweeps at the grace."""
    write = parquet.write_arrow

    def with_a_straggler(table: pa.Table, target: Target) -> Written:
        written = write(table, target)  # the finished tasks' objects, announced
        deadline = time.time() + 3 * GRACE  # the last task is still running: the driver has not committed yet
        while time.time() < deadline:
            short.sweep(GRACE, min_grace_seconds=GRACE)
            time.sleep(0.3)
        return written

    monkeypatch.setattr(parquet, "write_arrow", with_a_straggler)
    short.write_arrow(TABLE, AttemptId("d", "r1", P, 1))
    assert short.read_arrow(short.manifest("d", "r1", P)) == TABLE


def test_a_writer_quiet_for_longer_than_the_grace_keeps_its_objects_until_it_commits(
        store: ResultStore, monkeypatch: pytest.MonkeyPatch) -> None:
    short = ResultStore(dataclasses.replace(store.config, min_grace_seconds=GRACE), client=store.objects.client)
    write_with_a_straggler(short, monkeypatch)


def test_the_floor_lowered_through_the_option_makes_the_writer_beat_faster_than_that_grace(
        store: ResultStore, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AIRFLOW__REGION_FAILOVER__STORE_MIN_GRACE_SECONDS", str(GRACE))
    config = config_from_airflow(bucket=store.config.bucket, prefix=store.config.prefix, access=store.config.access)
    intervals: list[float] = []
    beat = lifecycle.Heartbeat.__init__

    def recorded(self: lifecycle.Heartbeat, *args: object) -> None:
        beat(self, *args)  # type: ignore[arg-type]
        intervals.append(self.interval)

    monkeypatch.setattr(lifecycle.Heartbeat, "__init__", recorded)
    write_with_a_straggler(ResultStore(config, client=store.objects.client), monkeypatch)
    assert config.min_grace_seconds == GRACE and intervals == [lifecycle.HEARTBEAT_SHARE * GRACE]

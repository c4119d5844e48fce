"""A writer that is still working keeps its objects however long it is quiet: a Spark job's tasks announce and
upload their objects when they finish, the driver commits after the *last* one; a straggler (or executors
queued for longer than the grace) left the early objects unannounced for the sweeper, which deleted them, and the
commit failed on every retry — on moto's in-memory S3 with a grace floor of 2 s standing in for 15 min.

    producer#0 (tasks done, driver waiting for a straggler) ==> r#0      sweeper: every 0.3 s, grace 2 s
"""

from __future__ import annotations

import dataclasses
import time

import pyarrow as pa
import pytest

from airflow_region_failover.graph.ids import PartitionId
from airflow_region_failover.store.dataplane import parquet
from airflow_region_failover.store.dataplane.types import Target, Written
from airflow_region_failover.store.keys import AttemptId
from airflow_region_failover.store.result_store import ResultStore

GRACE = 2.0
P = PartitionId("r", 0)
TABLE = pa.table({"x": list(range(1_000))})


def test_a_writer_quiet_for_longer_than_the_grace_keeps_its_objects_until_it_commits(
        store: ResultStore, monkeypatch: pytest.MonkeyPatch) -> None:
    short = ResultStore(dataclasses.replace(store.config, min_grace_seconds=GRACE), client=store.objects.client)
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

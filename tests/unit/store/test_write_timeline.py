"""What a write tells the task's timeline (store/result_store.py, store/dataplane/parquet.py, store/content.py): its
begin, job, commit and discard spans, and what its writers spent — encoding, hashing, uploading, and how many wrote — on
moto's in-memory S3."""

from __future__ import annotations

import pyarrow as pa

from airflow_region_failover import timeline
from airflow_region_failover.graph.ids import PartitionId
from airflow_region_failover.store.keys import AttemptId
from airflow_region_failover.store.result_store import ResultStore


def test_a_write_records_its_phases_and_its_writers_work(store: ResultStore) -> None:
    table = pa.table({"k": list(range(50_000)), "v": [f"row {i}" for i in range(50_000)]})
    with timeline.measured() as clock:
        store.write_arrow(table, AttemptId("etl", "r1", PartitionId("r", 0), 1))
    got = clock.timeline()
    assert [s.name for s in got.spans] == ["begin", "job", "commit", "discard"]
    assert got.work["writers"] == 1.0
    assert got.work["encode"] > 0 and got.work["upload"] > 0 and got.work["hash"] >= 0  # a small body: < 1 ms
    assert got.work["encode"] + got.work["hash"] + got.work["upload"] <= got.total("job") + 0.01


def test_without_a_clock_a_write_records_nothing(store: ResultStore) -> None:
    store.write_arrow(pa.table({"k": [1, 2]}), AttemptId("etl", "r2", PartitionId("r", 0), 1))
    assert timeline.current() is None

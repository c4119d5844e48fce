"""Publishing a sink result (publication/delta.py) on moto's in-memory store and a local Delta table: a sink
partition that cannot be read fails the publication naming it; what a try staged and never committed is
removed by the run's next try; the commit of a run is found however many versions came after it; a corrected
re-run is published again (overwrite) or said to differ (append).

    report#0 --\\
                +--> [store: result "report", 2 committed partitions] --publish--> <tmp>/prices (Delta)
    report#1 --/
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

from airflow_region_failover.exceptions import InputUnavailable
from airflow_region_failover.graph.ids import PartitionId
from airflow_region_failover.publication import delta
from airflow_region_failover.publication.declaration import Publication, PublishMode, RunTimes, transaction_of
from airflow_region_failover.store.keys import AttemptId
from airflow_region_failover.store.result_store import ResultStore
from tests.support.store import moto_store

DAG, RESULT = "daily_prices", "report"
DAY1 = RunTimes(DAG, "scheduled__2026-01-01", datetime(2026, 1, 1, tzinfo=timezone.utc))


def produce(store: ResultStore, run: RunTimes, price: float, attempt: int = 1, partitions: int = 2) -> None:
    for i in range(partitions):
        rows = pa.table({"item": [f"i{i}-{k}" for k in range(3)], "price": [price + k for k in range(3)]})
        store.write_arrow(rows, AttemptId(run.dag_id, run.run_id, PartitionId(RESULT, i), attempt))


def publish(store: ResultStore, target: delta.TableTarget, run: RunTimes,
            mode: PublishMode = PublishMode.APPEND) -> delta.PublishOutcome:
    txn = transaction_of(Publication(RESULT, "prices", mode), run)
    return delta.publish(store, run.dag_id, run.run_id, RESULT, 2, target, txn)


@pytest.fixture
def store() -> Iterator[ResultStore]:
    with moto_store() as on_moto:
        yield on_moto


def data_files(root: Path) -> set[str]:
    return {str(p.relative_to(root)) for p in root.rglob("*.parquet")}


def test_a_sink_partition_that_cannot_be_read_fails_the_publication_naming_it(store: ResultStore,
                                                                             tmp_path: Path) -> None:
    produce(store, DAY1, 10.0, partitions=1)  # report#1 was never committed
    with pytest.raises(InputUnavailable) as caught:
        publish(store, delta.target_for(str(tmp_path / "prices"), None), DAY1)
    assert caught.value.partition == PartitionId(RESULT, 1)


def test_what_a_killed_try_staged_is_removed_by_the_runs_next_try(store: ResultStore, tmp_path: Path,
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    produce(store, DAY1, 10.0)
    target = delta.target_for(str(tmp_path / "prices"), None)
    real = delta.commit

    def killed(*args: Any, **kwargs: Any) -> Any:
        raise KeyboardInterrupt  # the worker dies between staging and commit: nothing is discarded

    monkeypatch.setattr(delta, "commit", killed)
    with pytest.raises(KeyboardInterrupt):
        publish(store, target, DAY1)
    assert len(data_files(tmp_path / "prices")) == 2, "the dead try staged two files"
    monkeypatch.setattr(delta, "commit", real)
    assert publish(store, target, DAY1).committed
    referenced = {str(Path(uri).relative_to(tmp_path / "prices")) for uri in delta.open_table(target).file_uris()}
    assert data_files(tmp_path / "prices") == referenced, "files no version references are left"


def test_the_commit_of_a_run_is_found_past_a_hundred_later_versions(store: ResultStore, tmp_path: Path) -> None:
    produce(store, DAY1, 10.0)
    target = delta.target_for(str(tmp_path / "prices"), None)
    assert publish(store, target, DAY1).version == 0
    for _ in range(101):  # other writers of the table (or a busy daily job)
        delta.deltalake().write_deltalake(target.uri, pa.table({"item": ["x"], "price": [1.0]}), mode="append")
    found = delta.run_commit(target, DAG, DAY1.run_id)
    assert found is not None and found["version"] == 0


def test_a_corrected_rerun_of_an_overwrite_publication_replaces_the_rows(store: ResultStore, tmp_path: Path) -> None:
    produce(store, DAY1, 10.0)
    target = delta.target_for(str(tmp_path / "prices"), None)
    assert publish(store, target, DAY1, PublishMode.OVERWRITE).committed
    produce(store, DAY1, 50.0, attempt=2)  # a person fixed the code and cleared the run: other rows
    again = publish(store, target, DAY1, PublishMode.OVERWRITE)
    prices = sorted(delta.open_table(target).to_pyarrow_table().column("price").to_pylist())
    assert (again.committed, prices) == (True, [50.0, 50.0, 51.0, 51.0, 52.0, 52.0]), again
    assert not publish(store, target, DAY1, PublishMode.OVERWRITE).committed, "the same rows: nothing again"


def test_a_corrected_rerun_of_an_append_publication_is_said_to_differ(store: ResultStore, tmp_path: Path,
                                                                      caplog: pytest.LogCaptureFixture) -> None:
    produce(store, DAY1, 10.0)
    target = delta.target_for(str(tmp_path / "prices"), None)
    assert publish(store, target, DAY1).committed
    produce(store, DAY1, 50.0, attempt=2)
    with caplog.at_level(logging.WARNING):
        again = publish(store, target, DAY1)
    assert not again.committed and "differ" in again.reason, again
    assert any("differ" in r.getMessage() and r.levelno == logging.WARNING for r in caplog.records), caplog.text

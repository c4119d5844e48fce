"""A checkpointed try is a live writer from its first epoch to its last checkpoint: its heartbeat is renewed while
the epochs run and while a checkpoint's state goes up, so a sweep during an epoch (or a checkpoint) quieter than
the grace keeps the objects it announced; and an ordinary write is one while it writes and commits.

    src#0 ==BLOCKING==> count#0      (6 epochs; only the last checkpoints; the grace floor 2 s, a heartbeat every
                                      0.5 s; gc sweeps with a 2 s grace while the writer is quiet for 3 s)
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import boto3
import pyarrow as pa
import pytest
from moto import mock_aws

from airflow_region_failover.checkpoint.plan import Epoch
from airflow_region_failover.checkpoint.storage import CheckpointStorage
from airflow_region_failover.failover.checkpointing import CheckpointConfig
from airflow_region_failover.graph.ids import PartitionId
from airflow_region_failover.store import commit as protocol
from airflow_region_failover.store.config import StoreConfig
from airflow_region_failover.store.keys import AttemptId
from airflow_region_failover.store.result_store import ResultStore
from airflow_region_failover.store.s3.clients import S3Access
from tests.support.checkpointing import commit_input, counting, run_try
from tests.unit.checkpoint.test_runner import DAG, clicks

GRACE = 2.0
ONLY_THE_LAST = CheckpointConfig(interval_ms=3_600_000)


@pytest.fixture
def store() -> Iterator[ResultStore]:
    with mock_aws():
        client = boto3.client("s3", region_name="us-east-1")
        client.create_bucket(Bucket="bkt")
        yield ResultStore(StoreConfig("bkt", "pre", S3Access(), spark_io="driver", min_grace_seconds=GRACE),
                          client=client)


def quiet_then_swept(store: ResultStore) -> int:
    """The writer is quiet for longer than the grace while gc sweeps; returns the shared objects it deleted."""
    time.sleep(1.5 * GRACE)
    return store.sweep(grace_seconds=GRACE, min_grace_seconds=0).shared.deleted


def test_an_epoch_quieter_than_the_grace_keeps_the_objects_of_the_epochs_before_it(store: ResultStore) -> None:
    source = commit_input(store, DAG, "input", clicks())
    swept: list[int] = []

    def slow(rows: pa.Table, state: pa.Table, epoch: Epoch) -> Any:
        if epoch.index == 4:  # epochs 0..3 wrote (and announced) their objects; no checkpoint listed them yet
            swept.append(quiet_then_swept(store))
        return counting(rows, state, epoch)

    result, outcome = run_try(store, source, "r", 1, 6, ONLY_THE_LAST, step=slow)
    assert swept == [0] and [c.epoch for c in outcome.checkpoints] == [5]
    reference, _ = run_try(store, source, "clean", 1, 6, ONLY_THE_LAST)  # after: it would share the objects
    assert result.content_checksum == reference.content_checksum


def test_a_checkpoint_quieter_than_the_grace_keeps_its_state_and_outputs(store: ResultStore,
                                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    """The state runs are stored (announced), then the manifest waits: a slow store, a paused process."""
    source = commit_input(store, DAG, "input", clicks())
    original, swept = CheckpointStorage.commit, []

    def slow_commit(self: CheckpointStorage, manifest: Any) -> Any:
        swept.append(quiet_then_swept(store))
        return original(self, manifest)

    monkeypatch.setattr(CheckpointStorage, "commit", slow_commit)
    _, outcome = run_try(store, source, "r", 1, 6, ONLY_THE_LAST)
    assert swept == [0] and [c.epoch for c in outcome.checkpoints] == [5]


def test_an_ordinary_write_quieter_than_the_grace_before_its_commit_keeps_its_objects(
        store: ResultStore, monkeypatch: pytest.MonkeyPatch) -> None:
    original, swept = protocol.commit, []

    def slow_commit(*args: Any, **kwargs: Any) -> Any:
        swept.append(quiet_then_swept(store))
        return original(*args, **kwargs)

    monkeypatch.setattr(protocol, "commit", slow_commit)
    table = pa.table({"k": list(range(100))})
    manifest, _ = store.write_arrow(table, AttemptId(DAG, "r", PartitionId("p", 0), 1))
    assert swept == [0] and store.read_arrow(manifest).equals(table)

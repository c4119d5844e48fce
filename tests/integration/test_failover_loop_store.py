"""The failover loop's planning and holds against the real result store (SeaweedFS) — no Airflow processes.

    a#0 -> b#0 ==+==> c#0 ==> d#0        rf_e2e_budget: c#0 reads b->c#0 and b->c#1
    a#1 -> b#1 ==+==> c#1 ==> d#1        (-> PIPELINED, ==> BLOCKING)
"""

from __future__ import annotations

import runpy
import uuid
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

from airflow_region_failover.decisions.storage import RunLogs
from airflow_region_failover.failover.run_log import FailureRecord
from airflow_region_failover.graph.ids import PartitionId
from airflow_region_failover.job import job_of
from airflow_region_failover.plugins.clearing import Services, handle_failure
from airflow_region_failover.store.config import Retention
from airflow_region_failover.store.keys import AttemptId
from airflow_region_failover.store.result_store import ResultStore
from tests.support.fakes import services as fake_services

pytestmark = pytest.mark.integration

DAGS = runpy.run_path(str(Path(__file__).parents[1] / "e2e" / "dags" / "rf_e2e.py"))
DAG = "rf_e2e_budget"


def spec() -> Any:
    """The job of ``rf_e2e_budget`` (the module's last DAG; the same graph as every rf_e2e DAG)."""
    return job_of(DAGS["_dag"])


@pytest.fixture
def store(s3_server: Any) -> ResultStore:
    return ResultStore.from_endpoint(s3_server.endpoint_url, s3_server.access_key, s3_server.secret_key,
                                     s3_server.bucket, prefix=f"loop-{uuid.uuid4().hex[:8]}")


def commit_b(store: ResultStore, run_id: str) -> None:
    for index in (0, 1):
        store.write_arrow(pa.table({"k": [index], "v": [index * 10]}), AttemptId(DAG, run_id, PartitionId("b->c",
                                                                                                          index), 1))


def services(store: ResultStore) -> Services:
    return fake_services(RunLogs(store.objects), store=store)  # type: ignore[no-any-return]


def event() -> FailureRecord:
    return FailureRecord("c.0", -1, 1, "object ... listed in the manifest is missing", "worker", 100.0)


def test_a_committed_partition_whose_data_objects_are_gone_restarts_its_producer(store: ResultStore) -> None:
    """The manifest of b->c#1 is still there but its data object was deleted (lifecycle rule, a mistaken
    cleanup): c#0 fails reading it, and its producer region {a#1, b#1} must rerun, or c#0 fails again and again
    until the budget runs out."""
    run_id = "deleted-object"
    commit_b(store, run_id)
    manifest = store.manifest(DAG, run_id, PartitionId("b->c", 1))
    store.objects.delete([store.run_keys(DAG, run_id).object_key(o.key, o.shared) for o in manifest.objects])
    svc = services(store)
    handle_failure(DAG, run_id, event(), spec(), svc, now=lambda: 100.0)
    [decision] = svc.logs().read(DAG, run_id).decisions
    assert "a.b.1" in decision.restart, decision.restart  # the chain a -> b runs as task a.b.1


def test_a_run_with_a_pending_restart_is_held_against_retention(store: ResultStore) -> None:
    """The run shows ``failed`` until the watcher clears it: retention must not release the results the restart
    is about to read."""
    run_id = "pending-restart"
    commit_b(store, run_id)
    handle_failure(DAG, run_id, event(), spec(), services(store), now=lambda: 100.0)
    released = store.apply_retention(DAG, Retention(keep_last_runs=0), run_finished=lambda run: True)
    assert run_id not in released
    assert store.is_available(DAG, run_id, PartitionId("b->c", 1))


def test_a_committed_partition_whose_object_holds_other_bytes_restarts_its_producer(store: ResultStore) -> None:
    """b->c#1's object was overwritten with other bytes of the same size (the server keeps their SHA-256): c#0's
    failure names no partition (a killed worker), yet the deep check of what c#0 read sees the stored SHA-256
    disagree with the object's name, so the producer region {a#1, b#1} reruns (sizes alone said available)."""
    import base64
    import hashlib

    run_id = "flipped-object"
    commit_b(store, run_id)
    (entry,) = store.manifest(DAG, run_id, PartitionId("b->c", 1)).objects
    key = store.layout.cas_object(entry.sha256)
    body = bytearray(store.objects.get(key) or b"")
    body[len(body) // 2] ^= 0x01
    store.objects.client.put_object(Bucket=store.layout.bucket, Key=key, Body=bytes(body),
                                    ChecksumSHA256=base64.b64encode(hashlib.sha256(body).digest()).decode())
    svc = services(store)
    handle_failure(DAG, run_id, event(), spec(), svc, now=lambda: 100.0)
    [decision] = svc.logs().read(DAG, run_id).decisions
    assert "a.b.1" in decision.restart and "a.b.0" not in decision.restart, decision.restart

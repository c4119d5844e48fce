"""Result store against a real S3-compatible server (SeaweedFS on loopback): faults, races, life-cycle, secrets."""

from __future__ import annotations

import json
import logging
import secrets
import signal
import subprocess
import sys
import threading
import time
from typing import Any

import pyarrow as pa
import pytest

from airflow_region_failover.exceptions import AlreadyCommitted, ReleaseRefused, StoreUnreachable, Superseded
from airflow_region_failover.graph.ids import PartitionId
from airflow_region_failover.standalone.seaweedfs import S3Endpoint, SeaweedFS
from airflow_region_failover.store.config import Retention
from airflow_region_failover.store.gc import lifecycle
from airflow_region_failover.store.keys import AttemptId
from airflow_region_failover.store.result_store import ResultStore
from tests.support.store import release, retirements

pytestmark = pytest.mark.integration

P = PartitionId("orders->join", 0)

WRITER = r"""
import json, sys, time, secrets
import pyarrow as pa
from airflow_region_failover.graph.ids import PartitionId
from airflow_region_failover.store.result_store import ResultStore
from airflow_region_failover.store import content
from airflow_region_failover.store.keys import AttemptId
from airflow_region_failover.store.s3.upload import UploadStream
cfg = json.loads(sys.stdin.readline())
content.SINGLE_PUT_BYTES = 5 * 1024 * 1024  # objects go up in one PUT up to 5 GiB: make this one a multipart upload
store = ResultStore.from_endpoint(cfg["endpoint"], cfg["access_key"], cfg["secret_key"], cfg["bucket"],
                                  prefix=cfg["prefix"], part_size=5 * 1024 * 1024, upload_threads=1)
original = UploadStream._submit
def slow(self, body):
    original(self, body)
    print("PART", flush=True)
    time.sleep(cfg["part_delay"])
UploadStream._submit = slow
n = cfg["rows"]
table = pa.table({"s": [secrets.token_hex(32) for _ in range(n)]})
store.write_arrow(table, AttemptId(cfg["dag"], cfg["run"], PartitionId.parse(cfg["partition"]), cfg["attempt"]))
print("COMMITTED", flush=True)
"""


def make_store(endpoint: S3Endpoint, prefix: str, **tuning: Any) -> ResultStore:
    return ResultStore.from_endpoint(endpoint.endpoint_url, endpoint.access_key, endpoint.secret_key,
                                     endpoint.bucket, prefix=prefix, **tuning)


def random_table(rows: int) -> pa.Table:
    return pa.table({"s": [secrets.token_hex(32) for _ in range(rows)]})


@pytest.fixture
def prefix() -> str:
    return f"it-{secrets.token_hex(4)}"


def test_sigkill_mid_upload_leaves_nothing_visible_and_rerun_commits(s3_server: S3Endpoint, prefix: str) -> None:
    cfg = {"endpoint": s3_server.endpoint_url, "access_key": s3_server.access_key,
           "secret_key": s3_server.secret_key, "bucket": s3_server.bucket, "prefix": prefix, "part_delay": 30,
           "rows": 250_000, "dag": "etl", "run": "r1", "partition": str(P), "attempt": 1}
    proc = subprocess.Popen([sys.executable, "-c", WRITER], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    assert proc.stdin and proc.stdout
    proc.stdin.write(json.dumps(cfg) + "\n")
    proc.stdin.close()
    try:
        assert proc.stdout.readline().strip() == "PART"  # one part is on the server, the upload is open
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=10)
    store = make_store(s3_server, prefix)
    keys = store.run_keys("etl", "r1")
    assert not store.checker("etl", "r1", "fast").is_available(P)
    assert not store.checker("etl", "r1", "deep").is_available(P)
    data = [i.key for i in store.objects.listing(keys.data_prefix(P.result))]
    assert all(key.endswith(".ref") for key in data)  # nothing half-visible (only the writer's announcement)
    assert list(store.objects.listing(store.layout.cas_root + "/")) == []
    assert store.objects.uploads(store.layout.cas_root + "/")  # the open upload is there...
    manifest, _ = store.write_arrow(random_table(1000), AttemptId("etl", "r1", P,
                                                                  2))  # ...and the rerun commits cleanly
    assert store.checker("etl", "r1", "deep").is_available(P)
    assert store.read_arrow(store.manifest("etl", "r1", P)).num_rows == 1000 and manifest.attempt == 2
    report = store.sweep(grace_seconds=3600, now=time.time() + 3601)
    assert report.aborted_uploads >= 1
    assert store.checker("etl", "r1", "deep", verify_checksums=True).is_available(P)


def test_racing_committers_exactly_one_wins(s3_server: S3Endpoint, prefix: str) -> None:
    store = make_store(s3_server, prefix)
    tables = [random_table(2000 + i) for i in range(4)]
    outcomes: list[object] = [None] * 4
    barrier = threading.Barrier(4)

    def write(i: int) -> None:
        barrier.wait()
        try:
            outcomes[i] = store.write_arrow(tables[i], AttemptId("etl", "race", P, 1))[0]
        except (AlreadyCommitted, Superseded) as exc:
            outcomes[i] = exc

    threads = [threading.Thread(target=write, args=(i,)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    winners = [o for o in outcomes if not isinstance(o, Exception)]
    assert len(winners) == 1, outcomes
    assert all(isinstance(o, AlreadyCommitted) for o in outcomes if o is not winners[0])
    current = store.manifest("etl", "race", P)
    assert current == winners[0]
    assert store.read_arrow(store.manifest("etl", "race", P)).num_rows == current.row_count
    shared = store.layout.cas_root + "/"
    assert len(list(store.objects.listing(shared))) == 4  # every writer's object; the losers' are garbage...
    report = store.sweep(grace_seconds=3600, now=time.time() + 3601)
    assert report.shared.deleted == 3 and report.shared.referenced == 1  # ...which the sweeper removes
    assert store.read_arrow(store.manifest("etl", "race", P)).num_rows == current.row_count


def test_rerun_and_zombie_in_the_same_run(s3_server: S3Endpoint, prefix: str) -> None:
    store = make_store(s3_server, prefix)
    first, _ = store.write_arrow(random_table(10), AttemptId("etl", "rr", P, 1))
    store.begin_attempt(AttemptId("etl", "rr", P, 2))  # the producer region restarts: attempt 2 begins
    assert not store.is_available("etl", "rr", P)
    second, _ = store.write_arrow(random_table(20), AttemptId("etl", "rr", P, 2))
    with pytest.raises(Superseded):
        store.write_arrow(random_table(30), AttemptId("etl", "rr", P, 1))
    assert store.manifest("etl", "rr", P) == second
    assert retirements(store, "etl", "rr", P)[0].content_checksum == first.content_checksum


def test_deleted_or_truncated_object_fails_the_deep_check(s3_server: S3Endpoint, prefix: str) -> None:
    store = make_store(s3_server, prefix)
    manifest, _ = store.write_arrow(random_table(5000), AttemptId("etl", "deep", P, 1))
    key = store.run_keys("etl", "deep").object_key(manifest.objects[0].key, shared=True)
    client = store.objects.client
    body = client.get_object(Bucket=s3_server.bucket, Key=key)["Body"].read()
    client.put_object(Bucket=s3_server.bucket, Key=key, Body=body[:-10])
    assert store.is_available("etl", "deep", P, "fast")
    for probe in ("list", "head"):
        assert not store.checker("etl", "deep", "deep", probe=probe).is_available(P)
    client.put_object(Bucket=s3_server.bucket, Key=key, Body=body)
    assert store.is_available("etl", "deep", P, "deep", verify_checksums=True)
    client.delete_object(Bucket=s3_server.bucket, Key=key)
    assert "missing" in store.checker("etl", "deep", "deep").why_unavailable(P)


def test_server_stopped_during_write_gives_clear_error_and_commits_nothing(tmp_path: Any) -> None:
    server = SeaweedFS(bucket="stopped", data_dir=tmp_path / "sw")
    endpoint = server.start()
    try:
        store = make_store(endpoint, "stop", max_attempts=2, connect_timeout=1, read_timeout=3,
                           part_size=5 * 1024 * 1024, upload_threads=1)
        table = random_table(300_000)  # ~20 MB: several parts
        killer = threading.Timer(0.3, server.kill)
        killer.start()
        started = time.monotonic()
        with pytest.raises(StoreUnreachable, match="failed after retries"):
            store.write_arrow(table, AttemptId("etl", "down", P, 1))
        assert time.monotonic() - started < 60
        killer.join()
        endpoint = server.start()  # same data directory, new ports
        store = make_store(endpoint, "stop")
        assert not store.is_available("etl", "down", P, "deep")
        assert store.partitions("etl", "down", P.result) == ()
    finally:
        server.stop(grace=5)


def test_release_and_gc_never_delete_what_a_pending_restart_needs(s3_server: S3Endpoint, prefix: str) -> None:
    store = make_store(s3_server, prefix)
    for run in ("old-held", "old-running", "old-done", "new"):
        store.write_arrow(random_table(10), AttemptId("etl", run, P, 1))
    lifecycle.hold(store.objects, store.run_keys("etl", "old-held"), "restart-7", "restart pending in backoff")
    with pytest.raises(ReleaseRefused, match="restart-7"):
        release(store, "etl", "old-held")
    released = store.apply_retention("etl", Retention(keep_last_runs=1), lambda run: run != "old-running")
    assert released == ("old-done",)
    for run in ("old-held", "old-running", "new"):
        assert store.is_available("etl", run, P, "deep")
    assert not store.is_available("etl", "old-done", P)
    report = store.sweep(grace_seconds=3600, now=time.time() + 3601)
    for run in ("old-held", "old-running", "new"):
        assert store.is_available("etl", run, P, "deep"), report


def test_sweeper_removes_uncommitted_attempts_only_after_grace(s3_server: S3Endpoint, prefix: str) -> None:
    store = make_store(s3_server, prefix)
    store.write_arrow(random_table(10), AttemptId("etl", "sw", P, 1))
    keys = store.run_keys("etl", "sw")
    orphan = keys.data_object(P, 2, "abcdef0123456789", 0)
    store.objects.client.put_object(Bucket=s3_server.bucket, Key=orphan, Body=b"x" * 10)
    assert store.sweep(grace_seconds=3600).deleted_objects == 0
    assert store.sweep(grace_seconds=3600, now=time.time() + 3601).deleted_objects == 1
    assert store.is_available("etl", "sw", P, "deep")


def test_credentials_never_logged(s3_server: S3Endpoint, prefix: str, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG)
    store = make_store(s3_server, prefix, max_attempts=1)
    store.write_arrow(random_table(10), AttemptId("etl", "log", P, 1))
    store.read_arrow(store.manifest("etl", "log", P))
    store.is_available("etl", "log", P, "deep")
    bad = ResultStore.from_endpoint(s3_server.endpoint_url, s3_server.access_key, "wrong-" + s3_server.secret_key,
                                    s3_server.bucket, prefix=prefix, max_attempts=1)
    with pytest.raises(Exception):  # noqa: B017 - the signature error itself is not the point
        bad.write_arrow(random_table(10), AttemptId("etl", "log", P, 2))
    text = caplog.text + repr(store.config) + repr(bad.config) + repr(s3_server)
    assert s3_server.secret_key not in text
    ours = "\n".join(r.getMessage() for r in caplog.records if r.name.startswith("airflow_region_failover"))
    assert "committed" in ours and s3_server.access_key not in ours


@pytest.mark.parametrize("dag_id, run_id, partition", [
    ("etl", "../../outside", P), ("etl", "/abs", P), ("../etl", "r", P), ("etl", "r\u2024\u2024", P),
    ("etl", "r", PartitionId("../x", 0)), ("etl", "r", PartitionId("a/../../b", 0)), ("etl", "r", PartitionId("a", -1)),
])
def test_unsafe_ids_are_rejected_before_any_request(s3_server: S3Endpoint, prefix: str, dag_id: str, run_id: str,
                                                     partition: PartitionId) -> None:
    from airflow_region_failover.exceptions import UnsafeKeyError

    store = make_store(s3_server, prefix)
    with pytest.raises(UnsafeKeyError):
        store.write_arrow(random_table(3), AttemptId(dag_id, run_id, partition, 1))
    with pytest.raises(UnsafeKeyError):
        store.checker(dag_id, run_id).is_available(partition)
    everything = store.objects.client.list_objects_v2(Bucket=s3_server.bucket).get("Contents", [])
    assert all(not o["Key"].startswith(prefix) for o in everything)  # nothing written at all under this prefix
    assert all(".." not in o["Key"].split("/") and not o["Key"].startswith("/") for o in everything)


def test_gc_dry_run_then_real(s3_server: S3Endpoint, prefix: str) -> None:
    from airflow_region_failover.cli.gc import run_gc

    store = make_store(s3_server, prefix)
    for run in ("a", "b"):
        store.write_arrow(random_table(10), AttemptId("etl", run, P, 1))
    orphan = store.run_keys("etl", "a").data_object(P, 2, "0123456789abcdef", 0)
    store.objects.client.put_object(Bucket=s3_server.bucket, Key=orphan, Body=b"x")
    finished: dict[str, bool] = {"a": True, "b": True}

    def run_finished(dag_id: str) -> Any:
        return lambda run_id: finished[run_id]

    time.sleep(1.1)  # created times differ, so "newest run" is well defined
    store.write_arrow(random_table(10), AttemptId("etl", "c", P, 1))
    finished["c"] = False
    reported: list[tuple[Any, list[str]]] = []

    def report(layout: Any, names: list[str]) -> bool:
        reported.append((layout, names))
        return True

    dry = run_gc(store, 0, Retention(keep_last_runs=1), run_finished, dry_run=True, min_grace_seconds=0,
                 report_dropped=report)
    assert dry["swept_objects"] == 1 and dry["released_runs"] == {"etl": ["b", "a"]}
    assert all(store.is_available("etl", r, P, "deep") for r in "abc")
    assert reported == [] and dry["dropped_reported"] is False, "a dry run drops nothing"
    real = run_gc(store, 0, Retention(keep_last_runs=1), run_finished, min_grace_seconds=0, report_dropped=report)
    assert real["released_runs"] == {"etl": ["b", "a"]}
    # the released runs' committed partitions are reported dropped, by their lineage names (observability/lineage.py)
    from airflow_region_failover.observability.lineage import dataset_name

    assert reported == [(store.layout, [dataset_name(store.layout, "etl", r, P) for r in ("b", "a")])]
    assert real["dropped_partitions"] == 2 and real["dropped_reported"] is True
    assert store.is_available("etl", "c", P, "deep") and not store.is_available("etl", "a", P)

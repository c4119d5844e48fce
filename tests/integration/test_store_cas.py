"""Content-addressed data objects and the derived shared registry against a real S3-compatible server (SeaweedFS):
runs sharing objects, release of one, a sweeper killed with SIGKILL mid-way, the race between a sweeper and a
committer reusing an object, and version-1 manifests with run-scoped objects."""

from __future__ import annotations

import hashlib
import json
import secrets
import signal
import subprocess
import sys
import threading
import time
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from airflow_region_failover.graph.ids import PartitionId
from airflow_region_failover.standalone.seaweedfs import S3Endpoint
from airflow_region_failover.store.gc.registry import derive_registry
from airflow_region_failover.store.keys import AttemptId
from airflow_region_failover.store.manifest import Manifest, ObjectEntry
from airflow_region_failover.store.result_store import ResultStore
from tests.support.store import release

pytestmark = pytest.mark.integration

P = PartitionId("orders->join", 0)
HOUR = 3600.0


def make_store(endpoint: S3Endpoint, prefix: str, **tuning: Any) -> ResultStore:
    return ResultStore.from_endpoint(endpoint.endpoint_url, endpoint.access_key, endpoint.secret_key,
                                     endpoint.bucket, prefix=prefix, **tuning)


@pytest.fixture
def prefix() -> str:
    return f"cas-{secrets.token_hex(4)}"


def table(seed: int, rows: int = 500) -> pa.Table:
    return pa.table({"k": [seed] * rows, "v": [f"{seed}-{i}" for i in range(rows)]})


def shared_keys(store: ResultStore) -> set[str]:
    return {i.key for i in store.objects.listing(store.layout.cas_root + "/")}


def test_two_runs_share_objects_and_releasing_one_keeps_the_other_readable(s3_server: S3Endpoint,
                                                                           prefix: str) -> None:
    store = make_store(s3_server, prefix)
    first, written = store.write_arrow(table(1), AttemptId("etl", "day-1", P, 1))
    second, unchanged = store.write_arrow(table(1), AttemptId("etl", "day-2", P, 1))  # a scheduled run, same rows
    assert second.objects == first.objects and unchanged.new_bytes == 0 and written.new_bytes == written.bytes > 0
    assert derive_registry(store.objects, store.layout).references == {first.objects[0].sha256: 2}
    release(store, "etl", "day-1")
    report = store.sweep(grace_seconds=HOUR, now=time.time() + 2 * HOUR)
    assert (report.shared.deleted, report.shared.referenced) == (0, 1)
    assert store.read_arrow(store.manifest("etl", "day-2", P)).equals(table(1))
    assert store.is_available("etl", "day-2", P, "deep", verify_checksums=True)
    release(store, "etl", "day-2")
    assert store.sweep(grace_seconds=HOUR, now=time.time() + 2 * HOUR).shared.deleted == 1
    assert shared_keys(store) == set()


SWEEPER = r"""
import json, sys, time
from airflow_region_failover.store.result_store import ResultStore
from airflow_region_failover.store.s3.objects import Objects
cfg = json.loads(sys.stdin.readline())
store = ResultStore.from_endpoint(cfg["endpoint"], cfg["access_key"], cfg["secret_key"], cfg["bucket"],
                                  prefix=cfg["prefix"])
original = Objects.delete
def slow(self, keys):
    done = original(self, keys)
    if keys:
        print("DELETED", flush=True)
        time.sleep(60)
    return done
Objects.delete = slow
store.sweep(grace_seconds=3600, now=time.time() + 7200)
print("FINISHED", flush=True)
"""


def test_a_sweeper_killed_mid_way_loses_nothing_and_the_next_sweep_removes_the_rest(s3_server: S3Endpoint,
                                                                                    prefix: str) -> None:
    store = make_store(s3_server, prefix)
    kept = {run: store.write_arrow(table(seed), AttemptId("etl", run, P, 1))[0] for seed, run in enumerate(["a", "b"])}
    store.write_arrow(table(0), AttemptId("etl", "a-again", P, 1))  # shares run a's object
    garbage = [store.write_arrow(table(10 + i), AttemptId("etl", f"old-{i}", P, 1))[0] for i in range(4)]
    for i in range(4):
        release(store, "etl", f"old-{i}")
    release(store, "etl", "a")  # a's object still listed by a-again
    cfg = {"endpoint": s3_server.endpoint_url, "access_key": s3_server.access_key,
           "secret_key": s3_server.secret_key, "bucket": s3_server.bucket, "prefix": prefix}
    proc = subprocess.Popen([sys.executable, "-c", SWEEPER], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    assert proc.stdin and proc.stdout
    proc.stdin.write(json.dumps(cfg) + "\n")
    proc.stdin.close()
    try:
        assert proc.stdout.readline().strip() == "DELETED"  # the sweeper is mid-way: one object deleted
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=10)
    assert proc.returncode == -signal.SIGKILL
    left = {o.sha256 for m in garbage for o in m.objects} & {k.rsplit("/", 1)[1][:64] for k in shared_keys(store)}
    assert len(left) == 3  # exactly one garbage object went before the kill
    for run in ("a-again", "b"):
        assert store.is_available("etl", run, P, "deep", verify_checksums=True)
    report = store.sweep(grace_seconds=HOUR, now=time.time() + 2 * HOUR)
    assert (report.shared.deleted, report.shared.referenced) == (3, 2)
    assert store.read_arrow(store.manifest("etl", "a-again", P)).equals(table(0))
    assert store.read_arrow(store.manifest("etl", "b", P)).num_rows == kept["b"].row_count
    assert len(shared_keys(store)) == 2


def test_a_committer_reusing_an_object_the_sweeper_judged_garbage_keeps_it(s3_server: S3Endpoint,
                                                                           prefix: str) -> None:
    """The sweeper lists the shared area, finds an old unreferenced object and is about to delete it; meanwhile a
    writer re-produces the same bytes (its create-only PUT finds them there) and commits. The committer refreshes
    the stale object before its manifest goes in, and the sweeper's HEAD right before the DELETE sees that."""
    store = make_store(s3_server, prefix, min_grace_seconds=8.0)  # writers refresh objects older than 4 s
    old, _ = store.write_arrow(table(5), AttemptId("etl", "old", P, 1))
    release(store, "etl", "old")
    time.sleep(6)
    listed, resume = threading.Event(), threading.Event()
    sweeper = make_store(s3_server, prefix)
    original = sweeper.objects.listing

    def pausing_listing(where: str):  # type: ignore[no-untyped-def]
        items = list(original(where))
        if where == store.layout.cas_root + "/":
            listed.set()
            resume.wait(60)
        return iter(items)

    sweeper.objects.listing = pausing_listing  # type: ignore[method-assign]
    reports: list[Any] = []
    # a grace of 40 s that ended 3 s ago: the old object (6 s) is garbage, one refreshed now is not
    thread = threading.Thread(target=lambda: reports.append(
        sweeper.sweep(grace_seconds=40, now=time.time() + 37, min_grace_seconds=8.0)))
    thread.start()
    assert listed.wait(60)
    new, tally = store.write_arrow(table(5), AttemptId("etl", "new", P, 1))  # same bytes: nothing uploaded
    assert new.objects == old.objects and tally.new_bytes == 0
    resume.set()
    thread.join(60)
    assert reports and reports[0].shared.deleted == 0 and reports[0].shared.deferred == 1
    assert store.read_arrow(store.manifest("etl", "new", P)).equals(table(5))


def test_version_1_manifests_with_run_scoped_objects_are_read_and_kept(s3_server: S3Endpoint, prefix: str) -> None:
    store = make_store(s3_server, prefix)
    keys = store.run_keys("etl", "legacy")
    sink = pa.BufferOutputStream()
    pq.write_table(table(7), sink)
    body = sink.getvalue().to_pybytes()

    key = keys.data_object(P, 1, "0123456789abcdef", 0)
    store.objects.client.put_object(Bucket=s3_server.bucket, Key=key, Body=body)
    entry = ObjectEntry(key[len(keys.run_prefix):], len(body), hashlib.sha256(body).hexdigest())
    manifest = Manifest("etl", "legacy", P, 1, "0123456789abcdef", "{}", 500, (entry,), "2026-01-01T00:00:00Z")
    document = json.loads(manifest.to_json())
    document["version"] = 1
    store.objects.put_if_absent(keys.manifest(P, 1), json.dumps(document).encode())
    assert store.read_arrow(store.manifest("etl", "legacy", P)).equals(table(7))
    store.sweep(grace_seconds=HOUR, now=time.time() + 2 * HOUR)
    assert store.is_available("etl", "legacy", P, "deep", verify_checksums=True)


def test_a_sweeper_whose_clock_runs_an_hour_ahead_deletes_nothing_the_servers_clock_calls_young(
        s3_server: S3Endpoint, prefix: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """Ages are the server's Date minus LastModified: a sweeper host whose clock is an hour ahead took an object
    written a moment ago for an hour old (and a committer's confirmation, on a correct clock, does not refresh
    an object that young)."""
    from types import SimpleNamespace

    from airflow_region_failover.store.content import put_content
    from airflow_region_failover.store.gc import registry

    store = make_store(s3_server, prefix)
    entry = put_content(store.objects, store.layout, b"written a moment ago, listed by a commit under way").entry
    monkeypatch.setattr(registry, "time", SimpleNamespace(time=lambda: time.time() + 3600,
                                                          monotonic=time.monotonic, sleep=time.sleep))
    store.sweep(grace_seconds=15 * 60)
    assert store.objects.head(store.layout.cas_object(entry.sha256)) is not None

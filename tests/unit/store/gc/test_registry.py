"""The shared registry is derived from the manifests that exist: reference counts, release, unreadable manifests,
and the sweep of the shared area (on moto's in-memory S3)."""

from __future__ import annotations

import hashlib
import time

import pyarrow as pa
import pytest

from airflow_region_failover.graph.ids import PartitionId
from airflow_region_failover.store.gc.registry import count_references, derive_registry, scan_root, sweep_shared
from airflow_region_failover.store.key_checks import cas_name
from airflow_region_failover.store.keys import AttemptId
from airflow_region_failover.store.manifest import Manifest, ObjectEntry
from airflow_region_failover.store.result_store import ResultStore
from airflow_region_failover.store.s3.objects import Listed
from tests.support.store import release

P = PartitionId("orders->join", 0)
HOUR = 3600.0


def shared(body: bytes) -> ObjectEntry:
    sha = hashlib.sha256(body).hexdigest()
    return ObjectEntry(cas_name(sha), len(body), sha, shared=True)


def manifest(*objects: ObjectEntry) -> Manifest:
    return Manifest("d", "r", P, 1, "abcdef12", "{}", 1, objects, "2026-01-01T00:00:00+00:00")


def test_each_manifest_holds_one_reference_to_each_shared_object_it_lists() -> None:
    a, b = shared(b"a"), shared(b"b")
    scoped = ObjectEntry("x/data/p00000/a000001-abcdef12/part-00000-t0.parquet", 1, a.sha256)
    counts = count_references([manifest(a, b), manifest(a, a), manifest(scoped)])
    assert counts == {a.sha256: 2, b.sha256: 1}


def test_only_manifest_keys_outside_nested_deployments_count() -> None:
    root = "pre/v1/"
    keys = ["d/r/res/manifests/p00000/a000001.json", "d/r/res/retired/p00000/a000001.json",
            "d/r/res/data/p00000/a000001-abcdef12/part-00000-t0.parquet", "d/_run.json",
            "other/_region_failover_deployment.json", "other/v1/d/r/res/manifests/p00000/a000001.json",
            "d/r/res/manifests/p00000/a000002.json.tmp"]
    items = [Listed(root + k, 1, 0.0) for k in keys]
    assert scan_root(root, items)[0] == [root + keys[0]]


def table(n: int) -> pa.Table:
    return pa.table({"x": list(range(n))})


def test_two_runs_writing_the_same_rows_share_objects_and_release_drops_one_reference(store: ResultStore) -> None:
    first, tally = store.write_arrow(table(100), AttemptId("etl", "r1", P, 1))
    second, again = store.write_arrow(table(100), AttemptId("etl", "r2", P, 1))
    assert first.objects == second.objects and all(o.shared for o in first.objects)
    assert tally.new_bytes == tally.bytes > 0 and again.new_bytes == 0 and again.bytes == tally.bytes
    sha = first.objects[0].sha256
    assert derive_registry(store.objects, store.layout).references == {sha: 2}
    release(store, "etl", "r1")
    registry = derive_registry(store.objects, store.layout)
    assert registry.references == {sha: 1} and registry.manifests == 1 and registry.complete
    report = store.sweep(grace_seconds=HOUR, now=time.time() + 2 * HOUR)
    assert report.shared.deleted == 0 and report.shared.referenced == 1
    assert store.read_arrow(store.manifest("etl", "r2", P)).equals(table(100))


def test_unreferenced_objects_go_only_after_the_grace(store: ResultStore) -> None:
    kept, _ = store.write_arrow(table(10), AttemptId("etl", "keep", P, 1))
    gone, _ = store.write_arrow(table(20), AttemptId("etl", "gone", P, 1))
    release(store, "etl", "gone")
    assert store.sweep(grace_seconds=HOUR).shared.deferred == 1  # younger than the grace
    report = store.sweep(grace_seconds=HOUR, now=time.time() + HOUR + 5)
    assert (report.shared.deleted, report.shared.referenced) == (1, 1)
    assert store.objects.head(store.layout.cas_object(gone.objects[0].sha256)) is None
    assert store.read_arrow(store.manifest("etl", "keep", P)).num_rows == kept.row_count


def test_an_unreadable_manifest_keeps_every_shared_object(store: ResultStore) -> None:
    store.write_arrow(table(10), AttemptId("etl", "a", P, 1))
    gone, _ = store.write_arrow(table(20), AttemptId("etl", "b", P, 1))
    release(store, "etl", "b")
    odd = store.run_keys("etl", "c").manifest(P, 1)
    store.objects.client.put_object(Bucket="bkt", Key=odd, Body=b'{"format": "someone else"}')
    report = store.sweep(grace_seconds=HOUR, now=time.time() + 2 * HOUR)
    assert report.shared.skipped_incomplete and report.shared.deleted == 0
    assert store.objects.head(store.layout.cas_object(gone.objects[0].sha256)) is not None


def test_an_object_refreshed_after_the_listing_is_not_deleted(store: ResultStore,
                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    """The sweeper HEADs right before each DELETE: a writer that refreshed the object meanwhile keeps it."""
    gone, _ = store.write_arrow(table(20), AttemptId("etl", "b", P, 1))
    release(store, "etl", "b")
    key = store.layout.cas_object(gone.objects[0].sha256)
    listed = store.objects.listing

    def listing_then_refresh(prefix: str):  # type: ignore[no-untyped-def]
        items = list(listed(prefix))
        if prefix == store.layout.cas_root + "/":
            time.sleep(2.5)
            store.objects.freshen(key)  # a committer confirming an object it found present
        return iter(items)

    monkeypatch.setattr(store.objects, "listing", listing_then_refresh)
    # the clock as if the grace of 20 s had passed 1.2 s ago; HEAD times have whole seconds
    report = sweep_shared(store.objects, store.layout, grace_seconds=20.0, now=time.time() + 20.0 - 1.2)
    assert report.deleted == 0 and report.deferred == 1
    assert store.objects.head(key) is not None


def test_a_release_killed_mid_way_keeps_the_run_record_so_retention_finds_the_run_again(
        store: ResultStore, monkeypatch: pytest.MonkeyPatch) -> None:
    """The run record goes last: a release that dies after deleting one key leaves the run listed with its
    original creation time, so the next retention releases the rest (else its manifests would look new forever)."""
    from airflow_region_failover.store.gc.lifecycle import list_runs

    store.write_arrow(table(10), AttemptId("etl", "r", P, 1))
    (before,) = list_runs(store.objects, store.layout, "etl")
    delete = store.objects.delete

    def dies_after_one(keys: list[str]) -> int:
        delete(keys[:1])
        raise RuntimeError("killed")

    monkeypatch.setattr(store.objects, "delete", dies_after_one)
    with pytest.raises(RuntimeError):
        release(store, "etl", "r")
    assert list_runs(store.objects, store.layout, "etl") == [before]


def test_a_live_writers_announcement_keeps_an_old_object_it_is_about_to_list(store: ResultStore) -> None:
    """A writer announces each object before its put (``uses-<h>.ref`` under its prefix): until its prefix is swept
    (committed, or idle for longer than the grace) the announcement is a reference, so a long job's objects — or
    an old one it re-produced — are not garbage before its manifest lists them."""
    from airflow_region_failover.store.content import put_content

    old = put_content(store.objects, store.layout, b"produced long ago").entry
    time.sleep(2.5)
    keys = store.run_keys("etl", "long-job")
    again = put_content(store.objects, store.layout, b"produced long ago",
                        announce=lambda sha: keys.announcement(P, 1, "abcdef12", sha))
    assert not again.uploaded
    report = store.sweep(grace_seconds=2.0, min_grace_seconds=0)
    assert report.shared.deleted == 0 and report.shared.referenced == 1
    assert store.objects.head(store.layout.cas_object(old.sha256)) is not None
    store.objects.delete([keys.announcement(P, 1, "abcdef12", old.sha256)])  # the writer died long ago
    assert store.sweep(grace_seconds=2.0, min_grace_seconds=0).shared.deleted == 1

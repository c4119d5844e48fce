"""The timing the sweeper/committer proof assumes is enforced, or its breach is made safe (content.py's proof):
a committer stalled between its deadline check and its manifest PUT does not leave a commit listing an object
deleted meanwhile; a sweeper stalled between its HEAD and its DELETE judges the object again; a sweeper whose
clock runs ahead of the server's deletes nothing the server's clock calls young; and a shared sweep whose
derivation outlasts its window says so — on moto's in-memory S3 with grace floors of a few seconds.

    writer ==> cas/<h>.parquet <== sweeper        (one shared object, one manifest listing it)
"""

from __future__ import annotations

import dataclasses
import logging
import threading
import time
from email.utils import formatdate
from types import SimpleNamespace
from typing import Any

import pyarrow as pa
import pytest

from airflow_region_failover.exceptions import IncompleteCommit
from airflow_region_failover.graph.ids import PartitionId
from airflow_region_failover.store import commit as protocol
from airflow_region_failover.store.content import put_content
from airflow_region_failover.store.gc import registry
from airflow_region_failover.store.keys import AttemptId
from airflow_region_failover.store.manifest import Manifest
from airflow_region_failover.store.result_store import ResultStore

P = PartitionId("r", 0)
TABLE = pa.table({"x": list(range(1_000))})


def with_grace_floor(store: ResultStore, seconds: float) -> ResultStore:
    return ResultStore(dataclasses.replace(store.config, min_grace_seconds=seconds), client=store.objects.client)


def server_clock(client: Any) -> None:
    """Every answer carries the server's ``Date``, as a real server's does (moto's has none)."""
    def add_date(parsed: dict[str, Any], **_: Any) -> None:
        parsed.setdefault("ResponseMetadata", {}).setdefault("HTTPHeaders", {})["date"] = formatdate(usegmt=True)

    client.meta.events.register("after-call.s3", add_date)


def test_a_committer_stalled_before_its_put_does_not_leave_a_commit_listing_a_deleted_object(
        store: ResultStore, monkeypatch: pytest.MonkeyPatch) -> None:
    """The PUT must land within G0/4 of the confirmation; a committer paused past it (GC, SIGSTOP, a slow server)
    while a sweeper deleted an object it lists finds out after its PUT and withdraws the commit (before the fix
    the partition stayed committed with an object missing)."""
    short = with_grace_floor(store, 4.0)
    put = short.objects.put_if_absent

    def stalled(key: str, body: bytes, *args: Any, **kwargs: Any) -> str:
        if "/manifests/" in key:
            listed = Manifest.from_json(body, where=key).objects[0]
            short.objects.delete([short.layout.cas_object(listed.sha256)])  # a sweeper that missed this commit
            time.sleep(1.5)  # past G0/4 = 1 s after the confirmation
        return put(key, body, *args, **kwargs)

    monkeypatch.setattr(short.objects, "put_if_absent", stalled)
    with pytest.raises(IncompleteCommit):
        short.write_arrow(TABLE, AttemptId("d", "r1", P, 1))
    assert short.partitions("d", "r1", "r") == (), "the commit of attempt 1 stands with a missing object"
    monkeypatch.setattr(short.objects, "put_if_absent", put)
    short.write_arrow(TABLE, AttemptId("d", "r1", P, 2))  # the retried task
    assert short.read_arrow(short.manifest("d", "r1", P)) == TABLE


def test_a_sweeper_stalled_between_its_head_and_its_delete_judges_the_object_again(store: ResultStore) -> None:
    """Between the sweeper's HEAD (the object old, unreferenced) and its DELETE a committer refreshes the object
    and commits a manifest listing it; the DELETE, sent 1.5 s after the HEAD, would remove it."""
    grace = 2.0
    entry = put_content(store.objects, store.layout, b"an object nobody lists yet").entry
    key = store.layout.cas_object(entry.sha256)
    time.sleep(grace + 1.1)
    committing = threading.Event()

    def remember(params: dict[str, Any], context: dict[str, Any], **_: Any) -> None:
        context["key"] = params["Key"]

    def committer_meanwhile(context: dict[str, Any], **_: Any) -> None:
        if context.get("key") != key or committing.is_set():
            return
        committing.set()  # its own HEADs (from its threads) pass through here too
        manifest = Manifest("d", "r1", P, 1, "0123456789abcdef", "{}", 0, (entry,), protocol.now_iso())
        protocol.commit(store.objects, store.run_keys("d", "r1"), manifest, min_grace_seconds=grace)
        time.sleep(1.5)  # the sweeper, paused (GC, a slow network) before its DELETE

    store.objects.client.meta.events.register("before-parameter-build.s3.HeadObject", remember)
    store.objects.client.meta.events.register("after-call.s3.HeadObject", committer_meanwhile)
    store.sweep(grace, min_grace_seconds=grace)
    assert store.objects.head(key) is not None, "the sweeper deleted an object a committed manifest lists"


def test_a_sweeper_whose_clock_runs_ahead_deletes_nothing_the_servers_clock_calls_young(
        store: ResultStore, monkeypatch: pytest.MonkeyPatch) -> None:
    """Unbounded skew: a sweeper an hour ahead took a just-written object for an hour old (and a committer an
    hour behind would never refresh an old one); every age is now the server's Date minus its LastModified."""
    server_clock(store.objects.client)
    entry = put_content(store.objects, store.layout, b"written a moment ago").entry
    ahead = SimpleNamespace(time=lambda: time.time() + 3600, monotonic=time.monotonic, sleep=time.sleep)
    monkeypatch.setattr(registry, "time", ahead)
    report = store.sweep(15 * 60)
    assert store.objects.head(store.layout.cas_object(entry.sha256)) is not None, report


def test_a_shared_sweep_whose_derivation_outlasts_its_window_says_so(store: ResultStore,
                                                                    monkeypatch: pytest.MonkeyPatch,
                                                                    caplog: pytest.LogCaptureFixture) -> None:
    """The window (grace/4 from the derivation's start) closed before the first HEAD: nothing could be deleted,
    silently, sweep after sweep (~180k retained manifests at a 15 min grace)."""
    grace = 2.0
    put_content(store.objects, store.layout, b"garbage")
    time.sleep(grace + 1.1)
    derive = registry.derive_registry

    def slow(*args: Any, **kwargs: Any) -> registry.Registry:
        found = derive(*args, **kwargs)
        time.sleep(grace / 4 + 0.2)
        return found

    monkeypatch.setattr(registry, "derive_registry", slow)
    with caplog.at_level(logging.WARNING):
        report = store.sweep(grace, min_grace_seconds=grace)
    assert report.shared.deleted == 0
    warned = [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]
    assert any("grace" in m and "manifests" in m for m in warned), warned

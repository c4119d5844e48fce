"""Commit / supersede protocol and availability rules, against moto (single module, in-process)."""

from __future__ import annotations

import pyarrow as pa
import pytest

from airflow_region_failover.exceptions import AlreadyCommitted, NotAvailable, ReleaseRefused, Superseded
from airflow_region_failover.graph.ids import PartitionId
from airflow_region_failover.store import commit as protocol
from airflow_region_failover.store.gc import lifecycle
from airflow_region_failover.store.keys import AttemptId
from airflow_region_failover.store.result_store import ResultStore
from tests.support.store import release, retirements

P = PartitionId("clean->join", 0)
RUN = ("etl", "manual__1")


def table(n: int) -> pa.Table:
    return pa.table({"x": list(range(n))})


def test_commit_then_read_and_fast_available(store: ResultStore) -> None:
    manifest, _ = store.write_arrow(table(5), AttemptId(*RUN, P, 1))
    assert manifest.row_count == 5 and manifest.attempt == 1
    assert store.read_arrow(store.manifest(*RUN, P)).column("x").to_pylist() == list(range(5))
    assert store.checker(*RUN).is_available(P)
    assert not store.checker(*RUN).is_available(PartitionId("clean->join", 1))


def test_rerun_supersedes_and_keeps_old_checksum(store: ResultStore) -> None:
    first, _ = store.write_arrow(table(5), AttemptId(*RUN, P, 1))
    second, _ = store.write_arrow(table(5), AttemptId(*RUN, P, 2))
    assert store.manifest(*RUN, P).attempt == 2
    (retired,) = retirements(store, *RUN, P)
    assert retired.attempt == 1 and retired.content_checksum == first.content_checksum == second.content_checksum


def test_zombie_older_attempt_is_refused_and_never_current(store: ResultStore) -> None:
    store.write_arrow(table(5), AttemptId(*RUN, P, 2))
    with pytest.raises(Superseded, match="attempt 1 is retired"):
        store.write_arrow(table(9), AttemptId(*RUN, P, 1))
    assert store.read_arrow(store.manifest(*RUN, P)).num_rows == 5


def test_zombie_manifest_slipping_past_the_precheck_is_never_read(store: ResultStore) -> None:
    keys = store.run_keys(*RUN)
    zombie, _ = store.write_arrow(table(9), AttemptId(*RUN, P, 1))  # stands in for a zombie's manifest
    store.write_arrow(table(5), AttemptId(*RUN, P, 2))
    late = zombie.__class__(**{**zombie.__dict__, "attempt": 3, "writer": "eeeeeeee"})
    store.begin_attempt(AttemptId(*RUN, P, 3))  # fence = 2; a commit at 3 would be legal...
    assert protocol.state_of(store.objects, keys, P).fence == 2
    protocol.commit(store.objects, keys, late)
    assert store.manifest(*RUN, P).attempt == 3
    # ...but a raced commit at or below the fence is ignored by readers even when its PUT succeeds
    store.objects.client.delete_object(Bucket="bkt", Key=keys.manifest(P, 1))
    store.objects.put_if_absent(keys.manifest(P, 1), zombie.to_json())
    assert store.manifest(*RUN, P).attempt == 3


def test_begin_fences_a_zombie_that_never_committed(store: ResultStore) -> None:
    store.begin_attempt(AttemptId(*RUN, P, 3))
    with pytest.raises(Superseded, match="retired"):
        store.write_arrow(table(9), AttemptId(*RUN, P, 2))
    assert not store.checker(*RUN).is_available(P)


def test_second_committer_of_same_attempt_gets_already_committed(store: ResultStore) -> None:
    keys = store.run_keys(*RUN)
    first, _ = store.write_arrow(table(5), AttemptId(*RUN, P, 1))
    with pytest.raises(AlreadyCommitted, match="that commit stands"):
        protocol.commit(store.objects, keys, first.__class__(**{**first.__dict__, "writer": "ffffffff"}))
    assert store.manifest(*RUN, P).writer == first.writer


def test_begin_makes_unavailable_until_the_newer_attempt_commits(store: ResultStore) -> None:
    store.write_arrow(table(5), AttemptId(*RUN, P, 1))
    (marker,) = store.begin_attempt(AttemptId(*RUN, P, 2))  # the producer's region restarts: attempt 2 begins
    assert marker is not None and marker.attempt == 1
    assert not store.checker(*RUN).is_available(P)
    with pytest.raises(NotAvailable, match="retired"):
        store.manifest(*RUN, P)
    store.write_arrow(table(6), AttemptId(*RUN, P, 2))
    assert store.checker(*RUN).is_available(P) and store.read_arrow(store.manifest(*RUN, P)).num_rows == 6


def test_checker_honours_partitions_named_by_the_failure(store: ResultStore) -> None:
    store.write_arrow(table(5), AttemptId(*RUN, P, 1))
    checker = store.checker(*RUN, unavailable=[P])
    assert not checker.is_available(P)
    assert "named unavailable" in checker.why_unavailable(P)
    assert store.checker(*RUN).is_available(P)  # marks do not persist


def test_deep_check_sees_truncated_and_missing_objects(store: ResultStore) -> None:
    manifest, _ = store.write_arrow(table(50), AttemptId(*RUN, P, 1))
    key = store.run_keys(*RUN).object_key(manifest.objects[0].key, shared=True)
    assert store.checker(*RUN, "deep").is_available(P)
    store.objects.client.put_object(Bucket="bkt", Key=key, Body=b"short")
    assert store.checker(*RUN, "fast").is_available(P)
    for probe in ("list", "head"):
        assert "bytes" in store.checker(*RUN, "deep", probe=probe).why_unavailable(P)
    store.objects.client.delete_object(Bucket="bkt", Key=key)
    assert "missing" in store.checker(*RUN, "deep").why_unavailable(P)
    with pytest.raises(NotAvailable, match="missing"):
        store.read_arrow(store.manifest(*RUN, P))


def test_checksum_mode_sees_same_size_corruption(store: ResultStore) -> None:
    manifest, _ = store.write_arrow(table(50), AttemptId(*RUN, P, 1))
    key = store.run_keys(*RUN).object_key(manifest.objects[0].key, shared=True)
    store.objects.client.put_object(Bucket="bkt", Key=key, Body=b"\0" * manifest.objects[0].size)
    assert store.checker(*RUN, "deep").is_available(P)
    assert not store.checker(*RUN, "deep", verify_checksums=True).is_available(P)


def test_release_refused_while_unfinished_or_held(store: ResultStore) -> None:
    store.write_arrow(table(5), AttemptId(*RUN, P, 1))
    with pytest.raises(ReleaseRefused, match="not finished"):
        release(store, *RUN, run_finished=False)
    lifecycle.hold(store.objects, store.run_keys(*RUN), "restart-1", "pending restart")
    with pytest.raises(ReleaseRefused, match="held by restart-1"):
        release(store, *RUN)
    lifecycle.unhold(store.objects, store.run_keys(*RUN), "restart-1")
    assert release(store, *RUN) > 0
    assert not store.checker(*RUN).is_available(P)

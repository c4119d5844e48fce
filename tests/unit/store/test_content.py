"""Content-addressed puts upload nothing for bytes already stored; the committer confirms shared objects (missing ->
nothing committed, stale -> refreshed without sending bytes) — on moto's in-memory S3."""

from __future__ import annotations

import hashlib
import time

import pytest

from airflow_region_failover.exceptions import IncompleteCommit
from airflow_region_failover.store import content
from airflow_region_failover.store.content import Tally, confirm_shared, put_content
from airflow_region_failover.store.result_store import ResultStore

MiB = 1024 * 1024


def test_a_second_put_of_the_same_bytes_uploads_nothing(store: ResultStore) -> None:
    first = put_content(store.objects, store.layout, b"x" * 1000, 3)
    second = put_content(store.objects, store.layout, bytearray(b"x" * 1000), 3)
    assert first.uploaded and not second.uploaded and first.entry == second.entry
    assert first.entry.sha256 == hashlib.sha256(b"x" * 1000).hexdigest() and first.entry.subpartition == 3
    assert store.objects.get(store.layout.cas_object(first.entry.sha256)) == b"x" * 1000
    tally = Tally().add(first).add(second)
    assert tally.describe() == "uploaded 1000 of 2000 bytes (1 of 2 objects new)"


def sha256_kept(store: ResultStore, key: str) -> tuple[int, str | None] | None:
    """``key``'s size and the SHA-256 S3 keeps with it (``None``: missing)."""
    found = store.objects.stat(key)
    return None if found is None else (found.size, found.sha256)


def test_a_body_larger_than_a_single_put_goes_up_as_a_multipart_upload_once(store: ResultStore,
                                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(content, "SINGLE_PUT_BYTES", 5 * MiB)
    body = bytes(range(256)) * (6 * MiB // 256)
    first = put_content(store.objects, store.layout, body, part_size=5 * MiB)
    second = put_content(store.objects, store.layout, body, part_size=5 * MiB)
    assert first.uploaded and not second.uploaded
    key = store.layout.cas_object(first.entry.sha256)
    assert store.objects.head_size(key) == len(body)
    assert sha256_kept(store, key) == (len(body), None), "S3 keeps no full-object SHA-256 of a multipart"


def test_an_object_goes_up_in_one_put_carrying_its_sha256_which_s3_keeps(store: ResultStore) -> None:
    """Every object the writers cut (up to S3's single-PUT limit, even above a multipart part) is one create-only
    PUT with its SHA-256 as the S3 checksum: what Spark's own reader relies on (store/dataplane/reading.py)."""
    body = bytes(range(256)) * (20 * MiB // 256)
    stored = put_content(store.objects, store.layout, body, part_size=5 * MiB)
    key = store.layout.cas_object(stored.entry.sha256)
    assert stored.uploaded and sha256_kept(store, key) == (len(body), hashlib.sha256(body).hexdigest())
    assert sha256_kept(store, store.layout.cas_object("0" * 64)) is None
    assert store.objects.freshen(key) and sha256_kept(store, key) == (len(body), stored.entry.sha256)


def test_confirming_refreshes_a_stale_object_and_refuses_a_missing_one(store: ResultStore) -> None:
    stale = put_content(store.objects, store.layout, b"old").entry
    key = store.layout.cas_object(stale.sha256)
    before = store.objects.head(key)
    assert before is not None
    time.sleep(2.1)
    checked = confirm_shared(store.objects, store.layout, (stale,), "p", min_grace_seconds=2.0)
    after = store.objects.head(key)
    assert after is not None and after.modified > before.modified and checked <= time.time()
    assert store.objects.get(key) == b"old"
    store.objects.delete([key])
    with pytest.raises(IncompleteCommit, match="missing"):
        confirm_shared(store.objects, store.layout, (stale,), "p", min_grace_seconds=2.0)


def test_a_fresh_object_is_not_refreshed(store: ResultStore) -> None:
    fresh = put_content(store.objects, store.layout, b"new").entry
    key = store.layout.cas_object(fresh.sha256)
    before = store.objects.head(key)
    time.sleep(1.1)
    confirm_shared(store.objects, store.layout, (fresh,), "p", min_grace_seconds=3600.0)
    assert store.objects.head(key) == before

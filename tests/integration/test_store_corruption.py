"""A wrong object under a content-addressed key heals on a real S3 server (SeaweedFS, which keeps the SHA-256 a
PUT sends, refuses a body that does not match it and returns it on a HEAD with ``ChecksumMode``): the deep check
sees a stored SHA-256 that disagrees, a reader moves the object aside and names the partition, and one producer
restart writes it again for every run that lists it; a plain PUT over an object is replaced by the next writer.

    producer#0 ==> r#0 (one shared object, listed by runs r1 and r2) ==> consumers
"""

from __future__ import annotations

import base64
import hashlib
import secrets
from typing import Any

import pyarrow as pa
import pytest

from airflow_region_failover.exceptions import NotAvailable
from airflow_region_failover.graph.ids import PartitionId
from airflow_region_failover.standalone.seaweedfs import S3Endpoint
from airflow_region_failover.store.content import put_content
from airflow_region_failover.store.keys import AttemptId
from airflow_region_failover.store.manifest import ObjectEntry
from airflow_region_failover.store.result_store import ResultStore

pytestmark = pytest.mark.integration

P = PartitionId("r", 0)
TABLE = pa.table({"x": list(range(5_000)), "s": [f"row {i}" for i in range(5_000)]})


@pytest.fixture
def store(s3_server: S3Endpoint) -> ResultStore:
    return ResultStore.from_endpoint(s3_server.endpoint_url, s3_server.access_key, s3_server.secret_key,
                                     s3_server.bucket, prefix=f"rot-{secrets.token_hex(4)}")


def flip(store: ResultStore, entry: ObjectEntry, keep_checksum: bool) -> None:
    """One byte of the stored object flipped; ``keep_checksum``: the server keeps the SHA-256 of the flipped bytes
    (what it stores now disagrees with the object's name), else a plain PUT (the SDK's CRC32)."""
    key = store.layout.cas_object(entry.sha256)
    body = bytearray(store.objects.get(key) or b"")
    body[len(body) // 2] ^= 0x01
    extra: dict[str, Any] = {}
    if keep_checksum:
        extra["ChecksumSHA256"] = base64.b64encode(hashlib.sha256(body).digest()).decode()
    store.objects.client.put_object(Bucket=store.layout.bucket, Key=key, Body=bytes(body), **extra)


def test_the_server_keeps_each_objects_sha256_and_refuses_a_body_that_does_not_match(store: ResultStore) -> None:
    (entry,) = store.write_arrow(TABLE, AttemptId("d", "r1", P, 1))[0].objects
    found = store.objects.stat(store.layout.cas_object(entry.sha256))
    assert found is not None and found.sha256 == entry.sha256 and found.size == entry.size
    with pytest.raises(Exception, match=r"BadDigest|XAmzContentSHA256Mismatch|did not match"):
        store.objects.put_if_absent(store.layout.cas_object("0" * 64), b"other bytes", sha256="0" * 64)


def test_a_flipped_object_two_runs_list_is_found_moved_aside_and_written_again_by_one_restart(
        store: ResultStore) -> None:
    (entry,) = store.write_arrow(TABLE, AttemptId("d", "r1", P, 1))[0].objects
    assert store.write_arrow(TABLE, AttemptId("d", "r2", P, 1))[0].objects == (entry,)
    flip(store, entry, keep_checksum=True)
    for run in ("r1", "r2"):
        assert "SHA-256" in store.checker("d", run, "deep").why_unavailable(P), run
    with pytest.raises(NotAvailable) as caught:
        store.read_arrow(store.manifest("d", "r1", P))
    assert caught.value.partition == P and "is unreadable" in str(caught.value)
    quarantined = [i.key for i in store.objects.listing(store.layout.quarantine_root + "/")]
    assert [k.rsplit("/", 1)[1].split("-")[0] for k in quarantined] == [entry.sha256]
    _, tally = store.write_arrow(TABLE, AttemptId("d", "r1", P, 2))  # the producer's restart
    assert tally.new_objects == 1
    assert store.read_arrow(store.manifest("d", "r1", P)) == TABLE and store.read_arrow(store.manifest("d", "r2",
                                                                                                       P)) == TABLE
    assert store.checker("d", "r2", "deep").is_available(P)


def test_a_plain_put_over_an_object_is_replaced_by_the_next_writer(store: ResultStore) -> None:
    """The object's stored checksum is now the SDK's CRC32, not a SHA-256: the writer, who holds the bytes,
    compares the CRC32 and puts its own bytes again."""
    first = put_content(store.objects, store.layout, b"x" * 50_000)
    flip(store, first.entry, keep_checksum=False)
    again = put_content(store.objects, store.layout, b"x" * 50_000)
    assert again.uploaded and store.objects.get(store.layout.cas_object(first.entry.sha256)) == b"x" * 50_000
    found = store.objects.stat(store.layout.cas_object(first.entry.sha256))
    assert found is not None and found.sha256 == first.entry.sha256

"""A wrong object under a content-addressed key heals instead of poisoning every run that lists it: a reader that
finds other bytes (or another size) quarantines the object and names the partition, the next put of those bytes
writes them again, a put or a commit that finds other bytes under its hash replaces them, and the deep check sees a
stored SHA-256 that disagrees — on moto's in-memory S3, which keeps no SHA-256 for a PUT that sends one (a
server that keeps none: the writer compares the CRC32 a plain PUT over its object left, the reader hashes).

    producer#0 ==> r#0 (one shared object, listed by runs r1 and r2) ==> consumers
"""

from __future__ import annotations

import base64
import hashlib
from typing import Any

import pyarrow as pa
import pytest

from airflow_region_failover.exceptions import NotAvailable
from airflow_region_failover.graph.ids import PartitionId
from airflow_region_failover.store.availability import Mode
from airflow_region_failover.store.content import put_content
from airflow_region_failover.store.keys import AttemptId
from airflow_region_failover.store.manifest import ObjectEntry
from airflow_region_failover.store.result_store import ResultStore

P = PartitionId("r", 0)
TABLE = pa.table({"x": list(range(2_000)), "s": [f"row {i}" for i in range(2_000)]})


def replace_behind_the_store(store: ResultStore, entry: ObjectEntry, body: bytes) -> None:
    """Put ``body`` under ``entry``'s shared key as a person or a buggy tool would (a plain PUT: the SDK sends,
    and the server keeps, its CRC32)."""
    store.objects.client.put_object(Bucket=store.layout.bucket, Key=store.layout.cas_object(entry.sha256), Body=body)


def keeps_checksums(store: ResultStore) -> None:
    """Answer a HEAD asking for checksums with the SHA-256 of the stored bytes, as SeaweedFS and AWS do for an
    object put with one (moto keeps none for it)."""
    client = store.objects.client

    def remember(params: dict[str, Any], context: dict[str, Any], **_: Any) -> None:
        context["key"] = params["Key"]

    def answer(parsed: dict[str, Any], context: dict[str, Any], **_: Any) -> None:
        if "ContentLength" in parsed:
            body = client.get_object(Bucket=store.layout.bucket, Key=context["key"])["Body"].read()
            parsed["ChecksumSHA256"] = base64.b64encode(hashlib.sha256(body).digest()).decode()

    client.meta.events.register("before-parameter-build.s3.HeadObject", remember)
    client.meta.events.register("after-call.s3.HeadObject", answer)


def flipped(store: ResultStore, entry: ObjectEntry) -> bytes:
    body = bytearray(store.objects.get(store.layout.cas_object(entry.sha256)) or b"")
    body[len(body) // 2] ^= 0x01
    return bytes(body)


def test_a_flipped_byte_fails_the_read_naming_the_partition_and_the_producer_restart_heals_it(
        store: ResultStore) -> None:
    """Two runs list the object; a read after the flip fails naming the partition (not only the object) and
    moves the object aside, so the producer's restart uploads it again (0 bytes before the fix, the same bad
    object listed again) and both runs read the right rows."""
    first, _ = store.write_arrow(TABLE, AttemptId("d", "r1", P, 1))
    store.write_arrow(TABLE, AttemptId("d", "r2", P, 1))
    (entry,) = first.objects
    replace_behind_the_store(store, entry, flipped(store, entry))
    with pytest.raises(NotAvailable) as caught:
        store.read_arrow(store.manifest("d", "r1", P))
    assert getattr(caught.value, "partition", None) == P and str(P) in str(caught.value), caught.value
    assert store.objects.head(store.layout.cas_object(entry.sha256)) is None, "the bad object was not quarantined"
    _, tally = store.write_arrow(TABLE, AttemptId("d", "r1", P, 2))
    assert (tally.new_objects, tally.new_bytes) == (1, entry.size), tally
    assert store.read_arrow(store.manifest("d", "r1", P)) == TABLE and store.read_arrow(store.manifest("d", "r2",
                                                                                                       P)) == TABLE


def test_a_truncated_object_is_replaced_by_the_next_commit_instead_of_failing_every_retry(store: ResultStore) -> None:
    """Before the fix every commit listing the truncated object raised IncompleteCommit, retries included."""
    (entry,) = store.write_arrow(TABLE, AttemptId("d", "r1", P, 1))[0].objects
    truncated = (store.objects.get(store.layout.cas_object(entry.sha256)) or b"")[:-100]
    replace_behind_the_store(store, entry, truncated)
    _, tally = store.write_arrow(TABLE, AttemptId("d", "r1", P, 2))
    assert tally.new_objects == 1 and store.read_arrow(store.manifest("d", "r1", P)) == TABLE


def test_a_put_that_finds_other_bytes_under_its_hash_stores_its_own(store: ResultStore) -> None:
    """The 412 of a create-only PUT is not taken as "already there" before what is there was checked: other
    bytes of the same size are replaced (the one before was kept, and every reader failed on it)."""
    first = put_content(store.objects, store.layout, b"x" * 5000)
    replace_behind_the_store(store, first.entry, b"y" * 5000)
    again = put_content(store.objects, store.layout, b"x" * 5000)
    assert again.uploaded and store.objects.get(store.layout.cas_object(first.entry.sha256)) == b"x" * 5000


def test_the_deep_check_finds_an_object_whose_stored_sha256_disagrees_with_its_manifest(store: ResultStore) -> None:
    """Sizes alone said "available" (a one-byte flip keeps the size); the SHA-256 the server keeps with the
    object now counts, and only a partition listing it is unavailable."""
    (entry,) = store.write_arrow(TABLE, AttemptId("d", "r1", P, 1))[0].objects
    store.write_arrow(pa.table({"x": [1]}), AttemptId("d", "r1", PartitionId("r", 1), 1))
    replace_behind_the_store(store, entry, flipped(store, entry))
    keeps_checksums(store)
    checker = store.checker("d", "r1", Mode.DEEP)
    assert "SHA-256" in checker.why_unavailable(P)
    assert checker.is_available(PartitionId("r", 1))

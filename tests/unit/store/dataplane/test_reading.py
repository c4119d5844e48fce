"""Before Spark's own reader reads a committed version, every object's size and the SHA-256 S3 keeps with it are
checked against the manifest (store/dataplane/reading.py): a replaced or missing object is refused naming the partition;
an object S3 keeps no SHA-256 for sends the read to the Python path, which hashes it — on moto's in-memory S3."""

from __future__ import annotations

import pyarrow as pa
import pytest

from airflow_region_failover.exceptions import NotAvailable
from airflow_region_failover.graph.ids import PartitionId
from airflow_region_failover.store.dataplane.reading import stored_checksums_match
from airflow_region_failover.store.keys import AttemptId
from airflow_region_failover.store.result_store import ResultStore

P = PartitionId("orders->join", 3)


def test_stored_checksums_are_checked_before_a_jvm_read(store: ResultStore) -> None:
    manifest, _ = store.write_arrow(pa.table({"x": list(range(1000))}), AttemptId("etl", "run", P, 1))
    [entry] = manifest.objects
    key = store.layout.cas_object(entry.sha256)
    assert stored_checksums_match(store.objects, manifest, manifest.objects)
    body = store.objects.get(key)
    assert body is not None
    other = bytes(b ^ 0xFF for b in body)  # same size, other bytes, uploaded with their own SHA-256
    store.objects.client.put_object(Bucket="bkt", Key=key, Body=other, ChecksumAlgorithm="SHA256")
    with pytest.raises(NotAvailable, match=r"orders->join#3 is unreadable: object .* holds other bytes"):
        stored_checksums_match(store.objects, manifest, manifest.objects)
    assert store.objects.head_size(key) is None, "the wrong shared object is moved aside (quarantined)"
    store.objects.client.put_object(Bucket="bkt", Key=key, Body=other)  # no SHA-256 kept: only hashing can tell
    assert not stored_checksums_match(store.objects, manifest, manifest.objects)
    store.objects.client.put_object(Bucket="bkt", Key=key, Body=other[:-1], ChecksumAlgorithm="SHA256")
    with pytest.raises(NotAvailable, match=r"has \d+ bytes, its manifest says \d+"):
        stored_checksums_match(store.objects, manifest, manifest.objects)
    store.objects.delete([key])
    with pytest.raises(NotAvailable, match=r"orders->join#3 is unreadable: object .* is missing"):
        stored_checksums_match(store.objects, manifest, manifest.objects)


def test_an_object_changed_after_the_check_is_named_when_sparks_reader_fails_on_it(store: ResultStore) -> None:
    """The stored-checksum check runs when the read is defined; Spark reads later. An object replaced in between
    makes Spark's reader fail naming only its file (``FAILED_READ_FILE ... s3a://.../cas/v1/..``): that object is
    hashed, found wrong, moved aside and the partition named, so the failover loop restarts its producer (the
    e2e heal test read through the JVM first failed here with Spark's bare error, and took two decisions)."""
    manifest, _ = store.write_arrow(pa.table({"x": list(range(1000))}), AttemptId("etl", "run", P, 1))
    [entry] = manifest.objects
    key = store.layout.cas_object(entry.sha256)
    spark_error = f"[FAILED_READ_FILE.NO_HINT] Encountered error while reading file s3a://bkt/{key}.  SQLSTATE: KD001"
    store.recheck_named([manifest], spark_error)  # the object is right: the error was something else
    store.recheck_named([manifest], "Py4JNetworkError: Answer from Java side is empty")  # names no object
    body = store.objects.get(key)
    assert body is not None
    store.objects.client.put_object(Bucket="bkt", Key=key, Body=bytes(b ^ 0x01 for b in body))
    with pytest.raises(NotAvailable, match=r"orders->join#3 is unreadable: object .* does not match the SHA-256"):
        store.recheck_named([manifest], spark_error)
    assert store.objects.head_size(key) is None, "moved aside: the producer's restart writes it again"


def test_an_object_replaced_while_spark_read_it_is_found_before_the_commit(store: ResultStore) -> None:
    """Spark's own reader reads when the job runs, after the stored SHA-256 was checked: a byte flipped in between
    may decode without error (a Spark-written file did, and a consumer committed sums of other rows — the heal
    e2e). Before the commit, every object a JVM read took must still carry its SHA-256, or hash to it."""
    from airflow_region_failover.store.dataplane.reading import JvmRead

    manifest, _ = store.write_arrow(pa.table({"x": list(range(1000))}), AttemptId("etl", "run", P, 1))
    [entry] = manifest.objects
    key = store.layout.cas_object(entry.sha256)
    read = JvmRead(manifest, manifest.objects)
    store.confirm_unchanged([read])  # unchanged: nothing raised
    body = store.objects.get(key)
    assert body is not None
    other = bytes(b ^ 0x01 for b in body)
    store.objects.client.put_object(Bucket="bkt", Key=key, Body=other, ChecksumAlgorithm="SHA256")
    with pytest.raises(NotAvailable, match=r"orders->join#3 is unreadable: .* \(found after Spark read it\)"):
        store.confirm_unchanged([read])
    assert store.objects.head_size(key) is None, "moved aside: the producer's restart writes it again"
    store.objects.client.put_object(Bucket="bkt", Key=key, Body=other)  # no SHA-256 kept: hashing tells
    with pytest.raises(NotAvailable, match=r"orders->join#3 is unreadable: .* does not match the SHA-256"):
        store.confirm_unchanged([read])

"""The trust boundary of Spark's own reader, and the verified mode that moves it: the JVM read trusts the SHA-256
the server keeps with an object (HEADed before it reads), never the bytes it is served; with
``store_verify_jvm_reads`` a thread streams and hashes every object it read, and before the commit an object that
does not hash to its name fails the try naming the partition and the object, and is moved aside (it heals). On
moto, whose HEAD here answers the SHA-256 the object was stored with while it serves other bytes of the same size
(a server whose disk went bad under its kept checksum).

    producer#0 ==> orders->join#3 (one shared object: stored checksum right, bytes wrong) ==> JVM reader
"""

from __future__ import annotations

import base64
import threading
from typing import Any

import pyarrow as pa
import pytest

from airflow_region_failover.exceptions import NotAvailable
from airflow_region_failover.graph.ids import PartitionId
from airflow_region_failover.store.dataplane.reading import confirm_unchanged, jvm_read
from airflow_region_failover.store.keys import AttemptId
from airflow_region_failover.store.manifest import Manifest
from airflow_region_failover.store.result_store import ResultStore

P = PartitionId("orders->join", 3)


def served_wrong_under_its_checksum(store: ResultStore) -> tuple[Manifest, str]:
    """A committed object whose bytes are then flipped behind the store while every HEAD still answers the
    SHA-256 its name records."""
    manifest = store.write_arrow(pa.table({"x": list(range(1000))}), AttemptId("etl", "run", P, 1))[0]
    [entry] = manifest.objects
    key = store.layout.cas_object(entry.sha256)
    body = store.objects.get(key) or b""
    store.objects.client.put_object(Bucket="bkt", Key=key, Body=bytes(b ^ 0x01 for b in body))
    kept = base64.b64encode(bytes.fromhex(entry.sha256)).decode()

    def claim(parsed: dict[str, Any], **_: Any) -> None:
        if "ContentLength" in parsed:
            parsed.update(ChecksumSHA256=kept, ChecksumType="FULL_OBJECT")

    store.objects.client.meta.events.register("after-call.s3.HeadObject", claim)
    return manifest, key


def test_unverified_a_jvm_read_trusts_the_checksum_the_server_keeps(store: ResultStore) -> None:
    """The documented boundary (store_verify_jvm_reads = False): nothing finds bytes the server serves wrong under
    a right stored checksum."""
    manifest, _ = served_wrong_under_its_checksum(store)
    read = jvm_read(store.objects, manifest, manifest.objects, verify=False)
    assert read.hashing is None
    confirm_unchanged(store.objects, [read])


def test_verified_the_bytes_are_hashed_in_a_thread_and_a_wrong_object_fails_the_try_and_is_moved_aside(
        store: ResultStore) -> None:
    manifest, key = served_wrong_under_its_checksum(store)
    hashed_in: list[str] = []
    original = store.objects.chunks

    def chunks(key: str, body: Any) -> Any:
        hashed_in.append(threading.current_thread().name)
        return original(key, body)

    store.objects.chunks = chunks  # type: ignore[method-assign]
    read = jvm_read(store.objects, manifest, manifest.objects, verify=True)
    assert read.hashing is not None
    with pytest.raises(NotAvailable, match=r"orders->join#3 is unreadable: object \S+ listed in its manifest does "
                                           r"not match the SHA-256 in its manifest \(the bytes Spark's reader") as err:
        confirm_unchanged(store.objects, [read])
    assert key in str(err.value) and getattr(err.value, "partition", None) == P
    assert hashed_in and all(name != threading.current_thread().name for name in hashed_in), hashed_in
    assert store.objects.head_size(key) is None, "moved aside: the producer's restart writes it again"


def test_verified_an_intact_read_confirms(store: ResultStore) -> None:
    manifest = store.write_arrow(pa.table({"x": list(range(100))}), AttemptId("etl", "run", P, 1))[0]
    confirm_unchanged(store.objects, [jvm_read(store.objects, manifest, manifest.objects, verify=True)])

"""An object the server lists and HEADs correctly but cannot serve (every GET answered 5xx, e.g. a self-hosted
server that finds a disk CRC error on read) heals like a lost one: the reader names the partition and marks the
object suspect, the deep check counts it lost, and the producer's restart overwrites it (bytes that hash to the
name are always safe to overwrite) — on the Python reader and on the JVM path's recheck of the object Spark's
reader named. On moto's in-memory S3, with GETs of one key answered 500 until that key is PUT again.

    producer#0 ==> r#0 (one shared object, GET 500) ==> consumer
"""

from __future__ import annotations

from typing import Any

import pyarrow as pa
import pytest

from airflow_region_failover.exceptions import NotAvailable, unreadable_in
from airflow_region_failover.graph.ids import PartitionId
from airflow_region_failover.store.availability import Mode
from airflow_region_failover.store.keys import AttemptId
from airflow_region_failover.store.result_store import ResultStore
from airflow_region_failover.store.s3.clients import client_for

P = PartitionId("r", 0)
TABLE = pa.table({"x": list(range(500))})


class _Status:
    status_code = 500
    headers: dict[str, str] = {}
    content = b""


def fail_gets(store: ResultStore, key: str) -> list[str]:
    """Answer every GET of ``key`` with 500 InternalError (after botocore's retries, as a server with a bad disk
    would) until ``key`` is PUT again; returns the GETs failed."""
    failed: list[str] = []
    healed: list[bool] = []

    def remember(params: dict[str, Any], context: dict[str, Any], **_: Any) -> None:
        context["key"] = params.get("Key")

    def get(context: dict[str, Any], **_: Any) -> Any:
        if context.get("key") != key or healed:
            return None
        failed.append(key)
        return _Status(), {"Error": {"Code": "InternalError", "Message": "We encountered an internal error."},
                           "ResponseMetadata": {"HTTPStatusCode": 500}}

    def put(params: dict[str, Any], **_: Any) -> None:
        if params.get("Key") == key and "IfNoneMatch" not in params:
            healed.append(True)

    writers = client_for(store.config.access)  # the client the writers' targets use
    for client in {id(c): c for c in (store.objects.client, writers)}.values():
        client.meta.events.register("before-parameter-build.s3.GetObject", remember)
        client.meta.events.register("before-call.s3.GetObject", get)
        client.meta.events.register("before-parameter-build.s3.PutObject", put)
    return failed


def test_an_object_every_get_fails_is_named_marked_counted_lost_and_rewritten_by_the_restart(
        store: ResultStore) -> None:
    """Before the fix: the read raised a raw ClientError naming no partition, the deep check said available, and
    the restart uploaded 0 objects (its create-only PUT got 412 and the HEAD matched)."""
    (entry,) = store.write_arrow(TABLE, AttemptId("d", "r1", P, 1))[0].objects
    key = store.layout.cas_object(entry.sha256)
    failed = fail_gets(store, key)
    with pytest.raises(NotAvailable) as caught:
        store.read_arrow(store.manifest("d", "r1", P))
    assert getattr(caught.value, "partition", None) == P and key in str(caught.value), caught.value
    assert failed, "the fault was not injected"
    why = store.checker("d", "r1", Mode.DEEP).why_unavailable(P)
    assert key in why and "suspect" in why, why
    _, tally = store.write_arrow(TABLE, AttemptId("d", "r1", P, 2))
    assert (tally.new_objects, tally.new_bytes) == (1, entry.size), tally
    assert store.read_arrow(store.manifest("d", "r1", P)) == TABLE
    assert store.checker("d", "r1", Mode.DEEP).why_unavailable(P) == ""


def test_the_restart_overwrites_an_unservable_object_even_without_a_suspect_mark(store: ResultStore) -> None:
    """A reader that could not leave its mark (or a writer first to find it): the HEAD matches, a GET fails, so the
    put writes the bytes again instead of reusing them."""
    (entry,) = store.write_arrow(TABLE, AttemptId("d", "r1", P, 1))[0].objects
    fail_gets(store, store.layout.cas_object(entry.sha256))
    _, tally = store.write_arrow(TABLE, AttemptId("d", "r2", P, 1))
    assert (tally.new_objects, tally.new_bytes) == (1, entry.size), tally
    assert store.read_arrow(store.manifest("d", "r1", P)) == TABLE


def test_an_object_spark_could_not_get_is_named_by_its_recheck(store: ResultStore) -> None:
    """The JVM path: Spark's reader fails on the object (its error names the file); the recheck's GET fails too,
    so the partition is named and the object marked suspect (before the fix: a raw ClientError)."""
    manifest = store.write_arrow(TABLE, AttemptId("d", "r1", P, 1))[0]
    key = store.layout.cas_object(manifest.objects[0].sha256)
    fail_gets(store, key)
    spark_error = f"org.apache.hadoop.fs.s3a.AWSStatus500Exception: getObject on s3a://{store.layout.bucket}/{key}"
    with pytest.raises(NotAvailable) as caught:
        store.recheck_named([manifest], spark_error)
    found = unreadable_in(str(caught.value))
    assert found is not None and found[0] == P, caught.value
    assert "suspect" in store.checker("d", "r1", Mode.DEEP).why_unavailable(P)

"""A manifest PUT that landed but whose response was lost: botocore retries it, the retry gets 412, and the writer
must recognise its own commit instead of deleting the data its committed manifest lists (moto, in-process)."""

from __future__ import annotations

from typing import Any

import boto3
import pyarrow as pa
import pytest
from botocore.exceptions import ConnectionClosedError

from airflow_region_failover.exceptions import AlreadyCommitted
from airflow_region_failover.graph.ids import PartitionId
from airflow_region_failover.store import commit as protocol
from airflow_region_failover.store.keys import AttemptId
from airflow_region_failover.store.result_store import ResultStore

P = PartitionId("clean->join", 0)
RUN = ("etl", "manual__1")


def lose_the_first_manifest_response(store: ResultStore) -> list[str]:
    """The first conditional PUT of a manifest reaches S3 (through a second client) and then the connection
    drops before the response: botocore retries the same request, which now gets 412."""
    other = boto3.client("s3", region_name="us-east-1")
    pending: dict[str, Any] = {}
    landed: list[str] = []

    def remember(params: dict[str, Any], **_: Any) -> None:
        pending.update(params)

    def land_then_drop(request: Any, **_: Any) -> None:
        key = pending.get("Key", "")
        if "/manifests/" in key and pending.get("IfNoneMatch") == "*" and not landed:
            other.put_object(Bucket=pending["Bucket"], Key=key, Body=pending["Body"], IfNoneMatch="*")
            landed.append(key)
            raise ConnectionClosedError(endpoint_url=request.url)

    events = store.objects.client.meta.events
    events.register_first("provide-client-params.s3.PutObject", remember)
    events.register_first("before-send.s3.PutObject", land_then_drop)
    return landed


def test_a_retried_commit_that_had_landed_returns_the_commit_and_keeps_the_data(store: ResultStore) -> None:
    landed = lose_the_first_manifest_response(store)

    manifest, _ = store.write_arrow(pa.table({"x": list(range(7))}), AttemptId(*RUN, P, 1))

    assert landed == [store.run_keys(*RUN).manifest(P, 1)]  # the response of the landed PUT was lost
    assert store.manifest(*RUN, P) == manifest
    assert store.read_arrow(manifest).column("x").to_pylist() == list(range(7))  # its data is still there
    assert store.is_available(*RUN, P, "deep", verify_checksums=True)


def test_another_writers_commit_still_wins(store: ResultStore) -> None:
    keys = store.run_keys(*RUN)
    first, _ = store.write_arrow(pa.table({"x": [1]}), AttemptId(*RUN, P, 1))
    rival = first.__class__(**{**first.__dict__, "writer": "ffffffff"})
    with pytest.raises(AlreadyCommitted, match="that commit stands"):
        protocol.commit(store.objects, keys, rival)
    same_writer_other_objects = first.__class__(**{**first.__dict__, "objects": (), "content_checksum": ""})
    with pytest.raises(AlreadyCommitted, match="that commit stands"):
        protocol.commit(store.objects, keys, same_writer_other_objects)

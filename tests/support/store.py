"""Test helpers on the result store for what the product does only inside a larger step: read the retirement
markers an attempt's *begin* wrote, and release one run (what retention does to the runs it no longer keeps); a
store on moto's in-memory S3 for unit tests, and a counter of the HEADs a client sends."""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Iterator
from typing import Any

from airflow_region_failover.graph.ids import PartitionId
from airflow_region_failover.standalone.seaweedfs import S3Endpoint
from airflow_region_failover.store import commit as protocol
from airflow_region_failover.store.config import StoreConfig
from airflow_region_failover.store.gc import lifecycle
from airflow_region_failover.store.manifest import Retirement
from airflow_region_failover.store.result_store import ResultStore
from airflow_region_failover.store.s3.clients import S3Access


def retirements(store: ResultStore, dag_id: str, run_id: str, partition: PartitionId) -> tuple[Retirement, ...]:
    """Every retirement marker of ``partition`` in the run, oldest attempt first."""
    keys = store.run_keys(dag_id, run_id)
    markers = []
    for attempt in sorted(protocol.state_of(store.objects, keys, partition).retired):
        key = keys.retired(partition, attempt)
        data = store.objects.get(key)
        if data is not None:
            markers.append(Retirement.from_json(data, where=key))
    return tuple(markers)


def release(store: ResultStore, dag_id: str, run_id: str, **conditions: Any) -> int:
    """Release one run as retention does (:func:`.lifecycle.release_run`; both conditions default to met);
    returns the number of keys deleted, :class:`ReleaseRefused` naming why it may still be needed."""
    conditions = {"run_finished": True, "consumers_done": True, **conditions}
    return lifecycle.release_run(store.objects, store.run_keys(dag_id, run_id), **conditions)


@contextlib.contextmanager
def moto_store() -> Iterator[ResultStore]:
    """A result store on moto's in-memory S3 (bucket ``bkt``, prefix ``pre``), for as long as the block lasts."""
    import boto3
    from moto import mock_aws

    with mock_aws():
        client = boto3.client("s3", region_name="us-east-1")
        client.create_bucket(Bucket="bkt")
        yield ResultStore(StoreConfig("bkt", "pre", S3Access()), client=client)


class HeadCounter:
    """Counts the HEADs a client sends and the most in flight at once (each held a moment, so overlap shows)."""

    def __init__(self, client: Any) -> None:
        self.sent = 0
        self.in_flight = 0
        self.most = 0
        self._lock = threading.Lock()
        client.meta.events.register("before-call.s3.HeadObject", self.before)
        client.meta.events.register("after-call.s3.HeadObject", self.after)

    def before(self, **_: Any) -> None:
        with self._lock:
            self.sent += 1
            self.in_flight += 1
            self.most = max(self.most, self.in_flight)
        time.sleep(0.02)

    def after(self, **_: Any) -> None:
        with self._lock:
            self.in_flight -= 1


def on_server(endpoint: S3Endpoint, prefix: str, **tuning: Any) -> ResultStore:
    """A result store on a real S3 server (the ``s3_server`` fixture's SeaweedFS) under ``prefix``."""
    return ResultStore.from_endpoint(endpoint.endpoint_url, endpoint.access_key, endpoint.secret_key,
                                     endpoint.bucket, prefix=prefix, **tuning)

"""Reading a committed object holds it in memory about once (SeaweedFS on loopback: a real HTTP body stream).

The body is streamed into one buffer while it is hashed and decoded from that buffer without a copy; Arrow's own
allocations (the decoded table) are outside Python's allocator and not counted by ``tracemalloc``. The peak is
measured in a child process (:mod:`tests.support.peak_memory` says why: ``tracemalloc.stop()`` is not safe here).
"""

from __future__ import annotations

import os
import secrets

import pyarrow as pa
import pytest

from airflow_region_failover.graph.ids import PartitionId
from airflow_region_failover.standalone.seaweedfs import S3Endpoint
from airflow_region_failover.store.keys import AttemptId
from airflow_region_failover.store.result_store import ResultStore
from tests.support.peak_memory import PeakRead, peak_in_child

pytestmark = pytest.mark.integration

P = PartitionId("orders->join", 0)
MiB = 1024 * 1024


def peak_read(server: S3Endpoint, store: ResultStore, run_id: str) -> tuple[pa.Table, int]:
    """Partition :data:`P` of run ``run_id`` of DAG ``etl`` read here (the table), and the peak of Python's
    allocations while a child process reads it once more after a warm-up."""
    config = store.config
    peak = peak_in_child(PeakRead(server.endpoint_url, server.access_key, server.secret_key, server.bucket,
                                  config.prefix, config.part_size, config.upload_threads, run_id))
    return store.read_arrow(store.manifest("etl", run_id, P)), peak


def test_read_arrow_holds_an_object_in_memory_about_once(s3_server: S3Endpoint) -> None:
    store = ResultStore.from_endpoint(s3_server.endpoint_url, s3_server.access_key, s3_server.secret_key,
                                      s3_server.bucket, prefix=f"mem-{secrets.token_hex(4)}", part_size=5 * MiB,
                                      verify_on_read=True)
    table = pa.table({"blob": pa.array([os.urandom(1024) for _ in range(20 * 1024)], pa.binary())})
    manifest, _ = store.write_arrow(table, AttemptId("etl", "mem", P, 1))
    (entry,) = manifest.objects
    assert entry.size > 20 * MiB  # one incompressible object of ~20 MB
    read, peak = peak_read(s3_server, store, "mem")

    print(f"peak {peak / MiB:.1f} MiB, object {entry.size / MiB:.1f} MiB")
    assert read.equals(table)
    assert peak < 1.3 * entry.size, f"peak Python allocation {peak / MiB:.1f} MiB, object {entry.size / MiB:.1f} MiB"


def test_read_arrow_of_many_objects_holds_only_the_objects_in_flight(s3_server: S3Endpoint) -> None:
    from airflow_region_failover.store import commit as protocol
    from airflow_region_failover.store.dataplane import parquet, types
    from airflow_region_failover.store.manifest import Manifest

    threads, count = 2, 6
    store = ResultStore.from_endpoint(s3_server.endpoint_url, s3_server.access_key, s3_server.secret_key,
                                      s3_server.bucket, prefix=f"mem-{secrets.token_hex(4)}", part_size=5 * MiB,
                                      upload_threads=threads, verify_on_read=True)
    keys = store.run_keys("etl", "many")
    store.begin_attempt(AttemptId("etl", "many", P, 1))
    target = types.Target(store.config.access, store.layout, keys, P, 1, secrets.token_hex(8), 5 * MiB, threads)
    tables = [pa.table({"blob": pa.array([os.urandom(1024) for _ in range(4 * 1024)], pa.binary())})
              for _ in range(count)]
    written = [parquet.write_batches(target, iter(t.to_batches()), number) for number, t in enumerate(tables)]
    entries = tuple(piece.stored.entry for pieces in written for piece in pieces)
    protocol.commit(store.objects, keys, Manifest("etl", "many", P, 1, target.writer, "{}", 4 * 1024 * count,
                                                  entries, protocol.now_iso()))
    total = sum(e.size for e in entries)
    read, peak = peak_read(s3_server, store, "many")

    print(f"peak {peak / MiB:.1f} MiB, {count} objects of {total / count / MiB:.1f} MiB, {threads} threads")
    assert read.equals(pa.concat_tables(tables))
    assert peak < (threads + 1) / count * total, f"peak {peak / MiB:.1f} MiB of {total / MiB:.1f} MiB read"

"""Benchmark of content-addressed data objects and the derived shared registry (issue 13, item 5's parts):

1. A restart re-producing identical bytes: the first write of a partition vs the restart (attempt 2, same rows)
   vs a scheduled run of the same rows, in one run on one SeaweedFS server: bytes uploaded, objects new, wall time.
2. Registry derivation time for N manifests (default 10,000, each listing 1-4 shared objects, 2,500 distinct):
   ``derive_registry`` = one LIST of the results' root + every manifest GET on 16 threads; best of 3.

Usage: ``python benchmarks/bench_cas.py [--size-mb 256] [--manifests 10000]``.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import random
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pyarrow as pa

import _repo_path  # noqa: F401 - puts the repository root on sys.path
from airflow_region_failover.graph.ids import PartitionId
from airflow_region_failover.standalone.seaweedfs import SeaweedFS
from airflow_region_failover.store.gc.registry import derive_registry
from airflow_region_failover.store.key_checks import cas_name
from airflow_region_failover.store.keys import AttemptId
from airflow_region_failover.store.manifest import Manifest, ObjectEntry
from airflow_region_failover.store.result_store import ResultStore

MB = 1024 * 1024
P = PartitionId("orders->join", 0)


def generated(size_mb: int) -> pa.Table:
    rows = size_mb * MB // 80
    ids = pa.array(range(rows), pa.int64())
    payload = pa.array([hashlib.sha256(str(i).encode()).hexdigest() for i in range(rows)])
    return pa.table({"id": ids, "v": pa.array([i * 1.5 for i in range(rows)]), "h": payload})


def bench_restart(store: ResultStore, table: pa.Table) -> list[dict[str, Any]]:
    out = []
    for label, run, attempt in (("first write", "r1", 1), ("restart, same rows", "r1", 2),
                                ("next scheduled run, same rows", "r2", 1)):
        start = time.perf_counter()
        manifest, tally = store.write_arrow(table, AttemptId("etl", run, P, attempt))
        seconds = time.perf_counter() - start
        out.append({"write": label, "objects": f"{tally.new_objects}/{tally.objects}",
                    "uploaded MB": round(tally.new_bytes / MB, 1), "of MB": round(tally.bytes / MB, 1),
                    "seconds": round(seconds, 2), "checksum": manifest.content_checksum[:12]})
    return out


def seed_manifests(store: ResultStore, count: int, distinct: int) -> None:
    rng = random.Random(13)
    hashes = [hashlib.sha256(str(i).encode()).hexdigest() for i in range(distinct)]

    def put(i: int) -> None:
        run, index = f"run-{i // 100:04d}", i % 100
        objects = tuple(ObjectEntry(cas_name(h), 1000, h, shared=True) for h in rng.sample(hashes, rng.randint(1, 4)))
        manifest = Manifest("etl", run, PartitionId("orders->join", index), 1, "abcdef12", "{}", 1, objects,
                            "2026-01-01T00:00:00Z")
        keys = store.run_keys("etl", run)
        store.objects.client.put_object(Bucket=store.layout.bucket, Key=keys.manifest(manifest.partition, 1),
                                        Body=manifest.to_json())

    with ThreadPoolExecutor(max_workers=16) as pool:
        list(pool.map(put, range(count)))


def bench_registry(store: ResultStore, count: int) -> dict[str, Any]:
    seed_start = time.perf_counter()
    seed_manifests(store, count, max(4, count // 4))
    seeded = time.perf_counter() - seed_start
    times = []
    for _ in range(3):
        start = time.perf_counter()
        registry = derive_registry(store.objects, store.layout)
        times.append(time.perf_counter() - start)
    return {"manifests": registry.manifests, "distinct objects": len(registry.references),
            "references": sum(registry.references.values()), "derive best s": round(min(times), 2),
            "derive all s": [round(t, 2) for t in times], "seeding s": round(seeded, 1)}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--size-mb", type=int, default=256)
    parser.add_argument("--manifests", type=int, default=10_000)
    args = parser.parse_args()
    print(f"cpus {os.cpu_count()}, load {os.getloadavg()}", flush=True)
    with SeaweedFS(bucket="bench") as server:
        e = server.endpoint
        store = ResultStore.from_endpoint(e.endpoint_url, e.access_key, e.secret_key, e.bucket, prefix="bench-cas")
        table = generated(args.size_mb)
        for row in bench_restart(store, table):
            print("restart", json.dumps(row), flush=True)
        registry_store = ResultStore.from_endpoint(e.endpoint_url, e.access_key, e.secret_key, e.bucket,
                                                   prefix="bench-registry")
        print("registry", json.dumps(bench_registry(registry_store, args.manifests)), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

"""Benchmark of content-defined chunk files (``cluster_by``, issue 13 items 2 and 5) against plain files.

A generated result (``--size-mb`` Arrow bytes, unique int64 key spread uniformly, a few payload columns) is
persisted, then re-persisted with 0 %, 1 %, 10 % and 50 % of its rows updated (a payload column changed; rows
picked uniformly over the key, or — the ``ranges`` pattern — in 10 contiguous key ranges, one per tenth of the
key range). For each version:

* ``upload ratio`` = bytes of the files whose SHA-256 the previous version did not already store ÷ total bytes:
  exactly what a content-addressed store's create-only PUT would upload;
* objects and mean object size;
* encode wall time, side by side in the same run: **plain** = today's path (rows in the step's order, one file per
  Spark task, ``--tasks`` of them, the writer settings of ``store.parquet.write_batches``); **chunked** = sort by
  the cluster key then every column, cut at content-defined points, encode each chunk (``store.chunking``). Both
  include SHA-256 hashing; neither uploads (the Spark + S3 path is timed by ``--spark-mb``, see below).

Today's path writes run-scoped keys, so it uploads 1.0 of the result whatever changed; the ``plain`` rows show
what plain files would share under a content-addressed store (only a task file with no changed row).
``--spark-mb N`` adds one end-to-end write of an N MB DataFrame through ``ResultStore.write`` on embedded Spark +
SeaweedFS (loopback), plain vs ``clustering=``, best of 2.

Usage: ``python benchmarks/bench_chunking.py [--size-mb 1024] [--targets-mb 1,8,32] [--spark-mb 256]``.
"""

from __future__ import annotations

import argparse
import hashlib
import math
import time
from collections.abc import Iterator
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

import _repo_path  # noqa: F401 - puts the repository root on sys.path
from airflow_region_failover.store.dataplane.chunking import (
    ChunkPolicy,
    chunk_batches,
    dictionary_columns,
    encode,
    sort_order,
)
from airflow_region_failover.store.dataplane.encoding import ROW_GROUP_BYTES, row_groups
from airflow_region_failover.store.keys import AttemptId

MB = 1024 * 1024
KEY = ("key",)
SHARES = (0.0, 0.01, 0.10, 0.50)
TARGETS = {0.0: 0.02, 0.01: 0.05, 0.10: 0.15, 0.50: 0.6}
Files = dict[str, int]  # sha256 -> size


def generate(size_mb: int, seed: int = 7) -> pa.Table:
    """Rows in key order: unique int64 key with random gaps (uniform over its range), day, amount, qty, customer."""
    rng = np.random.default_rng(seed)
    probe = 48  # Arrow bytes per row of this schema, about
    n = max(1000, size_mb * MB // probe)
    key = np.cumsum(rng.integers(1, 2000, n, dtype=np.int64))
    customer = pc.binary_join_element_wise("customer-", pc.cast(pa.array(key % 1_000_003), pa.string()), "")
    return pa.table({"key": key, "day": pa.array(19_000 + key % 365, pa.int32()),
                     "amount": rng.random(n) * 1000, "qty": pa.array(rng.integers(0, 100, n), pa.int32()),
                     "customer": customer})


def updated(base: pa.Table, share: float, pattern: str, seed: int) -> pa.Table:
    """``base`` with ``share`` of its rows' ``amount`` changed: rows uniform over the key, or 10 key ranges."""
    n = base.num_rows
    count = int(n * share)
    if count == 0:
        return base
    rng = np.random.default_rng(seed)
    if pattern == "uniform":
        rows = rng.choice(n, count, replace=False)
    else:  # one range of count/10 rows at a random place inside each tenth of the key range: no overlaps
        per, tenth = count // 10, n // 10
        starts = [t * tenth + int(rng.integers(0, tenth - per + 1)) for t in range(10)]
        rows = np.concatenate([np.arange(s, s + per) for s in starts])
    amount = base.column("amount").to_numpy().copy()
    amount[rows] += 1.0
    return base.set_column(2, "amount", pa.array(amount))


def step_order(table: pa.Table, seed: int = 11) -> pa.Table:
    """The rows as a step hands them over: one fixed shuffle (the same plan every run), not key order."""
    return table.take(pa.array(np.random.default_rng(seed).permutation(table.num_rows)))


def plain_bodies(table: pa.Table, tasks: int) -> Iterator[bytes]:
    """Today's writer settings (``write_batches``): one file per Spark task of consecutive rows."""
    per = math.ceil(table.num_rows / tasks)
    for start in range(0, table.num_rows, per):
        batches = table.slice(start, per).to_batches(max_chunksize=65_536)
        sink = pa.BufferOutputStream()
        with pq.ParquetWriter(sink, batches[0].schema, compression="snappy",
                              use_dictionary=dictionary_columns(batches[0])) as writer:
            for group in row_groups(iter(batches), ROW_GROUP_BYTES):
                writer.write_table(group, row_group_size=group.num_rows)
        yield sink.getvalue().to_pybytes()


def total_sort(table: pa.Table) -> pa.Table:
    """The clustered path's order: cluster key, then every other column (``chunking.sort_order``)."""
    return table.sort_by([(c, "ascending") for c in sort_order(table.column_names, KEY)])


def chunked_bodies(ordered: pa.Table, policy: ChunkPolicy) -> Iterator[bytes]:
    """The clustered path after its sort: content-defined chunks, each encoded."""
    for chunk in chunk_batches(ordered.to_batches(max_chunksize=65_536), KEY, policy):
        yield encode(chunk)


def files_of(bodies: Iterator[bytes]) -> tuple[Files, int, float]:
    """(sha256 -> size, object count, wall seconds spent producing and hashing the bodies)."""
    start = time.perf_counter()
    files: Files = {}
    count = 0
    for body in bodies:
        files[hashlib.sha256(body).hexdigest()] = len(body)
        count += 1
    return files, count, time.perf_counter() - start


def ratio(before: Files, after: Files) -> float:
    """Bytes of ``after``'s files not in ``before`` ÷ ``after``'s bytes."""
    total = sum(after.values())
    return sum(size for sha, size in after.items() if sha not in before) / total if total else 0.0


def row(path: str, version: str, base: Files, files: Files, count: int, sort_s: float, encode_s: float
        ) -> dict[str, Any]:
    out = {"path": path, "version": version, "ratio": ratio(base, files), "objects": count,
           "mean_mb": sum(files.values()) / max(count, 1) / MB, "total_mb": sum(files.values()) / MB,
           "sort_s": sort_s, "encode_s": encode_s}
    print("  ", {k: round(v, 3) if isinstance(v, float) else v for k, v in out.items()}, flush=True)
    return out


def run_pattern(base: pa.Table, pattern: str, tasks: int, targets: list[float]) -> list[dict[str, Any]]:
    """Plain files of every version (in the step's order), then each chunk target over the sorted versions; the
    ratio of every version is against the base (the run before). The sort is timed once per version."""
    plain = f"plain ({tasks} files)"
    rows: list[dict[str, Any]] = []
    ordered: list[tuple[str, pa.Table, float]] = []
    plain_base: Files = {}
    for i, share in enumerate((None, *SHARES)):
        label = "base" if share is None else f"{share * 100:g}% {pattern}"
        shuffled = step_order(base if share is None else updated(base, share, pattern, 100 + i))
        files, count, seconds = files_of(plain_bodies(shuffled, tasks))
        if share is None:
            plain_base = files
        else:
            rows.append(row(plain, label, plain_base, files, count, 0.0, seconds))
        start = time.perf_counter()
        ordered.append((label, total_sort(shuffled), time.perf_counter() - start))
        del shuffled
    for target in targets:
        policy = ChunkPolicy(target_bytes=int(target * MB))
        chunk_base, _, _ = files_of(chunked_bodies(ordered[0][1], policy))
        for label, table, sort_s in ordered[1:]:
            files, count, seconds = files_of(chunked_bodies(table, policy))
            rows.append(row(f"chunked {target:g} MB", label, chunk_base, files, count, sort_s, seconds))
    return rows


def expected_uniform(share: float, rows_per_chunk: float) -> float:
    """Share of chunks holding at least one of ``share`` uniformly updated rows: ``1 - (1 - share) ** rows``."""
    return 1.0 - (1.0 - share) ** rows_per_chunk


def table_lines(rows: list[dict[str, Any]]) -> list[str]:
    lines = ["| path | version | upload ratio | target | met | objects | mean object MB | total MB | sort s | "
             "encode s |", "|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        target = TARGETS[float(r["version"].split("%")[0]) / 100]
        sort_s = f"{r['sort_s']:.1f}" if r["sort_s"] else "—"
        lines.append(f"| {r['path']} | {r['version']} | {r['ratio']:.3f} | ≤ {target} | "
                     f"{'yes' if r['ratio'] <= target else 'no'} | {r['objects']} | {r['mean_mb']:.2f} | "
                     f"{r['total_mb']:.0f} | {sort_s} | {r['encode_s']:.1f} |")
    return lines


def spark_write(size_mb: int, target_mb: int) -> list[str]:
    """Plain vs clustered ``ResultStore.write`` of one DataFrame on embedded Spark + SeaweedFS (best of 2)."""
    import os
    import secrets
    import sys

    from airflow_region_failover.graph.ids import PartitionId
    from airflow_region_failover.standalone.seaweedfs import SeaweedFS
    from airflow_region_failover.store.dataplane.clustered import Clustering
    from airflow_region_failover.store.result_store import ResultStore

    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    os.environ["PYSPARK_PYTHON"] = sys.executable
    from pyspark.sql import SparkSession

    spark = (SparkSession.builder.master("local[2]").config("spark.ui.enabled", "false")
             .config("spark.driver.memory", "4g").getOrCreate())
    rows = size_mb * MB // 48
    df = spark.range(0, rows, 1, 8).selectExpr(
        "id * 1000 + cast(rand(3) * 999 AS bigint) AS key", "cast(19000 + id % 365 AS int) AS day",
        "rand(5) * 1000 AS amount", "cast(rand(9) * 100 AS int) AS qty",
        "concat('customer-', cast(id % 1000003 AS string)) AS customer").cache()
    df.count()
    clustering = Clustering(KEY, ChunkPolicy(target_bytes=target_mb * MB))
    lines = []
    with SeaweedFS(bucket="bench") as server:
        e = server.endpoint
        store = ResultStore.from_endpoint(e.endpoint_url, e.access_key, e.secret_key, e.bucket,
                                          prefix=f"chunk-{secrets.token_hex(3)}")
        store.write(df.limit(1000), AttemptId("bench", "warm", PartitionId("r", 0), 1))  # python workers started
        best: dict[str, tuple[float, int, int]] = {}
        for run in range(2):
            for label, extra in (("plain", {}), ("chunked", {"clustering": clustering})):
                start = time.perf_counter()
                manifest, _ = store.write(df, AttemptId("bench", f"{label}-{run}", PartitionId("r", 0), 1), **extra)
                seconds = time.perf_counter() - start
                if label not in best or seconds < best[label][0]:
                    best[label] = (seconds, len(manifest.objects), manifest.total_bytes)
                print(f"   spark {label} run {run}: {seconds:.1f}s", flush=True)
    spark.stop()
    plain_s = best["plain"][0]
    lines += ["| path | write s (best of 2) | ÷ plain | objects | stored MB |", "|---|---|---|---|---|"]
    for label, (seconds, objects, size) in best.items():
        lines.append(f"| {label} | {seconds:.1f} | {seconds / plain_s:.2f} | {objects} | {size / MB:.0f} |")
    return lines


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--size-mb", type=int, default=1024, help="Arrow bytes of the generated result")
    parser.add_argument("--targets-mb", default="1,8,32", help="chunk targets (mean Arrow MB per chunk)")
    parser.add_argument("--tasks", type=int, default=8, help="plain path: Spark tasks = files per version")
    parser.add_argument("--patterns", default="uniform,ranges")
    parser.add_argument("--spark-mb", type=int, default=0, help="also time an end-to-end Spark + S3 write")
    parser.add_argument("--quick", action="store_true", help="tiny sizes (smoke test)")
    args = parser.parse_args(argv)
    size_mb, targets = (8, [0.25, 1.0]) if args.quick else (args.size_mb, [float(t) for t in
                                                                            args.targets_mb.split(",")])
    base = generate(size_mb)
    print(f"result: {base.num_rows} rows, {base.nbytes / MB:.0f} MB Arrow", flush=True)
    report: list[str] = []
    for pattern in [p for p in args.patterns.split(",") if p]:
        chosen = targets if pattern == "uniform" else targets[:1]
        report += [f"## {pattern} updates", "", *table_lines(run_pattern(base, pattern, args.tasks, chosen)), ""]
    report += ["## lower bound: the changed rows alone (a row-level delta file would upload about this)", "",
               "| 1 % | 10 % | 50 % |", "|---|---|---|", "| " + " | ".join(f"{p:.2f}" for p in SHARES[1:]) + " |",
               ""]
    report += ["## expected share of chunks touched by uniform updates (1 - (1 - p)^rows per chunk)", "",
               "| rows per chunk | 1 % | 10 % | 50 % |", "|---|---|---|---|"]
    for target in targets:
        per = (1 << ChunkPolicy(target_bytes=int(target * MB)).bounds(base.nbytes / base.num_rows)[0]) * 1.25
        report.append(f"| {per:.0f} ({target:g} MB) | " + " | ".join(
            f"{expected_uniform(p, per):.3f}" for p in SHARES[1:]) + " |")
    if args.spark_mb and not args.quick:
        report += ["", f"## end to end: {args.spark_mb} MB DataFrame, embedded Spark + SeaweedFS", "",
                   *spark_write(args.spark_mb, int(targets[-2] if len(targets) > 1 else targets[0]))]
    print("\n".join(report))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

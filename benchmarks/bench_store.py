"""Benchmark of the S3 result store against a real SeaweedFS server on loopback (issue 5).

Measures, in one run on one server: persisting a generated DataFrame through the store (both Spark I/O paths)
vs a raw boto3 multipart upload of the very same Parquet bytes (ratio = raw time / store time, target >= 0.8);
read-back throughput; availability-check latency (fast, deep by LIST, deep by HEAD) for 1, 100, 1,000
partitions. Usage: ``python benchmarks/bench_store.py [--size-mb 1024] [--partitions 1,100,1000]``.
"""

from __future__ import annotations

import argparse
import io
import os
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pyarrow as pa

import _repo_path  # noqa: F401 - puts the repository root on sys.path
from airflow_region_failover.graph.ids import PartitionId
from airflow_region_failover.standalone.seaweedfs import SeaweedFS
from airflow_region_failover.store.keys import AttemptId
from airflow_region_failover.store.manifest import Manifest
from airflow_region_failover.store.result_store import ResultStore

MB = 1024 * 1024
ROW_BYTES = 80  # id (8) + double (8) + 64 hex chars, as Parquet/snappy stores them (approximately)


def timed(fn: Any) -> tuple[float, Any]:
    start = time.perf_counter()
    value = fn()
    return time.perf_counter() - start, value


def cpu_snapshot() -> dict[int, tuple[str, float]]:
    """``pid -> (kind, CPU seconds)`` of this process and its children; kinds: ``python`` (the driver and Spark's
    Python workers), ``java`` (Spark's JVM), ``s3`` (the SeaweedFS server). A process's figure includes the
    children it has reaped, so a Python worker that exits mid-measurement is still counted (by its parent)."""
    import psutil

    out: dict[int, tuple[str, float]] = {}
    me = psutil.Process()
    for proc in [me, *me.children(recursive=True)]:
        try:
            name, t = proc.name(), proc.cpu_times()
        except psutil.Error:
            continue
        kind = "s3" if "weed" in name else "java" if "java" in name else "python"
        out[proc.pid] = (kind, t.user + t.system + t.children_user + t.children_system)
    return out


def timed_cpu(fn: Any) -> tuple[float, dict[str, float], Any]:
    """(wall seconds, CPU seconds by kind spent meanwhile, value)."""
    before = cpu_snapshot()
    seconds, value = timed(fn)
    spent = {"python": 0.0, "java": 0.0, "s3": 0.0}
    for pid, (kind, total) in cpu_snapshot().items():
        spent[kind] += total - before.get(pid, (kind, 0.0))[1]
    return seconds, spent, value


def spark_session(cores: int) -> Any:
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    os.environ["PYSPARK_PYTHON"] = sys.executable
    from pyspark.sql import SparkSession

    return (SparkSession.builder.master(f"local[{cores}]").config("spark.ui.enabled", "false")
            .config("spark.driver.memory", "6g")
            .config("spark.driver.maxResultSize", "4g").config("spark.sql.execution.arrow.maxRecordsPerBatch", "65536")
            .getOrCreate())


def generated(spark: Any, size_mb: int, partitions: int) -> Any:
    rows = size_mb * MB // ROW_BYTES
    df = spark.range(0, rows, 1, partitions).selectExpr("id", "rand(7) AS v", "sha2(cast(id AS string), 256) AS h")
    df = df.cache()
    df.count()
    return df


def raw_upload(store: ResultStore, manifest: Manifest, threads: int) -> tuple[float, dict[str, float], int]:
    """Upload the store's own Parquet bytes again with boto3's managed multipart transfer (same client, part size
    and concurrency as the store); returns (s, CPU s by kind, bytes)."""
    from boto3.s3.transfer import TransferConfig

    keys = store.run_keys(manifest.dag_id, manifest.run_id)
    client = store.objects.client
    bodies = [client.get_object(Bucket=store.layout.bucket, Key=keys.object_key(o.key, o.shared))["Body"].read()
              for o in manifest.objects]
    config = TransferConfig(multipart_threshold=store.config.part_size, multipart_chunksize=store.config.part_size,
                            max_concurrency=store.config.upload_threads)

    def put(pair: tuple[int, bytes]) -> None:
        client.upload_fileobj(io.BytesIO(pair[1]), store.layout.bucket,
                              f"{store.layout.root}/raw-bench/obj-{pair[0]:05d}", Config=config)

    seconds, cpu, _ = timed_cpu(lambda: list(ThreadPoolExecutor(threads).map(put, enumerate(bodies))))
    return seconds, cpu, sum(len(b) for b in bodies)


def warm_workers(spark: Any, store: ResultStore, cores: int) -> float:
    """Start Spark's Python workers and their boto3 clients once (a long-lived cluster has them warm)."""
    access = store.config.access

    def warm(batches: Any) -> Any:
        from airflow_region_failover.store.s3.clients import client_for

        client_for(access)
        for _ in batches:
            pass
        return iter([])

    seconds, _ = timed(lambda: spark.range(0, cores * 4, 1, cores * 4).mapInArrow(warm, "x long").collect())
    return seconds


def bench_references(spark: Any, df: Any, tmp: str) -> dict[str, float]:
    """Floors for any Python-side path: Spark -> Arrow alone (no-op mapInArrow), and Spark's own Parquet
    writer to local disk (the non-portable first half of "write locally, then upload")."""

    def drain(batches: Any) -> Any:
        for _ in batches:
            pass
        return iter([])

    arrow_s, arrow_cpu, _ = timed_cpu(lambda: df.mapInArrow(drain, "x long").collect())
    local_s, local_cpu, _ = timed_cpu(lambda: df.write.mode("overwrite").parquet(tmp))
    return {"spark_to_arrow_s": arrow_s, "spark_to_arrow_cpu_s": sum(arrow_cpu.values()),
            "spark_local_parquet_s": local_s, "spark_local_parquet_cpu_s": sum(local_cpu.values())}


def bench_write_read(store: ResultStore, spark: Any, df: Any, mode: str, cores: int) -> dict[str, float]:
    from dataclasses import replace

    # a fresh prefix per round: data objects are content-addressed per prefix, so a second round of the same rows
    # into the same prefix would upload nothing (bench_cas.py measures that case)
    s = ResultStore(replace(store.config, spark_io=mode, prefix=f"{store.config.prefix}-{time.time_ns()}"),
                    client=store.objects.client)
    part = PartitionId("bench", 0)
    run = f"write-{mode}-{time.time_ns()}"
    write_s, write_cpu, manifest = timed_cpu(lambda: s.write(df, AttemptId("bench", run, part, 1))[0])
    read_s, _ = timed(lambda: s.read(spark, "bench", run, part).write.format("noop")
                      .mode("overwrite").save())
    raw_s, raw_cpu, raw_bytes = raw_upload(s, manifest, threads=cores if mode == "executors" else 1)
    size = manifest.total_bytes / MB
    return {"mode": mode, "objects": len(manifest.objects), "MB": size, "rows": manifest.row_count,
            "write_s": write_s, "raw_s": raw_s, "ratio": raw_s / write_s, "read_s": read_s,
            "write_MBps": size / write_s, "raw_MBps": raw_bytes / MB / raw_s, "read_MBps": size / read_s,
            **{f"write_cpu_{k}_s": v for k, v in write_cpu.items()}, "write_cpu_s": sum(write_cpu.values()),
            **{f"raw_cpu_{k}_s": v for k, v in raw_cpu.items()}, "raw_cpu_s": sum(raw_cpu.values()),
            # the store write cannot take less wall time than its CPU seconds spread over every core
            "ratio_ceiling_by_cpu": raw_s / max(sum(write_cpu.values()) / os.cpu_count(), 1e-9)}


def populate(store: ResultStore, count: int) -> None:
    tiny = pa.table({"x": [1]})
    run = f"avail-{count}"
    list(ThreadPoolExecutor(8).map(
        lambda i: store.write_arrow(tiny, AttemptId("bench", run, PartitionId("a", i), 1))[0], range(count)))


def bench_availability(store: ResultStore, count: int) -> dict[str, float]:
    populate(store, count)
    run, parts = f"avail-{count}", [PartitionId("a", i) for i in range(count)]
    out: dict[str, float] = {"partitions": count}
    for name, mode, probe in (("fast", "fast", "list"), ("deep_list", "deep", "list"), ("deep_head", "deep", "head")):
        best = min(timed(lambda m=mode, p=probe: _check_all(store.checker("bench", run, m, probe=p), parts))[0]
                   for _ in range(3))
        out[name + "_ms"] = best * 1000
    for mode in ("fast", "deep"):
        single = min(timed(lambda m=mode: store.is_available("bench", run, parts[-1], m))[0] for _ in range(5))
        out[f"single_{mode}_ms"] = single * 1000
    return out


def _check_all(checker: Any, parts: list[PartitionId]) -> bool:
    """One checker (one snapshot, as the failover loop uses it) asked about every partition."""
    return all([checker.is_available(p) for p in parts])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--size-mb", type=int, default=1024)
    parser.add_argument("--spark-partitions", type=int, default=8)
    parser.add_argument("--cores", type=int, default=2)
    parser.add_argument("--partitions", default="1,100,1000")
    parser.add_argument("--modes", default="executors,driver")
    parser.add_argument("--repeat", type=int, default=2, help="write/read rounds per mode (figures are noisy)")
    args = parser.parse_args(argv)
    with SeaweedFS(bucket="bench") as server:
        e = server.endpoint
        store = ResultStore.from_endpoint(e.endpoint_url, e.access_key, e.secret_key, e.bucket, prefix="bench")
        for count in (int(c) for c in args.partitions.split(",") if c):
            print("availability", bench_availability(store, count), flush=True)
        if not args.modes:
            return 0
        spark = spark_session(args.cores)
        gen_s, df = timed(lambda: generated(spark, args.size_mb, args.spark_partitions))
        print(f"generated and cached {args.size_mb} MB target in {gen_s:.1f}s", flush=True)
        print(f"python workers warmed in {warm_workers(spark, store, args.cores):.1f}s (cold start, excluded)",
              flush=True)
        with tempfile.TemporaryDirectory() as tmp:
            refs = bench_references(spark, df, os.path.join(tmp, "out"))
        print("references", {k: round(v, 3) for k, v in refs.items()}, flush=True)
        for mode in [m for m in args.modes.split(",") for _ in range(args.repeat)]:
            result = bench_write_read(store, spark, df, mode, args.cores)
            print("write/read", {k: round(v, 3) if isinstance(v, float) else v for k, v in result.items()},
                  flush=True)
        spark.stop()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

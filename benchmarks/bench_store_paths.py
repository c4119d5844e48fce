"""The store's write and read paths against Spark's own Parquet writer/reader through ``s3a://``, raw boto3 and the
AWS CRT client: same rows, same SeaweedFS server, same run (issue 22 item 4).

``python benchmarks/bench_store_paths.py [--orders 2000000] [--repeat 2] [--jars a.jar,b.jar]``

The rows: the example ETL's cleaned line items (``dags/tpch_etl.py``; 2,000,000 orders -> ~13.4 M rows, ~210 MB of
Parquet/snappy), generated once, cached in Spark (``local[2]``). Every round measures, one after the other:

* ``spark_write``: ``df.write.parquet("s3a://...")`` (Spark's own writer and S3A's default committer);
* ``store_write``: the result store's write (in this embedded session Spark's own Parquet writer to local disk,
  then per file SHA-256 and a content-addressed create-only PUT carrying it, from the driver, then the commit:
  ``store/dataplane/local_write.py``) into a fresh prefix (a second write of the same rows uploads nothing);
* ``store_write_python``: the same with ``store_jvm_io = off``, the Python workers' path (``mapInArrow``:
  pyarrow, SHA-256, the same PUTs) — the store's write before ``local_write``;
* ``jvm_staged_write``: candidate (b) — Spark's writer to a staging prefix with S3A's SHA-256 checksums, a HEAD per
  file for it, a server-side copy to the content key, the staging file deleted (``staged_copy_s`` is the copy);
* ``raw_boto3_up``/``raw_crt_up``: the committed bytes of ``store_write`` uploaded again from memory, one PUT per
  object on 2 threads (boto3) or through the CRT transfer manager; ``raw_boto3_down``/``raw_crt_down``: downloaded;
* ``spark_read``, ``store_read_jvm``, ``store_read_python``: read back and ``sum(revenue)`` (Spark's reader over
  Spark's files; the store's read over its manifest — Spark's reader through s3a with the stored SHA-256s checked,
  then the Python workers' path); the sums must agree.

Once, as references: Spark's Parquet writer to local disk, Spark -> Arrow alone (a draining ``mapInArrow``), and
Spark's shuffle of the same rows by order key into 8 (no-op sink). Printed: each figure's runs, median and spread
(min-max) with the CPU seconds per process kind (python, java, s3), and the ratios the targets use.
"""

from __future__ import annotations

import argparse
import base64
import io
import os
import statistics
import sys
import tempfile
import time
from collections import defaultdict
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from typing import Any

import _repo_path
from airflow_region_failover.graph.ids import PartitionId
from airflow_region_failover.standalone.processes import stop_on_signals
from airflow_region_failover.standalone.seaweedfs import SeaweedFS
from airflow_region_failover.store.dataplane import s3a
from airflow_region_failover.store.keys import AttemptId
from airflow_region_failover.store.manifest import Manifest
from airflow_region_failover.store.result_store import ResultStore
from bench_store import timed_cpu

MB = 1024 * 1024


def default_jars() -> str:
    """The pinned s3a jars ``./dev bootstrap`` puts into ``.venv/jars`` (:func:`.s3a.environment_jars`)."""
    from airflow_region_failover.store.dataplane.s3a import environment_jars

    return environment_jars()


def spark_session(jars: str) -> Any:
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    os.environ["PYSPARK_PYTHON"] = sys.executable
    from pyspark.sql import SparkSession

    return (SparkSession.builder.master("local[2]").config("spark.ui.enabled", "false")
            .config("spark.ui.showConsoleProgress", "false").config("spark.driver.memory", "6g")
            .config("spark.jars", jars).getOrCreate())


def line_items(spark: Any, orders: int) -> Any:
    import tpch_etl as etl

    etl.CUSTOMERS = orders // 10
    df = etl.clean_lineitems(etl.lineitems(spark, 0, orders)).repartition(2).cache()
    df.count()
    return df


def revenue(df: Any) -> Any:
    from pyspark.sql import functions as F

    return df.agg(F.sum("revenue")).collect()[0][0]


class Bench:
    """One server, one session, one cached DataFrame; every measurement of a round."""

    def __init__(self, server: SeaweedFS, spark: Any, df: Any) -> None:
        e = server.endpoint
        self.store = ResultStore.from_endpoint(e.endpoint_url, e.access_key, e.secret_key, e.bucket, prefix="paths")
        self.spark, self.df, self.bucket = spark, df, e.bucket
        self.options = s3a.hadoop_options(self.store.config.access, s3a.Mode.AUTO) or {}
        self.client = self.store.objects.client
        self.runs: dict[str, list[tuple[float, dict[str, float]]]] = defaultdict(list)
        self.sums: set[Any] = set()

    def measure(self, name: str, fn: Any) -> Any:
        seconds, cpu, value = timed_cpu(fn)
        self.runs[name].append((seconds, cpu))
        print(f"  {name:22s} {seconds:7.2f} s  cpu " + " ".join(f"{k}={v:.1f}" for k, v in cpu.items()), flush=True)
        return value

    def round(self, number: int) -> None:
        print(f"round {number}", flush=True)
        spark_url = s3a.url(self.bucket, f"spark/{number}")
        self.measure("spark_write", lambda: self.df.write.options(**self.options).parquet(spark_url))
        store = ResultStore(replace(self.store.config, prefix=f"paths-{number}"), client=self.client)
        manifest = self.measure("store_write", lambda: store.write(self.df, AttemptId("bench", f"r{number}",
                                                                                      PartitionId("li", 0), 1))[0])
        python_store = ResultStore(replace(self.store.config, prefix=f"paths-py-{number}", jvm_io="off"),
                                   client=self.client)
        attempt = AttemptId("bench", f"r{number}", PartitionId("li", 0), 1)
        before = self.measure("store_write_python", lambda: python_store.write(self.df, attempt)[0])
        for name, written in (("store_write", manifest), ("store_write_python", before)):
            sizes = [o.size / MB for o in written.objects]
            print(f"  {name}: {len(sizes)} objects, {min(sizes):.1f}-{max(sizes):.1f} MB", flush=True)
        self.measure("jvm_staged_write", lambda: self.staged_write(number))
        self.measure("jvm_local_write", lambda: self.local_write(number))
        bodies = [self.client.get_object(Bucket=self.bucket, Key=key)["Body"].read()
                  for key in self.keys(store, manifest)]
        self.measure("raw_boto3_up", lambda: self.boto3_up(bodies, f"raw/{number}"))
        self.measure("raw_boto3_down", lambda: self.boto3_down(len(bodies), f"raw/{number}"))
        self.measure("raw_crt_up", lambda: self.crt(bodies, f"crt/{number}", up=True))
        self.measure("raw_crt_down", lambda: self.crt(bodies, f"crt/{number}", up=False))
        self.sums.add(self.measure("spark_read", lambda: revenue(self.spark.read.options(**self.options)
                                                                  .parquet(spark_url))))
        self.sums.add(self.measure("store_read_jvm", lambda: revenue(store.read_version(self.spark, manifest))))
        python = ResultStore(replace(store.config, jvm_io="off"), client=self.client)
        self.sums.add(self.measure("store_read_python", lambda: revenue(python.read_version(self.spark, manifest))))
        print(f"  committed {manifest.total_bytes / MB:.1f} MB in {len(manifest.objects)} objects; "
              f"{manifest.row_count:,} rows", flush=True)
        self.committed_mb = manifest.total_bytes / MB

    @staticmethod
    def keys(store: ResultStore, manifest: Manifest) -> list[str]:
        run = store.run_keys(manifest.dag_id, manifest.run_id)
        return [run.object_key(o.key, o.shared) for o in manifest.objects]

    def staged_write(self, number: int) -> None:
        """Candidate (b): Spark writes to a staging prefix with S3A's SHA-256 checksum (single PUTs: a multipart
        file would get a composite checksum), then each file is HEADed, copied to its content key, deleted."""
        staging = f"staging/{number}"
        options = {**self.options, "fs.s3a.create.checksum.algorithm": "SHA256", "fs.s3a.multipart.size": "512M",
                   "fs.s3a.multipart.threshold": "512M", "fs.s3a.impl.disable.cache": "true"}  # S3A caches one
        # client per bucket, configured when it is created: a new one takes these options
        self.df.write.options(**options).parquet(s3a.url(self.bucket, staging))
        listed = self.client.list_objects_v2(Bucket=self.bucket, Prefix=staging + "/")["Contents"]
        files = [o["Key"] for o in listed if o["Key"].endswith(".parquet")]
        start = time.perf_counter()

        def move(key: str) -> None:
            head = self.client.head_object(Bucket=self.bucket, Key=key, ChecksumMode="ENABLED")
            digest = base64.b64decode(head["ChecksumSHA256"]).hex()
            self.client.copy_object(Bucket=self.bucket, Key=f"staged-cas/{digest}.parquet",
                                    CopySource={"Bucket": self.bucket, "Key": key})

        list(ThreadPoolExecutor(4).map(move, files))
        self.client.delete_objects(Bucket=self.bucket, Delete={"Objects": [{"Key": o["Key"]} for o in listed]})
        self.runs["staged_copy_s"].append((time.perf_counter() - start, {}))

    def local_write(self, number: int) -> None:
        """Candidate (b'), embedded Spark only (executors share the driver's disk): Spark's writer to local disk,
        then each file hashed and stored content-addressed from the driver (create-only PUT with its SHA-256, on
        2 threads): dedup before upload kept."""
        import hashlib

        with tempfile.TemporaryDirectory() as tmp:
            self.df.write.parquet(os.path.join(tmp, "out"))
            files = sorted(p for p in os.listdir(os.path.join(tmp, "out")) if p.endswith(".parquet"))

            def put(name: str) -> None:
                with open(os.path.join(tmp, "out", name), "rb") as handle:
                    body = handle.read()
                digest = hashlib.sha256(body).hexdigest()
                self.store.objects.put_if_absent(f"{self.store.layout.root}/local-{number}/{digest}.parquet", body,
                                                 "application/octet-stream", sha256=digest)

            list(ThreadPoolExecutor(2).map(put, files))

    def boto3_up(self, bodies: list[bytes], prefix: str) -> None:
        list(ThreadPoolExecutor(2).map(lambda p: self.client.put_object(Bucket=self.bucket, Key=f"{prefix}/{p[0]}",
                                                                        Body=p[1]), enumerate(bodies)))

    def boto3_down(self, count: int, prefix: str) -> int:
        return sum(ThreadPoolExecutor(2).map(lambda i: len(self.client.get_object(
            Bucket=self.bucket, Key=f"{prefix}/{i}")["Body"].read()), range(count)))

    def crt(self, bodies: list[bytes], prefix: str, up: bool) -> None:
        manager = crt_manager(self.store)
        if manager is None:
            return
        with manager:
            if up:
                futures = [manager.upload(io.BytesIO(b), self.bucket, f"{prefix}/{i}") for i, b in enumerate(bodies)]
            else:
                futures = [manager.download(self.bucket, f"{prefix}/{i}", io.BytesIO()) for i in range(len(bodies))]
            for future in futures:
                future.result()


def crt_manager(store: ResultStore) -> Any:
    """s3transfer's CRT transfer manager for the store's endpoint (``None`` without ``awscrt``). boto3's own
    ``preferred_transfer_client="crt"`` cannot reach ``http://127.0.0.1:<port>`` (it sends the port in the host
    name it resolves), so the CRT client is built here with TLS off."""
    try:
        import botocore.session
        from awscrt.auth import AwsCredentialsProvider
        from s3transfer.crt import BotocoreCRTRequestSerializer, CRTTransferManager, create_s3_crt_client
    except ImportError:
        return None
    access = store.config.access
    assert access.credentials is not None
    credentials = AwsCredentialsProvider.new_static(access.credentials.access_key, access.credentials.secret_key)
    client = create_s3_crt_client(access.region, crt_credentials_provider=credentials,
                                  use_ssl=(access.endpoint_url or "https").startswith("https"), num_threads=2)
    serializer = BotocoreCRTRequestSerializer(botocore.session.Session(), access.client_kwargs())
    return CRTTransferManager(client, serializer)


def references(bench: Bench) -> None:
    """Spark-only floors, once: Parquet to local disk, Spark -> Arrow, Spark's shuffle by key (no-op sink)."""
    def drain(batches: Any) -> Any:
        for _ in batches:
            pass
        return iter([])

    with tempfile.TemporaryDirectory() as tmp:
        bench.measure("ref_local_parquet", lambda: bench.df.write.parquet(os.path.join(tmp, "out")))
    bench.measure("ref_spark_to_arrow", lambda: bench.df.mapInArrow(drain, "x long").collect())
    bench.measure("ref_shuffle_8", lambda: bench.df.repartition(8, "l_orderkey").write.format("noop")
                  .mode("overwrite").save())


def summary(bench: Bench) -> str:
    def median(name: str) -> float:
        return statistics.median(s for s, _ in bench.runs[name])

    lines = ["| figure | runs (s) | median s | spread s | CPU s (python / java / s3), median run |",
             "|---|---|---|---|---|"]
    for name, runs in bench.runs.items():
        seconds = [s for s, _ in runs]
        cpu = sorted(runs, key=lambda r: r[0])[len(runs) // 2][1]
        cpu_text = " / ".join(f"{cpu.get(k, 0):.1f}" for k in ("python", "java", "s3")) if cpu else "-"
        lines.append(f"| {name} | {', '.join(f'{s:.2f}' for s in seconds)} | {median(name):.2f} | "
                     f"{max(seconds) - min(seconds):.2f} | {cpu_text} |")
    lines.append(f"\nstore_write / spark_write = {median('store_write') / median('spark_write'):.2f} (target <= 1.2); "
                 f"store_write_python / spark_write = {median('store_write_python') / median('spark_write'):.2f}; "
                 f"raw boto3 upload of the same {bench.committed_mb:.0f} MB: {median('raw_boto3_up'):.2f} s, CRT "
                 f"{median('raw_crt_up'):.2f} s")
    lines.append(f"store_read_jvm / spark_read = {median('store_read_jvm') / median('spark_read'):.2f}; "
                 f"store_read_python / spark_read = {median('store_read_python') / median('spark_read'):.2f}")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--orders", type=int, default=2_000_000, help="TPC-H orders (x ~6.7 line items)")
    parser.add_argument("--repeat", type=int, default=2)
    parser.add_argument("--jars", default="", help="spark.jars for s3a (default: the pinned jars in .venv/jars)")
    args = parser.parse_args(argv)
    stop_on_signals()
    sys.path.insert(0, str(_repo_path.ROOT / "dags"))
    print(f"load average before: {os.getloadavg()}", flush=True)
    with SeaweedFS(bucket="bench") as server:
        spark = spark_session(args.jars or default_jars())
        try:
            bench = Bench(server, spark, line_items(spark, args.orders))
            bench.store.start_up()
            warm = ResultStore(replace(bench.store.config, prefix="warm-up"), client=bench.client)
            warm_up = AttemptId("bench", "warm", PartitionId("w", 0), 1)
            seconds, _, manifest = timed_cpu(lambda: warm.write(spark.range(0, 1000, 1, 2), warm_up)[0])
            revenue_of = warm.read_version(spark, manifest).count()
            print(f"Python workers and S3A warmed in {seconds:.1f} s ({revenue_of} rows; excluded)", flush=True)
            for number in range(1, args.repeat + 1):
                bench.round(number)
            references(bench)
            if len(bench.sums) != 1:
                raise AssertionError(f"the reads disagree: {bench.sums}")
            print(summary(bench))
        finally:
            spark.stop()
    print(f"load average after: {os.getloadavg()}", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

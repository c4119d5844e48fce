"""Keyed exchange vs the old whole-partition exchange vs Spark's own shuffle, side by side in one run (issue 11).

``python benchmarks/bench_exchange.py [--size-mb 1024] [--parallelism 2,8,32] [--broadcast-max 8] [--repeat N]
[--warm-rounds N]``

One SeaweedFS server and one embedded Spark (``local[2]``) serve every measurement. The data: ``--size-mb`` of
generated rows (``id``, a key ``k`` with 100,003 values, a double, a short string) produced by 2 producer
subtasks. For each consumer parallelism P:

* **keyed** (``partition_by=["k"]``, this issue): each producer commits its partition cut into P subpartitions in
  one pass (:class:`~airflow_region_failover.store.dataplane.types.Cut`); then each of the P consumer subtasks reads its
  subpartition of both partitions (:meth:`StoreIO.read_keys`) and aggregates per key;
* **whole** (``BROADCAST`` + a hand-written ``pmod(hash(k), P) == j`` filter, what the example ETL did before):
  each producer commits its partition whole; each consumer reads both partitions whole and filters. Run for
  P <= ``--broadcast-max`` only (it reads P times the data); above, its read amplification is P by construction;
* **spark**: the same rows, ``repartition(P, "k")`` and the same aggregation in one Spark application (Spark's
  own shuffle, to local disk);
* **keyed through partitionBy**: the producers' keyed write again, with the session's keyed writer passed over
  (:func:`~airflow_region_failover.store.dataplane.keyed_writer.passed_over`): what the produce side cost before it; the
  objects must be the same;
* **floor** (issue 22): Spark's own shuffle of the same rows plus a raw upload and a raw download of the keyed
  exchange's committed bytes to the same server (boto3, one PUT/GET per object on 2 threads, from and to memory),
  all measured in the same run: what a durable exchange cannot avoid. ``keyed_over_floor`` = keyed / floor
  (target <= 1.5).

Printed per P: bytes committed, bytes the consumers fetched (the store's read counters), read amplification
(fetched / committed; target 1.00 for keyed), producer and consumer wall seconds (with the part of the latter the
consumers' reads spent setting up before their jobs), the floor and its parts, and the wall-time ratios keyed /
spark, keyed / floor and whole / keyed. Consumers run one after the other (as Airflow tasks on a 2-core machine
would). The session has the pinned s3a jars (``--jars``, default ``.venv/jars``), so the
consumers read with Spark's own Parquet reader (the store's JVM path) unless ``--jvm-io off``; the store cuts
objects of ``--max-object-mb`` (default: the store's default). ``--warm-rounds`` full-size rounds run first and are
printed but left out of the table: the JVM's steady state, as on the long-lived Spark Connect server the step tasks
share (the first full-size round has been the slowest one in every session,
``benchmarks/notes/2026-11-27-plain-airflow-with-s3a.md``).
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from typing import Any

import _repo_path  # noqa: F401 - puts the repository root on sys.path
from airflow_region_failover import timeline
from airflow_region_failover.graph.builder import JobGraphBuilder
from airflow_region_failover.graph.ids import PartitionId
from airflow_region_failover.graph.keygroups import key_group_range
from airflow_region_failover.graph.model import Exchange
from airflow_region_failover.spark.exchange import PartitionRef
from airflow_region_failover.spark.store_io import StoreIO
from airflow_region_failover.standalone.processes import stop_on_signals
from airflow_region_failover.standalone.seaweedfs import SeaweedFS
from airflow_region_failover.store.config import MAX_OBJECT_BYTES, MiB
from airflow_region_failover.store.dataplane import keyed_writer
from airflow_region_failover.store.dataplane.types import Cut
from airflow_region_failover.store.keys import AttemptId
from airflow_region_failover.store.manifest import Manifest
from airflow_region_failover.store.result_store import ResultStore

MB = 1024 * 1024
ROW_BYTES = 17  # committed Parquet/snappy bytes per generated row (measured: printed as "committed")
PRODUCERS = 2
SPARK_PARTITIONS = 4  # Spark partitions of each producer's DataFrame


def spark_session(jars: str) -> Any:
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    os.environ["PYSPARK_PYTHON"] = sys.executable
    from pyspark.sql import SparkSession

    builder = (SparkSession.builder.master("local[2]").config("spark.ui.enabled", "false")
               .config("spark.driver.memory", "4g").config("spark.sql.shuffle.partitions", "8")
               .config("spark.ui.showConsoleProgress", "false"))
    return (builder.config("spark.jars", jars) if jars else builder).getOrCreate()


def default_jars() -> str:
    """The pinned s3a jars ``./dev bootstrap`` puts into ``.venv/jars`` (:func:`.s3a.environment_jars`)."""
    from airflow_region_failover.store.dataplane.s3a import environment_jars

    return environment_jars()


def rows(spark: Any, lo: int, hi: int) -> Any:
    return spark.range(lo, hi, 1, SPARK_PARTITIONS).selectExpr(
        "id", "pmod(hash(id, 3), 100003) AS k", "rand(7) AS v", "concat('s', id % 1000) AS s")


Totals = tuple[int, int, int, int, float]
"""What an aggregation found: keys, rows, sum of ids, sum of the hashes of each key's largest ``s``, sum of ``v``."""


def aggregate(df: Any) -> Totals:
    """Per key: the sum of ``v``, the count, the largest ``s`` and the sum of ``id``, folded into :data:`Totals`.
    Every column is used, so none is pruned: all of them cross Spark's shuffle and are read by the consumers (a
    count of keys alone let Spark shuffle, and the consumers read, the key column only)."""
    from pyspark.sql import functions as F

    per_key = df.groupBy("k").agg(F.sum("v").alias("v"), F.count("*").alias("n"), F.max("s").alias("s"),
                                  F.sum("id").alias("i"))
    r = per_key.agg(F.count("*"), F.sum("n"), F.sum("i"), F.sum(F.hash("s").cast("long")), F.sum("v")).collect()[0]
    return int(r[0]), int(r[1]), int(r[2]), int(r[3]), float(r[4])


def add(a: Totals, b: Totals) -> Totals:
    return a[0] + b[0], a[1] + b[1], a[2] + b[2], a[3] + b[3], a[4] + b[4]


def same(a: Totals, b: Totals) -> bool:
    """Equal totals but the sum of ``v``: ``rand(7)`` depends on the Spark partition that generates a row, and the
    producers' partitions are not the single application's."""
    return a[:4] == b[:4]


def timed(fn: Any) -> tuple[float, Any]:
    start = time.perf_counter()
    value = fn()
    return time.perf_counter() - start, value


def produce(store: ResultStore, spark: Any, total: int, run: str, cut: Cut | None) -> list[Manifest]:
    """Both producer partitions committed; returns their manifests."""
    manifests = []
    for i in range(PRODUCERS):
        lo, hi = total * i // PRODUCERS, total * (i + 1) // PRODUCERS
        manifests.append(store.write(rows(spark, lo, hi), AttemptId("bench", run, PartitionId("rows", i), 1),
                                     cut=cut)[0])
    return manifests


def raw_transfer(store: ResultStore, manifests: list[Manifest], run: str) -> tuple[float, float]:
    """(upload s, download s) of the committed bytes of ``manifests``, again, from and to memory: one PUT or GET per
    object on 2 threads with the store's boto3 client (the bytes are fetched first, untimed)."""
    client, bucket = store.objects.client, store.layout.bucket
    keys = [store.run_keys(m.dag_id, m.run_id).object_key(o.key, o.shared) for m in manifests for o in m.objects]
    bodies = [client.get_object(Bucket=bucket, Key=key)["Body"].read() for key in keys]
    raw = f"{store.layout.root}/raw-{run}"
    with ThreadPoolExecutor(2) as pool:
        up, _ = timed(lambda: list(pool.map(lambda p: client.put_object(Bucket=bucket, Key=f"{raw}/{p[0]}",
                                                                        Body=p[1]), enumerate(bodies))))
        down, _ = timed(lambda: list(pool.map(lambda i: client.get_object(Bucket=bucket, Key=f"{raw}/{i}")["Body"]
                                              .read(), range(len(bodies)))))
    return up, down


def consume_keyed(io: StoreIO, spark: Any, run: str, parallelism: int) -> Totals:
    edge = (JobGraphBuilder().step("p", parallelism=PRODUCERS).step("c", parallelism=parallelism)
            .edge("p", "c", exchange="BLOCKING", result="rows", partition_by=["k"]).build()).edges[0]
    groups: Totals = (0, 0, 0, 0, 0.0)
    for j in range(parallelism):
        mine = key_group_range(edge.max_parallelism, parallelism, j)
        frames = [io.read_keys(spark, PartitionRef("rows", i, Exchange.BLOCKING, "bench", run, 1), edge, mine)
                  for i in range(PRODUCERS)]
        groups = add(groups, aggregate(frames[0].unionByName(frames[1])))
    return groups


def consume_whole(io: StoreIO, spark: Any, run: str, parallelism: int) -> Totals:
    from pyspark.sql import functions as F

    groups: Totals = (0, 0, 0, 0, 0.0)
    for j in range(parallelism):
        frames = [io.read(spark, PartitionRef("rows", i, Exchange.BLOCKING, "bench", run, 1)) for i in range(PRODUCERS)]
        mine = F.pmod(F.hash("k"), F.lit(parallelism)) == j
        groups = add(groups, aggregate(frames[0].unionByName(frames[1]).where(mine)))
    return groups


def spark_shuffle(spark: Any, total: int, parallelism: int) -> Totals:
    """The same rows through Spark's own shuffle (``repartition(P, "k")``, every column) and the same aggregation."""
    return aggregate(rows(spark, 0, total).repartition(parallelism, "k"))


def measure(store: ResultStore, spark: Any, total: int, parallelism: int, whole: bool,
            round_number: str = "1") -> dict[str, Any]:
    out: dict[str, Any] = {"P": parallelism}
    run = f"keyed-{parallelism}-{round_number}"
    out["produce_keyed_s"], manifests = timed(lambda: produce(store, spark, total, run, Cut(("k",), 128,
                                                                                            parallelism)))
    committed = sum(m.total_bytes for m in manifests)
    # the same keyed write through Spark's partitionBy (the store before the keyed writer), into a prefix of its own:
    # the objects are the same, so in this one they would all be reused
    other = ResultStore(replace(store.config, prefix=f"{store.config.prefix}-partition-by"),
                        client=store.objects.client)
    with keyed_writer.passed_over(spark):
        out["produce_partition_by_s"], again = timed(lambda: produce(
            other, spark, total, run, Cut(("k",), 128, parallelism)))
    if [m.objects for m in again] != [m.objects for m in manifests]:
        raise AssertionError("the keyed writer and partitionBy committed different objects")
    io = StoreIO(store)
    with timeline.measured() as clock:
        out["consume_keyed_s"], keyed_groups = timed(lambda: consume_keyed(io, spark, run, parallelism))
    out["consume_setup_s"] = read_setup(clock.timeline())
    out.update(committed_mb=committed / MB, keyed_read_mb=io.reads.bytes / MB,
               keyed_amplification=io.reads.bytes / committed)
    out["spark_s"], spark_groups = timed(lambda: spark_shuffle(spark, total, parallelism))
    if not same(spark_groups, keyed_groups):
        raise AssertionError(f"keyed exchange found {keyed_groups}, Spark {spark_groups}")
    out["keyed_s"] = out["produce_keyed_s"] + out["consume_keyed_s"]
    out["keyed_over_spark"] = out["keyed_s"] / out["spark_s"]
    out["raw_up_s"], out["raw_down_s"] = raw_transfer(store, manifests, run)
    out["floor_s"] = out["spark_s"] + out["raw_up_s"] + out["raw_down_s"]
    out["keyed_over_floor"] = out["keyed_s"] / out["floor_s"]
    if whole:
        run = f"whole-{parallelism}-{round_number}"
        out["produce_whole_s"], whole_manifests = timed(lambda: produce(store, spark, total, run, None))
        committed_whole = sum(m.total_bytes for m in whole_manifests)
        io = StoreIO(store)
        out["consume_whole_s"], whole_groups = timed(lambda: consume_whole(io, spark, run, parallelism))
        if not same(whole_groups, keyed_groups):
            raise AssertionError(f"whole-partition exchange found {whole_groups}, keyed {keyed_groups}")
        out.update(whole_read_mb=io.reads.bytes / MB, whole_amplification=io.reads.bytes / committed_whole,
                   whole_s=out["produce_whole_s"] + out["consume_whole_s"])
        out["whole_over_keyed"] = out["whole_s"] / out["keyed_s"]
    return out


def read_setup(record: timeline.Timeline) -> float:
    """Seconds the consumers' reads spent setting up before their jobs: the store's ``read_*`` phases (the stored
    checksums, the JVM-read probe, Spark's listing, the nullability restore; docs/reference/task-summary.md)."""
    return sum(span.seconds for span in record.spans if span.name.startswith("read_"))


def table(results: list[dict[str, Any]]) -> str:
    head = ("| P | committed MB | keyed: read MB | keyed: amplification | whole: amplification | keyed s "
            "(produce + consume, of it the reads' set-up) | whole s | Spark shuffle s | floor s (shuffle + raw up + "
            "raw down) | keyed / Spark | keyed / floor | whole / keyed | produce through partitionBy s |")
    lines = [head, "|" + "---|" * 13]
    for r in results:
        whole_amp = f"{r['whole_amplification']:.2f}" if "whole_s" in r else f"{r['P']} (by construction)"
        whole_s = f"{r['whole_s']:.1f}" if "whole_s" in r else "not run"
        ratio = f"{r['whole_over_keyed']:.2f}" if "whole_s" in r else "-"
        lines.append(f"| {r['P']} | {r['committed_mb']:.0f} | {r['keyed_read_mb']:.0f} | "
                     f"{r['keyed_amplification']:.2f} | {whole_amp} | {r['keyed_s']:.1f} "
                     f"({r['produce_keyed_s']:.1f} + {r['consume_keyed_s']:.1f}, of it "
                     f"{r['consume_setup_s']:.1f}) | {whole_s} | {r['spark_s']:.1f} | "
                     f"{r['floor_s']:.1f} ({r['spark_s']:.1f} + {r['raw_up_s']:.1f} + {r['raw_down_s']:.1f}) | "
                     f"{r['keyed_over_spark']:.2f} | {r['keyed_over_floor']:.2f} | {ratio} | "
                     f"{r['produce_partition_by_s']:.1f} |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--size-mb", type=int, default=1024, help="approximate committed size of the exchange")
    parser.add_argument("--parallelism", default="2,8,32", help="consumer parallelisms, comma-separated")
    parser.add_argument("--broadcast-max", type=int, default=8, help="run the whole-partition variant up to this P")
    parser.add_argument("--repeat", type=int, default=1, help="rounds of every P (the spread is printed)")
    parser.add_argument("--warm-rounds", type=int, default=0,
                        help="full-size rounds run first, printed and left out of the table (the JVM's steady state "
                             "on a long-lived server; default 0)")
    parser.add_argument("--jars", default=None, help="spark.jars for s3a (default: the pinned jars in .venv/jars)")
    parser.add_argument("--jvm-io", default="auto", choices=["auto", "off"], help="the store's [store_jvm_io]")
    parser.add_argument("--max-object-mb", type=int, default=MAX_OBJECT_BYTES // MiB,
                        help=f"the store's max_object_bytes in MiB (default {MAX_OBJECT_BYTES // MiB})")
    args = parser.parse_args(argv)
    stop_on_signals()
    total = args.size_mb * MB // ROW_BYTES
    with SeaweedFS(bucket="bench") as server:
        e = server.endpoint
        store = ResultStore.from_endpoint(e.endpoint_url, e.access_key, e.secret_key, e.bucket, prefix="exchange",
                                          jvm_io=args.jvm_io, max_object_bytes=args.max_object_mb * MiB)
        spark = spark_session(default_jars() if args.jars is None else args.jars)
        try:
            def warm_up() -> int:  # Python workers, S3A's client and the JVM-read probe, excluded
                produce(store, spark, 100_000, "warm-up", Cut(("k",), 128, 2))
                return int(StoreIO(store).read(spark, PartitionRef("rows", 0, Exchange.BLOCKING, "bench", "warm-up",
                                                                   1)).count())

            warm, _ = timed(warm_up)
            print(f"{total:,} rows; Spark, its Python workers and S3A warmed in {warm:.1f}s (excluded)", flush=True)
            results = []
            for round_number in range(1 - args.warm_rounds, args.repeat + 1):
                for parallelism in (int(p) for p in args.parallelism.split(",") if p):
                    # a fresh prefix per round and P: objects are content-addressed, the same rows again in the
                    # same prefix would upload nothing
                    fresh = ResultStore(replace(store.config, prefix=f"exchange-{round_number}-{parallelism}"),
                                        client=store.objects.client)
                    result = measure(fresh, spark, total, parallelism, parallelism <= args.broadcast_max,
                                     f"{round_number}")
                    shown = {k: round(v, 3) if isinstance(v, float) else v for k, v in result.items()}
                    print(("warm-up round, left out: " if round_number < 1 else "") + str(shown), flush=True)
                    if round_number >= 1:
                        results.append(result)
            print(table(results))
            print(f"load average: {os.getloadavg()}")
        finally:
            spark.stop()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

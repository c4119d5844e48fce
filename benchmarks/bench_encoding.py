"""What encoding a committed result costs the Spark JVM, against what (a) pays instead: rows shaped like the example
ETL's join output (its local aggregate: a market segment of 5 strings, a year, a customer key, a ``decimal(24,2)``
revenue summed over about nine line items, an order count) written by Spark's Parquet writer in files of
``--rows-per-file`` rows (a join subtask's keyed files at ~5 GB hold about 200,000):

* in Parquet's format 1 (Spark's default: no dictionary for a ``FIXED_LEN_BYTE_ARRAY`` column such as the revenue);
* in format 2 with a dictionary tried on every column (the store until it turned the wide decimals' off);
* with the store's options (``store/dataplane/local_write.py`` ``write_options``: format 2, no dictionary for decimals
  of more than 18 digits);
* in format 2 with no dictionary at all;

and shuffled by Spark (``UnsafeRow`` + LZ4, written and read back: what one Spark application does with the rows
instead of persisting them). Each figure is the JVM's CPU seconds over a no-op write of the same cached rows (so
generating them is not counted); bytes are the Parquet files' sizes.

``SPARK_LOCAL_IP=127.0.0.1 .venv/bin/python benchmarks/bench_encoding.py --rows 8000000 --rounds 3``
(embedded ``local[2]`` Spark; files under a temporary directory, removed at the end; round 0 includes the JIT's
warm-up).
"""

from __future__ import annotations

import argparse
import shutil
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import _repo_path  # noqa: F401 - puts the repository root on sys.path
from airflow_region_failover.store.dataplane import local_write
from bench_keyed_write import jvm_cpu

SEGMENTS = ("AUTOMOBILE", "BUILDING", "FURNITURE", "HOUSEHOLD", "MACHINERY")
FORMAT_2 = dict([local_write.WRITER_VERSION])
LINES = 9
"""Line items summed into one revenue value."""


def rows(spark: Any, n: int) -> Any:
    """``n`` cached rows shaped like the ETL's local aggregate (pure functions of the row number; the revenue a sum
    of :data:`LINES` prices of 1.00-1000.99, as the join sums its line items)."""
    from pyspark.sql import functions as F

    segments = F.array(*[F.lit(s) for s in SEGMENTS])
    prices = [F.pmod(F.hash("id", F.lit(40 + k)), F.lit(100_000)) + 100 for k in range(LINES)]
    frame = spark.range(n, numPartitions=2).select(
        F.element_at(segments, (F.pmod(F.hash("id", F.lit(1)), F.lit(5)) + 1).cast("int")).alias("c_mktsegment"),
        (F.pmod(F.hash("id", F.lit(2)), F.lit(4)) + 1994).cast("int").alias("year"),
        F.pmod(F.hash("id", F.lit(3)), F.lit(2_294_600)).cast("long").alias("c_custkey"),
        (sum(prices[1:], prices[0]) / 100).cast("decimal(24,2)").alias("revenue"),
        F.pmod(F.hash("id", F.lit(5)), F.lit(9)).cast("long").alias("orders")).cache()
    frame.count()
    return frame


def parquet_bytes(path: Path) -> int:
    return sum(p.stat().st_size for p in path.rglob("*.parquet"))


def measure(frame: Any, work: Path, pid: int, per_file: int) -> dict[str, tuple[float, int]]:
    """One round: each variant's JVM CPU seconds over the no-op write, and its bytes (0 for the shuffle)."""
    def parquet(options: dict[str, str]) -> Callable[[], None]:
        def write() -> None:
            shutil.rmtree(work / "out", ignore_errors=True)
            frame.write.options(**options).option("maxRecordsPerFile", str(per_file)).parquet(str(work / "out"))
        return write

    variants: dict[str, Callable[[], None]] = {
        "no-op write": lambda: frame.write.format("noop").mode("overwrite").save(),
        "Parquet format 1 (Spark's default)": parquet({}),
        "Parquet format 2, dictionary on every column (the store before)": parquet(FORMAT_2),
        "Parquet, the store's options (format 2, no dictionary for wide decimals)":
            parquet(local_write.write_options(frame.schema.jsonValue())),
        "Parquet format 2, no dictionary": parquet({**FORMAT_2, "parquet.enable.dictionary": "false"}),
        "Spark's shuffle (write + read)":
            lambda: frame.repartition(8, "c_custkey").write.format("noop").mode("overwrite").save(),
    }
    spent: dict[str, tuple[float, int]] = {}
    for label, run in variants.items():
        before = jvm_cpu(pid)
        run()
        size = parquet_bytes(work / "out") if label.startswith("Parquet") else 0
        spent[label] = (jvm_cpu(pid) - before, size)
    return spent


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", type=int, default=8_000_000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--rows-per-file", type=int, default=200_000)
    args = parser.parse_args(argv)
    from pyspark.sql import SparkSession

    spark = (SparkSession.builder.master("local[2]").config("spark.driver.memory", "4g")
             .config("spark.ui.enabled", "false").config("spark.sql.shuffle.partitions", "8").getOrCreate())
    work = Path(tempfile.mkdtemp(prefix="bench_encoding-"))
    try:
        pid = int(spark.sparkContext._jvm.ProcessHandle.current().pid())
        frame = rows(spark, args.rows)
        print("| round | variant | JVM CPU s over the no-op write | MB |\n|---|---|---:|---:|")
        for round_ in range(args.rounds):
            spent = measure(frame, work, pid, args.rows_per_file)
            noop = spent.pop("no-op write")[0]
            for label, (cpu, size) in spent.items():
                mb = f"{size / 1e6:.1f}" if size else "-"
                print(f"| {round_} | {label} | {cpu - noop:.2f} | {mb} |", flush=True)
    finally:
        spark.stop()
        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

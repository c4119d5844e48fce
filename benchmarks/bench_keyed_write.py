"""What a keyed write costs in Spark's JVM, and what its columns and Parquet's page format change (issue 22).

``python benchmarks/bench_keyed_write.py [--orders 4000000] [--repeat 2] [--producer-order]``

The rows: the example ETL's cleaned line items (``dags/tpch_etl.py``; 4,000,000 orders -> ~27 M rows) and its cleaned
orders, generated once and cached in Spark (``local[2]``, embedded): shuffled into 4 partitions, or with
``--producer-order`` in the generators' order (2 partitions, keys increasing in each, as the ETL's steps write them).
Each variant is written with Spark's own Parquet writer to a local directory, as the result store writes
(``store/dataplane/local_write.py``: for a keyed write the subpartition tag of a
:class:`~airflow_region_failover.store.dataplane.types.Cut` and ``keyed_settings``, P = 4; files of at most
``--records`` rows), then read back with Spark's reader and a hash-sum of every column:

* ``unkeyed``: the plain write (no tag, no ``partitionBy``);
* ``keyed``: the keyed write of every column the step returns, in Parquet format 1 (the store before ``030b5c1``);
* ``keyed, no dictionary``: the same with ``parquet.enable.dictionary=false``;
* ``keyed, kept columns``: only the columns the ETL's consumer reads (``columns=[...]``: line items' ``l_orderkey``
  and ``revenue``), format 1;
* ``keyed, kept columns, format 2``: the same in format-2 pages (``WRITER_VERSION``: the store from ``030b5c1``);
* ``unkeyed, kept columns, format 2``: those columns and pages without the cut (what the keyed write costs beyond);
* ``sorted, kept columns, format 2``: the keyed write as Spark plans it by default (a sort by the subpartition,
  one open writer per task: the store before ``bf86e4c``);
* ``keyed writer, kept columns, format 2``: the store's keyed writer (``store/dataplane/keyed_writer.py``) with
  parquet-mr's dictionary choice on every column (the store before ``local_write.integer_key_paths``), and the same with
  ``no dictionary on the key`` (the store now), ``no dictionary``, ``lz4_raw`` or ``uncompressed`` pages (what
  Parquet's dictionary and Snappy cost here),
  or through parquet-mr's ``record consumer`` (``flatWriter=false``: Spark's own ``write``, as before the flat
  writer of ``store/dataplane/jvm/FlatParquetWriteSupport.java``; the same bytes).

Printed per variant and round: the write's wall and JVM CPU seconds (``/proc`` of the driver JVM), the bytes
written, the read-back's JVM CPU seconds; then the median of every figure over the rounds after the first (the
first warms the JIT and is shown, not counted, when ``--repeat`` > 1).
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import _repo_path

DAGS = _repo_path.ROOT / "dags"
P = 4


Spec = tuple[str, tuple[str, ...] | None, dict[str, str]]
"""How a variant writes: ``unkeyed``, ``keyed`` (the store's concurrent writers) or ``sorted`` (Spark's planned
write: a sort by the subpartition, one writer at a time); the kept columns (None: all); writer options."""


def variants(line_kept: tuple[str, ...], key: str) -> dict[str, Spec]:
    """Name -> :data:`Spec` of a table keyed by ``key``."""
    from airflow_region_failover.store.dataplane.local_write import NO_DICTIONARY, WRITER_VERSION

    v2 = dict([WRITER_VERSION])
    return {"unkeyed": ("unkeyed", None, {}), "keyed": ("keyed", None, {}),
            "keyed, no dictionary": ("keyed", None, {"parquet.enable.dictionary": "false"}),
            "keyed, kept columns": ("keyed", line_kept, {}), "keyed, kept columns, format 2": ("keyed", line_kept, v2),
            "unkeyed, kept columns, format 2": ("unkeyed", line_kept, v2),
            "sorted, kept columns, format 2": ("sorted", line_kept, v2),
            "keyed writer, kept columns, format 2": ("writer", line_kept, v2),
            "keyed writer, kept columns, format 2, no dictionary":
                ("writer", line_kept, {**v2, "parquet.enable.dictionary": "false"}),
            "keyed writer, kept columns, format 2, no dictionary on the key":
                ("writer", line_kept, {**v2, NO_DICTIONARY + key: "false"}),
            "keyed writer, kept columns, format 2, lz4_raw": ("writer", line_kept, {**v2, "compression": "lz4_raw"}),
            "keyed writer, kept columns, format 2, uncompressed": ("writer", line_kept, {**v2, "compression": "none"}),
            "keyed writer, kept columns, format 2, record consumer":
                ("writer", line_kept, {**v2, "flatWriter": "false"})}


def jvm_cpu(pid: int) -> float:
    """CPU seconds (user + system) of process ``pid``."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def write_once(spark: Any, df: Any, key: str, spec: Spec, out: Path, records: int) -> dict[str, float]:
    """One write of ``df`` as ``spec`` says into ``out``, and its read-back: the figures of one round."""
    from airflow_region_failover.store.dataplane import keyed_writer
    from airflow_region_failover.store.dataplane.local_write import TIMESTAMPS, keyed_settings
    from airflow_region_failover.store.dataplane.s3a import session_settings
    from airflow_region_failover.store.dataplane.types import Cut

    how, kept, options = spec
    frame = df.select(*kept) if kept else df
    frame = frame if how == "unkeyed" else Cut((key,), 128, P).tag(frame)
    writer = frame.write.option("maxRecordsPerFile", str(records))
    for name, value in options.items():
        writer = writer.option(name, value)
    settings = [TIMESTAMPS, *(keyed_settings(P) if how == "keyed" else [])]
    if how in ("keyed", "sorted"):
        writer = writer.partitionBy(frame.columns[-1])
    shutil.rmtree(out, ignore_errors=True)
    pid = spark._jvm.java.lang.ProcessHandle.current().pid()
    cpu, started = jvm_cpu(pid), time.perf_counter()
    with session_settings(spark, settings):
        if how == "writer":  # the store's call (store/dataplane/local_write.py)
            if not keyed_writer.write(frame, out.as_uri(), records, P, "bench", options):
                raise RuntimeError(f"this session has no {keyed_writer.FORMAT}: run ./dev bootstrap")
        else:
            writer.parquet(out.as_uri())
    wall, write_cpu = time.perf_counter() - started, jvm_cpu(pid) - cpu
    size = sum(p.stat().st_size for p in out.rglob("*.parquet"))
    cpu = jvm_cpu(pid)
    columns = kept or tuple(df.columns)
    spark.read.parquet(out.as_uri()).selectExpr(*[f"sum(hash(`{c}`))" for c in columns]).collect()
    return {"write_s": wall, "write_cpu_s": write_cpu, "mb": size / 1e6, "read_cpu_s": jvm_cpu(pid) - cpu}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--orders", type=int, default=4_000_000, help="orders generated (7 line items each)")
    parser.add_argument("--repeat", type=int, default=2, help="rounds (the first warms the JIT)")
    parser.add_argument("--records", type=int, default=1_000_000, help="rows per file at most")
    parser.add_argument("--only", default="", help="the variants to run, ';'-separated (default: all)")
    parser.add_argument("--producer-order", action="store_true",
                        help="keep the generators' row order (a task's keys increasing, as the ETL's steps write "
                             "them) instead of shuffling the rows into 4 partitions")
    args = parser.parse_args()
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    sys.path.insert(0, str(DAGS))
    import tpch_etl as etl
    from pyspark.sql import SparkSession

    from airflow_region_failover.store.dataplane.s3a import with_jars

    builder = SparkSession.builder.master("local[2]").config("spark.driver.memory", "4g")
    for name, value in with_jars({"spark.ui.enabled": "false", "spark.ui.showConsoleProgress": "false"}).items():
        builder = builder.config(name, value)
    spark = builder.getOrCreate()
    try:
        tables = {"line items": (etl.clean_lineitems(etl.lineitems(spark, 0, args.orders, 7)), "l_orderkey",
                                 ("l_orderkey", "revenue")),
                  "orders": (etl.clean_orders(etl.orders(spark, 0, args.orders, 7)), "o_orderkey", None)}
        figures: dict[tuple[str, str], list[dict[str, float]]] = {}
        with tempfile.TemporaryDirectory(prefix="bench-keyed-write-") as scratch:
            for name, (df, _, _) in tables.items():
                tables[name] = ((df if args.producer_order else df.repartition(4)).cache(), *tables[name][1:])
                print(f"{name}: {tables[name][0].count():,} rows", flush=True)
            for round_ in range(args.repeat):
                for name, (df, key, kept) in tables.items():
                    for label, spec in variants(kept or tuple(df.columns), key).items():
                        if args.only and label not in args.only.split(";"):
                            continue
                        got = write_once(spark, df, key, spec, Path(scratch) / "out", args.records)
                        figures.setdefault((name, label), []).append(got)
                        print(f"round {round_ + 1} | {name} | {label} | write {got['write_s']:.2f} s, "
                              f"{got['write_cpu_s']:.2f} JVM CPU s | {got['mb']:.1f} MB | read back "
                              f"{got['read_cpu_s']:.2f} JVM CPU s", flush=True)
        print("\n| rows | variant | write JVM CPU s | MB | read-back JVM CPU s |\n|---|---|---:|---:|---:|")
        for (name, label), runs in figures.items():
            counted = runs[1:] or runs
            med = {k: statistics.median(r[k] for r in counted) for k in counted[0]}
            spread = f"{min(r['write_cpu_s'] for r in counted):.2f}-{max(r['write_cpu_s'] for r in counted):.2f}"
            print(f"| {name} | {label} | {med['write_cpu_s']:.2f} ({spread}) | {med['mb']:.1f} | "
                  f"{med['read_cpu_s']:.2f} |")
    finally:
        spark.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())

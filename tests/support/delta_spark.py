"""Spark's own Delta reader, as a user's Spark reads a published table: ``delta-spark`` on the Spark 4.2 of
``.venv/delta-spark`` (:mod:`devtools.jars` says why not the project's Spark 4.3), reaching the S3 server through
``s3a://`` (hadoop-aws + the AWS SDK bundle). The jars are local paths (``spark.jars``): nothing is resolved
through Ivy. The reader runs in its own process group and is stopped with it."""

from __future__ import annotations

import json
import os
import subprocess
from typing import Any

from airflow_region_failover.standalone.processes import stop_group
from airflow_region_failover.store.dataplane import s3a
from airflow_region_failover.store.s3.clients import S3Access, S3Credentials
from devtools.jars import classpath, reader_python

READER = r"""
import datetime, decimal, json, sys
from pyspark.sql import SparkSession
cfg = json.loads(sys.stdin.readline())
builder = (SparkSession.builder.master("local[2]").appName("delta-reader")
           .config("spark.jars", cfg["jars"])
           .config("spark.ui.enabled", "false").config("spark.ui.showConsoleProgress", "false")
           .config("spark.sql.shuffle.partitions", "2")
           # Delta rebuilds each version's snapshot with a Spark job of 50 partitions unless told: 2 for these tables
           .config("spark.databricks.delta.snapshotPartitions", "2").config("spark.sql.session.timeZone", "UTC")
           .config("spark.sql.extensions", "io.delta.sql.DeltaSparkSessionExtension")
           .config("spark.sql.catalog.spark_catalog", "org.apache.spark.sql.delta.catalog.DeltaCatalog"))
for key, value in cfg["s3a"].items():
    builder = builder.config("spark.hadoop.fs.s3a." + key, value)
spark = builder.getOrCreate()

def plain(value):
    if isinstance(value, (datetime.datetime, datetime.date)):
        return value.isoformat()
    if isinstance(value, decimal.Decimal):
        return str(value)
    return value

try:
    for uri, versions in cfg["tables"].items():
        for version in versions:
            frame = spark.read.format("delta").option("versionAsOf", version).load(uri)
            rows = [{k: plain(v) for k, v in row.asDict().items()} for row in frame.collect()]
            print("VERSION " + json.dumps({"uri": uri, "version": version, "rows": rows}), flush=True)
finally:
    spark.stop()
"""


def s3a_options(endpoint_url: str, access_key: str, secret_key: str, region: str = "us-east-1") -> dict[str, str]:
    """``fs.s3a.*`` (without that prefix) for an S3-compatible server at ``endpoint_url``: the options the store's
    own JVM reads use (:func:`airflow_region_failover.store.dataplane.s3a.hadoop_options`: path-style, static keys)."""
    access = S3Access(endpoint_url, region, S3Credentials(access_key, secret_key))
    options = s3a.hadoop_options(access, s3a.Mode.AUTO) or {}
    return {key.removeprefix("fs.s3a."): value for key, value in options.items()}


def read_tables(tables: dict[str, list[int]], s3a: dict[str, str],
                timeout: float = 600) -> dict[str, dict[int, list[dict[str, Any]]]]:
    """``uri -> version -> rows``: the rows of the given versions of each table (``s3a://bucket/path``) as Spark's
    Delta reader returns them (``versionAsOf``), in one Spark session; values as JSON (timestamps in UTC and dates
    ISO 8601, decimals as text)."""
    env = {**os.environ, "SPARK_LOCAL_IP": "127.0.0.1", "TZ": "UTC"}
    for key in ("PYSPARK_PYTHON", "PYSPARK_DRIVER_PYTHON", "SPARK_HOME", "SPARK_CONNECT_MODE_ENABLED", "SPARK_REMOTE"):
        env.pop(key, None)  # the reader's Spark is its own, never the project's
    config = {"jars": classpath(), "tables": tables, "s3a": s3a}
    proc = subprocess.Popen([str(reader_python()), "-c", READER], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env=env, start_new_session=True)
    try:
        out, err = proc.communicate(json.dumps(config) + "\n", timeout=timeout)
    finally:
        stop_group(proc, 10)
    found = [json.loads(line[len("VERSION "):]) for line in out.splitlines() if line.startswith("VERSION ")]
    if proc.returncode != 0 or len(found) != sum(len(v) for v in tables.values()):
        raise AssertionError(f"Spark's Delta reader failed (exit {proc.returncode}):\n{err[-6000:]}")
    read: dict[str, dict[int, list[dict[str, Any]]]] = {}
    for item in found:
        read.setdefault(item["uri"], {})[item["version"]] = item["rows"]
    return read

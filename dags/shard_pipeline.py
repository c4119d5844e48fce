"""Embarrassingly parallel per-shard pipeline: POINTWISE + PIPELINED, so every shard is its own failover region.

``ingest#i -> parse#i -> enrich#i`` are joined by PIPELINED POINTWISE exchanges: shard ``i``'s three subtasks form
region ``r<i>`` and a failure in one shard restarts only that shard (plus the BLOCKING ``summary`` consumer),
never the other shards. They are chained: one task ``ingest.parse.enrich.<i>`` per shard runs the three steps in
one Spark session, passing DataFrames in memory. ``summary`` reads every shard's committed partition
(BROADCAST, BLOCKING).
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from airflow.sdk import DAG

from airflow_region_failover import RegionJob

SHARDS, EVENTS_PER_SHARD = 4, 5_000


def ingest(spark: Any, inputs: Any, context: Any) -> Any:
    """Raw events of this shard: ``id, shard, raw`` with a ``user:amount`` payload (some malformed)."""
    from pyspark.sql import functions as F

    lo = context.index * EVENTS_PER_SHARD
    return spark.range(lo, lo + EVENTS_PER_SHARD).select(
        F.col("id"), F.lit(context.index).alias("shard"),
        F.when(F.col("id") % 97 == 0, F.lit("garbage"))
        .otherwise(F.format_string("u%d:%d", F.pmod(F.hash("id"), F.lit(300)), F.pmod(F.col("id"), F.lit(1000))))
        .alias("raw"))


def parse(spark: Any, inputs: Any, context: Any) -> Any:
    """Split the payload; drop malformed events."""
    from pyspark.sql import functions as F

    parts = F.split(F.col("raw"), ":")
    return (inputs["ingest"].where(F.col("raw").contains(":"))
            .select("id", "shard", parts[0].alias("user"), parts[1].cast("int").alias("amount")))


def enrich(spark: Any, inputs: Any, context: Any) -> Any:
    """Per-user totals of this shard."""
    from pyspark.sql import functions as F

    return inputs["parse"].groupBy("shard", "user").agg(F.sum("amount").alias("amount"), F.count("*").alias("events"))


def summary(spark: Any, inputs: Any, context: Any) -> Any:
    """Totals per shard over every shard's committed partition."""
    from pyspark.sql import functions as F

    return (inputs["enrich"].groupBy("shard")
            .agg(F.sum("amount").alias("amount"), F.sum("events").alias("events"), F.count("*").alias("users"))
            .orderBy("shard"))


with DAG(
    dag_id="shard_pipeline",
    description="Per-shard POINTWISE/PIPELINED pipeline: one failover region per shard",
    schedule=None,
    start_date=datetime(2026, 1, 1),
    catchup=False,
    tags=["region-failover", "example"],
    doc_md=__doc__,
):
    job = RegionJob(restart_strategy="exponential-delay",
                    options={"restart-strategy.exponential-delay.initial-backoff": "1 s",
                             "restart-strategy.exponential-delay.max-backoff": "30 s"})
    job.step("ingest", ingest, parallelism=SHARDS, deterministic=True)
    job.step("parse", parse, parallelism=SHARDS, deterministic=True)
    job.step("enrich", enrich, parallelism=SHARDS, deterministic=True)
    job.step("summary", summary)
    job.edge("ingest", "parse", exchange="PIPELINED", distribution="POINTWISE")
    job.edge("parse", "enrich", exchange="PIPELINED", distribution="POINTWISE")
    job.edge("enrich", "summary", exchange="BLOCKING", distribution="BROADCAST")
    job.render()

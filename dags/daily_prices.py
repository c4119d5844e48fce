"""A scheduled daily job whose final result is published to a Delta Lake table, one table version per logical
date (docs/user/publishing.md)::

    catalog#0 ==+==> summary#0 --> summary.publish  (Delta table daily_price_summary, append)
    catalog#1 ==/

``catalog`` (2 subtasks, BLOCKING) is the day's price list of 4,000 products in two groups: *slowly changing* —
a group is repriced every other day, the two groups on alternate days, so each day one group's partition is
byte-for-byte yesterday's. The store keeps content-addressed objects once: the ``catalog`` tasks' logs say per
result how many bytes were uploaded and how many were already stored (``committed catalog#i …; uploaded X of Y
bytes``; 0 for the unchanged group, whichever of two neighbouring days commits second). ``summary``
totals the day per category and is the job's sink (the DAG param ``fail_once`` — the documented switch — makes
``summary#0`` fail on its first try: region failover restarts it *and* its publishing task, which the failure
left ``upstream_failed``); ``publish="daily_price_summary"`` commits it, after every
subtask of ``summary`` succeeded, as one Delta commit whose application transaction is the run's logical date:
a retry, a clear of the run or a second run of the same date never appends again. Read the table with
``deltalake.DeltaTable("s3://<store bucket>/<store prefix>/tables/daily_price_summary", storage_options=...)``
(``.history()``: one version per logical date), DuckDB over its Arrow dataset, or Spark's Delta reader. The
table is an Airflow Asset: a DAG with ``schedule=[published_table("daily_price_summary")]`` (``from
airflow_region_failover import published_table``) runs once per new table version, never for a re-run that
publishes nothing new.
"""

from __future__ import annotations

from datetime import date, datetime
from typing import Any

from airflow.sdk import DAG, Param

from airflow_region_failover import RegionJob

DAG_ID = "daily_prices"
TABLE = "daily_price_summary"
START = datetime(2026, 1, 1)
PRODUCTS_PER_GROUP = 2_000
REPRICE_EVERY_DAYS = 2
"""Group ``g`` (``catalog`` subtask g) gets new prices on the days ``d`` with ``(d + g) % REPRICE_EVERY_DAYS == 0``."""
CATEGORIES = ("books", "garden", "music", "toys")


def day_number(context: Any) -> tuple[str, int]:
    """The run's logical date (``ds``) and its number of days since 2026-01-01 (fixed outside Airflow)."""
    ds = str(context.airflow.get("ds") or "2026-01-01")
    return ds, (date.fromisoformat(ds) - date(2026, 1, 1)).days


def catalog(spark: Any, inputs: Any, context: Any) -> Any:
    """Products ``[i*N, (i+1)*N)``: category and the day's price (new ones every ``REPRICE_EVERY_DAYS`` days)."""
    from pyspark.sql import functions as F

    _, day = day_number(context)
    lo = context.index * PRODUCTS_PER_GROUP
    version = F.lit((day + context.index) // REPRICE_EVERY_DAYS)
    categories = F.array(*[F.lit(c) for c in CATEGORIES])
    return spark.range(lo, lo + PRODUCTS_PER_GROUP, numPartitions=1).select(
        F.col("id").alias("product_id"),
        F.element_at(categories, (F.col("id") % len(CATEGORIES) + 1).cast("int")).alias("category"),
        (F.lit(5) + F.col("id") % 97 + version * F.lit(0.25)).cast("decimal(10,2)").alias("price"),
    )  # one Spark partition in id order: the same prices give the same rows in the same order, so the same bytes


def summary(spark: Any, inputs: Any, context: Any) -> Any:
    """The day's price summary per category (the published rows)."""
    from pyspark.sql import functions as F

    if context.params.get("fail_once") and context.try_number == 1:
        raise RuntimeError("injected failure: summary#0 fails on its first try (DAG param fail_once)")
    ds, _ = day_number(context)
    return (inputs["catalog"].groupBy("category")
            .agg(F.count("*").alias("products"), F.avg("price").cast("decimal(10,4)").alias("avg_price"),
                 F.min("price").alias("min_price"), F.max("price").alias("max_price"))
            .select(F.lit(ds).cast("date").alias("day"), "*"))


with DAG(
    dag_id=DAG_ID,
    description="Scheduled daily job publishing its result to a Delta Lake table, once per logical date",
    schedule="@daily",
    start_date=START,
    catchup=False,
    max_active_runs=1,
    tags=["region-failover", "example", "delta"],
    params={"fail_once": Param(False, type="boolean", description="summary#0 fails on its first try")},
    doc_md=__doc__,
):
    job = RegionJob(restart_strategy="fixed-delay", options={"restart-strategy.fixed-delay.attempts": "2",
                                                             "restart-strategy.fixed-delay.delay": "1 s"})
    job.step("catalog", catalog, parallelism=2, deterministic=True)
    job.step("summary", summary, publish=TABLE, publish_mode="append")
    job.edge("catalog", "summary", exchange="BLOCKING", result="catalog")
    job.render()

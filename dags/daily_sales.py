"""A scheduled daily job whose graph is loaded from JSON (``daily_sales.json``) and whose last step is a PySpark
script spark-submitted as its own application (``scripts/daily_load.py``, through the apache-spark provider's
``SparkSubmitHook``; on ``local[*]`` unless ``[region_failover] spark_conn_id`` names a ``spark`` connection).

``extract#i -> transform#i`` (PIPELINED, POINTWISE) generate and price the day's sales of store group ``i`` — the
day is the run's logical date, so every daily run produces its own data; ``load`` (BLOCKING, BROADCAST) totals
the day per category.
"""

from __future__ import annotations

import os
from datetime import datetime
from typing import Any

from airflow.sdk import DAG

from airflow_region_failover import RegionJob

HERE = os.path.dirname(os.path.abspath(__file__))
SALES_PER_GROUP = 3_000
CATEGORIES = ("books", "garden", "music", "toys")


def day_of(context: Any) -> str:
    """The run's logical date as ``YYYY-MM-DD`` (``ds``), or a fixed day outside Airflow."""
    return str(context.airflow.get("ds") or "2026-01-01")


def extract(spark: Any, inputs: Any, context: Any) -> Any:
    """The day's raw sales of store group ``context.index`` (seeded by the day: reruns are identical)."""
    from pyspark.sql import functions as F

    day = day_of(context)
    seed = F.hash(F.lit(day))
    lo = context.index * SALES_PER_GROUP
    categories = F.array(*[F.lit(c) for c in CATEGORIES])
    return spark.range(lo, lo + SALES_PER_GROUP).select(
        F.col("id").alias("sale_id"), F.lit(day).cast("date").alias("day"),
        F.element_at(categories, (F.pmod(F.hash("id", seed), F.lit(len(CATEGORIES))) + 1).cast("int"))
        .alias("category"),
        (F.pmod(F.hash("id", seed, F.lit(1)), F.lit(5)) + 1).cast("int").alias("quantity"),
        (F.pmod(F.hash("id", seed, F.lit(2)), F.lit(5000)) / 100 + 1).cast("decimal(8,2)").alias("unit_price"))


def transform(spark: Any, inputs: Any, context: Any) -> Any:
    """Price every sale."""
    from pyspark.sql import functions as F

    return inputs["extract"].withColumn("amount", (F.col("quantity") * F.col("unit_price")).cast("decimal(12,2)"))


with DAG(
    dag_id="daily_sales",
    description="Scheduled daily job from a JSON job graph, with a spark-submitted script step",
    schedule="@daily",
    start_date=datetime(2026, 1, 1),
    catchup=False,
    max_active_runs=1,
    tags=["region-failover", "example"],
    doc_md=__doc__,
):
    RegionJob.from_json(
        os.path.join(HERE, "daily_sales.json"),
        steps={"extract": extract, "transform": transform, "load": os.path.join(HERE, "scripts", "daily_load.py")},
        restart_strategy="failure-rate",
        options={"restart-strategy.failure-rate.max-failures-per-interval": "3",
                 "restart-strategy.failure-rate.failure-rate-interval": "10 min"},
    ).render()

"""Script step of ``daily_sales``: spark-submitted as its own application; totals the day per category."""

from __future__ import annotations

from typing import Any

from airflow_region_failover import run_script_step


def load(spark: Any, inputs: Any, context: Any) -> Any:
    """Revenue, sales and items per category for the day (over every transform partition)."""
    from pyspark.sql import functions as F

    return (inputs["daily_sales"].groupBy("day", "category")
            .agg(F.sum("amount").alias("revenue"), F.count("*").alias("sales"), F.sum("quantity").alias("items"))
            .orderBy("category"))


if __name__ == "__main__":
    run_script_step(load)

"""The keyed-exchange e2e DAG ``rf_e2e_keyed``::

    gen#0 ==+==> agg#0        gen (2) =BLOCKING ALL_TO_ALL, partition_by ["k"]=> agg (4): each agg subtask
    gen#1 ==+==> agg#1        reads only its key groups (its subpartition) of both gen partitions and sums per
             ==> agg#2        key; agg's result is its sink (BLOCKING). Regions: {gen#0}, {gen#1}, {agg#0} ...
             ==> agg#3

DAG param ``fail``: subtask ids that raise on their first try (e.g. ``["agg#1"]``).
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from airflow.sdk import DAG, Param

from airflow_region_failover import RegionJob
from tests.support.e2e_steps import fail_first_try, row_slice

ROWS, KEYS = 40_000, 1_009


def generate(spark: Any, lo: int, hi: int) -> Any:
    """Rows ``lo .. hi-1``: key ``k`` (``id % KEYS``) and a value."""
    return spark.range(lo, hi).selectExpr("id", f"id % {KEYS} AS k", "id * 3 AS v")


def totals(rows: Any) -> Any:
    """Per key: the sum of the values and the row count."""
    from pyspark.sql import functions as F

    return rows.groupBy("k").agg(F.sum("v").alias("total"), F.count("*").alias("n"))


def expected(spark: Any) -> Any:
    """What a correct run commits, computed directly in one Spark job."""
    return totals(generate(spark, 0, ROWS))


def step_gen(spark: Any, inputs: Any, context: Any) -> Any:
    return generate(spark, *row_slice(context, ROWS))


def step_agg(spark: Any, inputs: Any, context: Any) -> Any:
    fail_first_try(context)
    return totals(inputs["gen"])


with DAG(dag_id="rf_e2e_keyed", schedule=None, start_date=datetime(2026, 1, 1), catchup=False,
         tags=["region-failover", "e2e"], params={"fail": Param([], type="array")}) as dag:
    job = RegionJob(failover_strategy="region", restart_strategy="fixed-delay",
                    options={"restart-strategy.fixed-delay.attempts": "2", "restart-strategy.fixed-delay.delay": "1 s"})
    job.step("gen", step_gen, parallelism=2)
    job.step("agg", step_agg, parallelism=4)
    job.edge("gen", "agg", exchange="BLOCKING", partition_by=["k"])
    job.render()

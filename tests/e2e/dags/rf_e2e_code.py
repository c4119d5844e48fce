"""A DAG whose step code the end-to-end tests change between two runs of the same DAG run (a manual clear after
a code fix): the test copies this file into the DAGs folder and rewrites ``FACTOR``.

    src#0 ==> scale#0        src -BLOCKING POINTWISE-> scale (parallelism 2)
    src#1 ==> scale#1
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from airflow.sdk import DAG

from airflow_region_failover import RegionJob

FACTOR = 2


def src(spark: Any, inputs: Any, context: Any) -> Any:
    return spark.range(10 * context.index, 10 * (context.index + 1)).selectExpr("id")


def scale(spark: Any, inputs: Any, context: Any) -> Any:
    return inputs["src"].selectExpr(f"id * {FACTOR} AS v")


with DAG(dag_id="rf_e2e_code", schedule=None, start_date=datetime(2026, 1, 1), catchup=False,
         tags=["region-failover", "e2e"]):
    job = RegionJob(options={"restart-strategy.type": "fixed-delay", "restart-strategy.fixed-delay.attempts": "3",
                             "restart-strategy.fixed-delay.delay": "1 s"})
    job.step("src", src, parallelism=2, deterministic=True)
    job.step("scale", scale, parallelism=2)
    job.edge("src", "scale", exchange="BLOCKING", distribution="POINTWISE")
    job.render()

"""The sliced-chain e2e DAG (``tests/e2e/local/test_sliced_e2e.py``): two rescalable steps, so each subtask may run
as the epochs its run's plan fixed, each epoch a virtual subtask (``graph/slicing.py``)::

    gen#0,1 ==BLOCKING keyed by k==> total#0,1 ==BLOCKING==> report#0       (gen, total rescalable)

DAG param ``fail``: subtask ids that raise on their first try — in a sliced chain the *virtual* subtask's id: with
``total`` in 3 epochs, ``total#1`` (of 6) is total#0's epoch 1.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from airflow.sdk import DAG, Param

from airflow_region_failover import RegionJob
from tests.support.e2e_steps import fail_first_try, row_slice

DAG_ID = "rf_sliced"
ROWS, KEYS = 30_000, 1_009


def expected() -> list[tuple[int, int, int]]:
    """``(k, total, n)`` per key, computed directly in Python."""
    out: dict[int, list[int]] = {}
    for i in range(ROWS):
        entry = out.setdefault(i % KEYS, [0, 0])
        entry[0] += i * 3
        entry[1] += 1
    return sorted((k, t, n) for k, (t, n) in out.items())


def step_gen(spark: Any, inputs: Any, context: Any) -> Any:
    lo, hi = row_slice(context, ROWS)
    return spark.range(lo, hi).selectExpr(f"id % {KEYS} AS k", "id * 3 AS v")


def step_total(spark: Any, inputs: Any, context: Any) -> Any:
    from pyspark.sql import functions as F

    fail_first_try(context)
    return inputs["gen"].groupBy("k").agg(F.sum("v").alias("total"), F.count("v").alias("n"))


def step_report(spark: Any, inputs: Any, context: Any) -> Any:
    return inputs["total"]


with DAG(dag_id=DAG_ID, schedule=None, start_date=datetime(2026, 1, 1), catchup=False,
         tags=["region-failover", "e2e"], params={"fail": Param([], type="array")}):
    job = RegionJob(failover_strategy="region", restart_strategy="fixed-delay",
                    options={"restart-strategy.fixed-delay.attempts": "2",
                             "restart-strategy.fixed-delay.delay": "1 s"})
    job.step("gen", step_gen, parallelism=2, rescalable=True)
    job.step("total", step_total, parallelism=2, rescalable=True)
    job.step("report", step_report)
    job.edge("gen", "total", exchange="BLOCKING", partition_by=["k"])
    job.edge("total", "report", exchange="BLOCKING", distribution="BROADCAST")
    job.render()

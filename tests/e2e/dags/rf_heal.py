"""A DAG for the fault test of a corrupted shared object (``tests/e2e/local/test_heal_e2e.py``): every run of it
produces the same bytes for ``make#0`` — one content-addressed object that every run lists — and its consumer
waits at a gate (run conf ``gate``: a directory; ``sums#0`` writes ``<gate>/sums#0.started`` and waits for
``<gate>/go`` on its first try), so a test can corrupt the object while two runs are about to read it.

    make#0 ==> sums#0        make -BLOCKING-> sums (the rows' count and sum per key)
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from airflow.sdk import DAG, Param

from airflow_region_failover import RegionJob
from tests.support.gate import wait_at_gate

ROWS = 20_000
KEYS = 13


def make(spark: Any, inputs: Any, context: Any) -> Any:
    """The same rows in one Spark partition in every run (so the same bytes: one shared object)."""
    return spark.range(0, ROWS, 1, 1).selectExpr("id", f"id % {KEYS} AS k", "sha2(cast(id AS string), 256) AS h",
                                                 "'rf_heal' AS source")


def sums(spark: Any, inputs: Any, context: Any) -> Any:
    """Per key: how many rows and the sum of their ids; on its first try it first waits at the run's gate."""
    wait_at_gate(context, "sums#0")
    return inputs["make"].groupBy("k").agg({"id": "sum", "h": "count"}).withColumnRenamed("sum(id)", "total") \
        .withColumnRenamed("count(h)", "n")


def expected() -> dict[int, tuple[int, int]]:
    """``k -> (total, n)`` computed directly in Python."""
    out: dict[int, tuple[int, int]] = {}
    for i in range(ROWS):
        total, n = out.get(i % KEYS, (0, 0))
        out[i % KEYS] = (total + i, n + 1)
    return out


with DAG(dag_id="rf_heal", schedule=None, start_date=datetime(2026, 1, 1), catchup=False,
         params={"gate": Param("", type="string")}, tags=["region-failover", "e2e"]):
    # the restart waits 30 s: both runs' consumers have read the corrupt object before either producer restarts
    job = RegionJob(options={"restart-strategy.type": "fixed-delay", "restart-strategy.fixed-delay.attempts": "3",
                             "restart-strategy.fixed-delay.delay": "30 s"})
    job.step("make", make)
    job.step("sums", sums)
    job.edge("make", "sums", exchange="BLOCKING")
    job.render()

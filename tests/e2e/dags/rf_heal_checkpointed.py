"""A DAG for the fault test of a checkpointed producer's corrupted output (``tests/e2e/local/
test_heal_checkpointed_e2e.py``): ``count`` is checkpointed (one epoch per object of its input, a running count
per key as state, every checkpoint retained), so its committed result is one object per epoch, each listed by the
checkpoints after it; its consumer ``sums`` waits at a gate (run conf ``gate``: a directory; ``sums#0`` writes
``<gate>/sums#0.started`` and waits for ``<gate>/go`` on its first try), so a test can corrupt one of ``count``'s
objects while it is about to be read.

    make#0 ==> count#0 ==> sums#0     make -BLOCKING-> count (checkpointed, 3 epochs) -BLOCKING-> sums
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from airflow.sdk import DAG, Param

from airflow_region_failover import Checkpoint, RegionJob
from tests.support.gate import wait_at_gate

DAG_ID = "rf_heal_checkpointed"
EPOCHS = 3
ROWS = 9_000
KEYS = 11
STATE = "k long, n long"


def make(spark: Any, inputs: Any, context: Any) -> Any:
    """The same rows in every run, in :data:`EPOCHS` Spark partitions (one object each: one per epoch)."""
    return spark.range(0, ROWS, 1, EPOCHS).selectExpr("id", f"id % {KEYS} AS k")


def count(spark: Any, inputs: Any, state: Any, context: Any) -> Any:
    """One epoch: the running count of rows per key (the state), and, as the output, each key's count after this
    epoch (one object per epoch)."""
    from pyspark.sql import functions as F

    seen = inputs["make"].groupBy("k").agg(F.count("*").alias("d"))
    merged = state.join(seen, "k", "full_outer").select(
        "k", (F.coalesce(F.col("n"), F.lit(0)) + F.coalesce(F.col("d"), F.lit(0))).cast("long").alias("n"))
    out = merged.withColumn("epoch", F.lit(context.epoch.index).cast("long")).coalesce(1).sortWithinPartitions("k")
    return out, merged


def sums(spark: Any, inputs: Any, context: Any) -> Any:
    """Per key: its final count (the last epoch's) and in how many epochs it was counted; on its first try it first
    waits at the run's gate."""
    from pyspark.sql import functions as F

    wait_at_gate(context, "sums#0")
    return inputs["count"].groupBy("k").agg(F.max("n").alias("n"), F.count("*").alias("epochs"))


def expected() -> dict[int, tuple[int, int]]:
    """``k -> (n, epochs)`` computed directly in Python."""
    out: dict[int, tuple[int, int]] = {}
    for i in range(ROWS):
        n, _ = out.get(i % KEYS, (0, 0))
        out[i % KEYS] = (n + 1, EPOCHS)
    return out


with DAG(dag_id=DAG_ID, schedule=None, start_date=datetime(2026, 1, 1), catchup=False,
         params={"gate": Param("", type="string")}, tags=["region-failover", "e2e", "checkpoints"]):
    job = RegionJob(options={"restart-strategy.type": "fixed-delay", "restart-strategy.fixed-delay.attempts": "3",
                             "restart-strategy.fixed-delay.delay": "1 s",
                             "state.checkpoints.num-retained": str(EPOCHS)})
    job.step("make", make)
    job.step("count", count, checkpoint=Checkpoint(state_key=["k"], state_schema=STATE, epochs=EPOCHS))
    job.step("sums", sums)
    job.edge("make", "count", exchange="BLOCKING")
    job.edge("count", "sums", exchange="BLOCKING")
    job.render()

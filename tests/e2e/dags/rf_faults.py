"""DAGs for the failure-injection matrix at the S3 boundary (``tests/e2e/faults/test_s3_faults_e2e.py``): an
ordinary producer and a checkpointed one, each with a consumer that may wait at a gate (run conf ``gate``: a
directory; the consumer writes ``<gate>/sums#0.started`` and waits for ``<gate>/go`` on its first try), so a test
can break the producer's committed objects before they are read. Run conf ``salt`` goes into every object the
producers write, so concurrent runs with different salts share no content-addressed object; the consumer's rows
do not depend on it.

    make#0 ==> sums#0                    rf_faults: make -BLOCKING-> sums (count and sum of ids per key)
    make#0 ==> count#0 ==> sums#0        rf_faults_checkpointed: count checkpointed (3 epochs, all retained)
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from airflow.sdk import DAG, Param

from airflow_region_failover import Checkpoint, RegionJob
from tests.support.gate import wait_at_gate

DAG_IDS = ("rf_faults", "rf_faults_checkpointed")
ROWS = 9_000
KEYS = 11
EPOCHS = 3
STATE = "k long, n long"
OPTIONS = {"restart-strategy.type": "fixed-delay", "restart-strategy.fixed-delay.attempts": "3",
           "restart-strategy.fixed-delay.delay": "1 s"}


def _salt(context: Any) -> int:
    return int(context.params.get("salt") or 0)


def make(spark: Any, inputs: Any, context: Any) -> Any:
    """The same rows in every run of one salt, in one Spark partition (one object)."""
    return spark.range(0, ROWS, 1, 1).selectExpr("id", f"id % {KEYS} AS k", f"{_salt(context)} AS salt")


def make_epochs(spark: Any, inputs: Any, context: Any) -> Any:
    """The same rows in :data:`EPOCHS` Spark partitions (one object each: ``count`` reads one per epoch)."""
    return spark.range(0, ROWS, 1, EPOCHS).selectExpr("id", f"id % {KEYS} AS k", f"{_salt(context)} AS salt")


def count(spark: Any, inputs: Any, state: Any, context: Any) -> Any:
    """One epoch: the running count of rows per key (the state) and, as the output, each key's count after this
    epoch (one object per epoch)."""
    from pyspark.sql import functions as F

    seen = inputs["make"].groupBy("k").agg(F.count("*").alias("d"))
    merged = state.join(seen, "k", "full_outer").select(
        "k", (F.coalesce(F.col("n"), F.lit(0)) + F.coalesce(F.col("d"), F.lit(0))).cast("long").alias("n"))
    out = merged.withColumn("epoch", F.lit(context.epoch.index).cast("long")) \
        .withColumn("salt", F.lit(_salt(context)).cast("long")).coalesce(1).sortWithinPartitions("k")
    return out, merged


def sums(spark: Any, inputs: Any, context: Any) -> Any:
    """Per key: how many rows and the sum of their ids (``rf_faults``), or its final count and in how many epochs
    it was counted (``rf_faults_checkpointed``); first waits at the run's gate."""
    from pyspark.sql import functions as F

    wait_at_gate(context, "sums#0")
    if "count" in inputs:
        return inputs["count"].groupBy("k").agg(F.max("n").alias("n"), F.count("*").alias("total"))
    return inputs["make"].groupBy("k").agg(F.count("*").alias("n"), F.sum("id").alias("total"))


def expected(dag_id: str) -> dict[int, tuple[int, int]]:
    """``k -> (n, total)`` of ``sums#0``, computed directly in Python (``total``: the epochs for the checkpointed
    DAG)."""
    out: dict[int, tuple[int, int]] = {}
    for i in range(ROWS):
        n, total = out.get(i % KEYS, (0, 0))
        out[i % KEYS] = (n + 1, EPOCHS if dag_id == DAG_IDS[1] else total + i)
    return out


PARAMS = {"gate": Param("", type="string"), "salt": Param(0, type="integer")}
with DAG(dag_id=DAG_IDS[0], schedule=None, start_date=datetime(2026, 1, 1), catchup=False, params=PARAMS,
         tags=["region-failover", "e2e"]):
    job = RegionJob(options=OPTIONS)
    job.step("make", make)
    job.step("sums", sums)
    job.edge("make", "sums", exchange="BLOCKING")
    job.render()

with DAG(dag_id=DAG_IDS[1], schedule=None, start_date=datetime(2026, 1, 1), catchup=False, params=PARAMS,
         tags=["region-failover", "e2e", "checkpoints"]):
    job = RegionJob(options={**OPTIONS, "state.checkpoints.num-retained": str(EPOCHS)})
    job.step("make", make_epochs)
    job.step("count", count, checkpoint=Checkpoint(state_key=("k",), state_schema=STATE, epochs=EPOCHS))
    job.step("sums", sums)
    job.edge("make", "count", exchange="BLOCKING")
    job.edge("count", "sums", exchange="BLOCKING")
    job.render()

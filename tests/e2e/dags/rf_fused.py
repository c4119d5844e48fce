"""The fused-region e2e DAGs: one job with an AUTO keyed exchange, rendered under both plans::

    gen#0,1 --AUTO keyed by k--> agg#0..3 ==BLOCKING==> report#0

* ``rf_e2e_fused``: the plan fuses ``gen->agg``: one task ``gen.agg.0`` runs the region's six subtasks in one Spark
  session, the keyed exchange in memory (``gen`` is rescalable: it runs as one subtask, called once, and each agg
  subtask reads its key groups of it); ``report.0`` reads the four committed agg partitions.
* ``rf_e2e_fused_blocking``: the plan commits it: tasks ``gen.0``, ``gen.1``, ``agg.0`` .. ``agg.3``, ``report.0``.
* ``rf_e2e_fused_per_run``: rendered ``PER_RUN``: always the one task ``gen.agg.0``, each run under its own plan,
  chosen by a planner that looks at the newest 3 runs (so an old failure stops counting) and switches on any gain
  (margin 0: the tiny job's persisting costs well under the default 10 % of a run).

DAG param ``fail``: subtask ids that raise on their first try (e.g. ``["agg#1"]``).
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from airflow.sdk import DAG, Param

from airflow_region_failover import PER_RUN, PlannerPolicy, RegionJob
from airflow_region_failover.graph.auto import Choice, ExchangePlan
from tests.support.e2e_steps import fail_first_try, row_slice

ROWS, KEYS = 40_000, 1_009
PLANNER = PlannerPolicy(window=3, margin=0.0)


def generate(spark: Any, lo: int, hi: int) -> Any:
    """Rows ``lo .. hi-1``: key ``k`` and a value."""
    return spark.range(lo, hi).selectExpr(f"id % {KEYS} AS k", "id * 3 AS v")


def expected(spark: Any) -> Any:
    """What a correct run's report commits, computed directly in one Spark job."""
    from pyspark.sql import functions as F

    return generate(spark, 0, ROWS).groupBy("k").agg(F.sum("v").alias("total"))


def step_gen(spark: Any, inputs: Any, context: Any) -> Any:
    return generate(spark, *row_slice(context, ROWS))


def step_agg(spark: Any, inputs: Any, context: Any) -> Any:
    from pyspark.sql import functions as F

    fail_first_try(context)
    return inputs["gen"].groupBy("k").agg(F.sum("v").alias("total"))


def step_report(spark: Any, inputs: Any, context: Any) -> Any:
    return inputs["agg"]


for dag_id, plan in (("rf_e2e_fused", ExchangePlan({"gen->agg": Choice.FUSED})),
                     ("rf_e2e_fused_blocking", ExchangePlan()), ("rf_e2e_fused_per_run", PER_RUN)):
    with DAG(dag_id=dag_id, schedule=None, start_date=datetime(2026, 1, 1), catchup=False,
             tags=["region-failover", "e2e"], params={"fail": Param([], type="array")}):
        job = RegionJob(failover_strategy="region", restart_strategy="fixed-delay",
                        options={"restart-strategy.fixed-delay.attempts": "2",
                                 "restart-strategy.fixed-delay.delay": "1 s"})
        job.step("gen", step_gen, parallelism=2, rescalable=True)  # fused: one call, gen#0 of 1 (graph.rescaling)
        job.step("agg", step_agg, parallelism=4)
        job.step("report", step_report)
        job.edge("gen", "agg", exchange="AUTO", partition_by=["k"])
        job.edge("agg", "report", exchange="BLOCKING", distribution="BROADCAST")
        job.render(plan=plan, planner=PLANNER if plan is PER_RUN else None)

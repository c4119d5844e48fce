"""A fused task keeps a region whose first member comes before another region's producer in step order: a try runs
its members region by region, so the region's inputs are known when it is decided (real Spark, SeaweedFS).

    left#0 --AUTO, FUSED--> join#0 --AUTO, BLOCKING--> fin#0 ==B==> sink#0     one task (PER_RUN); fin#0 fails
    right#0 --AUTO, BLOCKING--^                                               on try 1
    regions of the plan: left#0+join#0 | right#0 | fin#0      step order: left, right, join, fin
"""

from __future__ import annotations

from typing import Any

import pytest
from airflow.sdk import DAG as AirflowDAG

from airflow_region_failover import PER_RUN, PartitionId, RegionJob, SubtaskId
from airflow_region_failover.decisions.plans import Plans
from airflow_region_failover.graph.auto import Choice, ExchangePlan
from airflow_region_failover.job import JobRuntime
from airflow_region_failover.planning.stored import PlanDecision
from airflow_region_failover.spark.fused import run_fused
from airflow_region_failover.store.result_store import ResultStore
from tests.integration.test_fused_spark import DAG, FakeTI, patch, spark, store  # noqa: F401 - the fixtures

pytestmark = pytest.mark.integration

PLAN = ExchangePlan({"left->join": Choice.FUSED, "right->join": Choice.BLOCKING, "join->fin": Choice.BLOCKING})


class Steps:
    def __init__(self) -> None:
        self.calls: list[str] = []
        self.failed = False

    def source(self, session: Any, inputs: Any, context: Any) -> Any:
        self.calls.append(str(context.subtask))
        return session.range(0, 40).selectExpr("id % 5 AS k", f"id * {len(str(context.subtask))} AS v")

    def join(self, session: Any, inputs: Any, context: Any) -> Any:
        self.calls.append(str(context.subtask))
        return inputs["left"].join(inputs["right"].withColumnRenamed("v", "w"), "k").groupBy("k").sum("v", "w")

    def fin(self, session: Any, inputs: Any, context: Any) -> Any:
        self.calls.append(str(context.subtask))
        if not self.failed:
            self.failed = True
            raise RuntimeError("injected failure of fin#0")
        return inputs["join"]

    def sink(self, session: Any, inputs: Any, context: Any) -> None:
        return None


def _runtime(steps: Steps) -> tuple[JobRuntime, str]:
    job = RegionJob(default_exchange="AUTO")
    for step, fn in (("left", steps.source), ("right", steps.source), ("join", steps.join), ("fin", steps.fin),
                     ("sink", steps.sink)):
        job.step(step, fn)
    job.edge("left", "join").edge("right", "join").edge("join", "fin")
    job.edge("fin", "sink", exchange="BLOCKING")
    with AirflowDAG(DAG, schedule=None):
        rendered = job.render(plan=PER_RUN)
    found: JobRuntime = rendered.task("fin#0").runtime
    return found, found.spec.names.task_id(SubtaskId("fin", 0))


def test_a_region_read_by_a_later_regions_producer_is_kept_after_a_failure(
        spark: Any, store: ResultStore, monkeypatch: pytest.MonkeyPatch) -> None:  # noqa: F811 - the fixtures
    patch(monkeypatch, store, spark)
    Plans(store.objects).decide_next(DAG, PlanDecision("d1", PLAN, "mixed", 1.0, ""))
    steps = Steps()
    runtime, task = _runtime(steps)
    members = runtime.spec.names.subtasks(task) or ()
    assert {str(m) for m in members} == {"left#0", "right#0", "join#0", "fin#0"}
    with pytest.raises(RuntimeError, match="injected failure"):
        run_fused(runtime, members, {"ti": FakeTI({}, "order", task), "params": {}})
    assert steps.calls == ["right#0", "left#0", "join#0", "fin#0"]  # right's region first: join reads it
    steps.calls.clear()
    summary = run_fused(runtime, members, {"ti": FakeTI({}, "order", task, try_number=2), "params": {}})
    assert steps.calls == ["fin#0"]  # left#0+join#0 kept whole, right#0 kept
    assert {p for p, o in summary.ledger.outputs.items() if o.kept} == {"right->join#0", "join->fin#0"}
    undisturbed = Steps()
    undisturbed.failed = True
    again, _ = _runtime(undisturbed)
    run_fused(again, members, {"ti": FakeTI({}, "undisturbed", task), "params": {}})

    def rows(run_id: str) -> list[tuple[Any, ...]]:
        return sorted(tuple(r) for r in store.read(spark, DAG, run_id, PartitionId("fin->sink", 0)).collect())

    assert rows("order") == rows("undisturbed") != []

"""A fused task of a job rendered PER_RUN on real Spark and a real S3 store (SeaweedFS): it follows the run's plan,
fixed once, and a retried try resumes the members an earlier try committed.

    src#0,1 ==B==> gen#0,1 --AUTO, keyed by k--> agg#0,1 --AUTO, pointwise--> fin#0,1 ==B==> sink#0
                   \\______________ one task gen.agg.fin.0 (every run) ______________/
    plan all BLOCKING: gen->agg and agg->fin committed inside the task; plan all FUSED: both stay in Spark;
    plan MIXED (gen->agg BLOCKING, agg->fin FUSED): regions gen#0 | gen#1 | agg#0+fin#0 | agg#1+fin#1
"""

from __future__ import annotations

import secrets
from collections.abc import Iterator
from typing import Any

import pytest
from airflow.sdk import DAG as AirflowDAG

from airflow_region_failover import PER_RUN, PartitionId, RegionJob, SubtaskId, timeline
from airflow_region_failover.decisions.failed_tries import FailedTries
from airflow_region_failover.decisions.plans import Plans
from airflow_region_failover.graph.auto import Choice, ExchangePlan
from airflow_region_failover.job import JobRuntime
from airflow_region_failover.planning.stored import PlanDecision
from airflow_region_failover.spark.fused import run_fused
from airflow_region_failover.spark.ledger import TaskSummary
from airflow_region_failover.standalone.seaweedfs import S3Endpoint
from airflow_region_failover.store.result_store import ResultStore
from tests.integration.test_fused_spark import DAG, FakeTI, commit_src, patch
from tests.support.spark import embedded
from tests.support.store import on_server

pytestmark = pytest.mark.integration

TASK = "gen.agg.fin.0"
FUSED = ExchangePlan({"gen->agg": Choice.FUSED, "agg->fin": Choice.FUSED})
MIXED = ExchangePlan({"gen->agg": Choice.BLOCKING, "agg->fin": Choice.FUSED})


@pytest.fixture(scope="module")
def spark() -> Iterator[Any]:
    yield from embedded(shuffle_partitions=2)


@pytest.fixture
def store(s3_server: S3Endpoint, request: pytest.FixtureRequest) -> ResultStore:
    return on_server(s3_server, f"runplan-{secrets.token_hex(4)}", spark_io=getattr(request, "param", "driver"))


class Steps:
    """The step functions; each call's subtask is recorded, and ``fail`` names a subtask whose first call raises."""

    def __init__(self, fail: str | None = None, salted: bool = False) -> None:
        self.calls: list[str] = []
        self.fail = fail
        self.salted = salted  # gen's rows differ on every call (a nondeterministic producer)
        self.made = 0

    def gen(self, spark: Any, inputs: Any, context: Any) -> Any:
        self.calls.append(str(context.subtask))
        self.made += 1
        salt = self.made if self.salted and context.subtask.step == "gen" else 0
        return inputs["src"].selectExpr("id % 7 AS k", f"id * {context.index + 1} + {salt} AS v")

    def agg(self, spark: Any, inputs: Any, context: Any) -> Any:
        self.calls.append(str(context.subtask))
        return inputs["gen"].groupBy("k").sum("v").withColumnRenamed("sum(v)", "total")

    def fin(self, spark: Any, inputs: Any, context: Any) -> Any:
        self.calls.append(str(context.subtask))
        if str(context.subtask) == self.fail:
            self.fail = None
            raise RuntimeError(f"injected failure of {context.subtask}")
        return inputs["agg"].selectExpr("k", "total * 2 AS doubled")

    def sink(self, spark: Any, inputs: Any, context: Any) -> None:
        return None


def runtime(steps: Steps) -> JobRuntime:
    job = RegionJob(default_exchange="AUTO")
    job.step("src", steps.gen, parallelism=2)
    job.step("gen", steps.gen, parallelism=2, reuse=not steps.salted)
    job.step("agg", steps.agg, parallelism=2)
    job.step("fin", steps.fin, parallelism=2)
    job.step("sink", steps.sink)
    job.edge("src", "gen", exchange="BLOCKING", distribution="POINTWISE")
    job.edge("gen", "agg", partition_by=["k"]).edge("agg", "fin", distribution="POINTWISE")
    job.edge("fin", "sink", exchange="BLOCKING", distribution="BROADCAST")
    with AirflowDAG(DAG, schedule=None):
        rendered = job.render(plan=PER_RUN)
    found: JobRuntime = rendered.task("gen#0").runtime
    assert found.spec.names.task_id(SubtaskId("fin", 1)) == TASK
    return found


def run(store: ResultStore, steps: Steps, run_id: str, try_number: int = 1) -> Any:
    ti = FakeTI(commit_src(store, run_id) if try_number == 1 else _src(store, run_id), run_id, TASK,
                try_number=try_number)
    fused = runtime(steps)
    return run_fused(fused, fused.spec.names.subtasks(TASK) or (), {"ti": ti, "params": {}}), ti


def _src(store: ResultStore, run_id: str) -> dict[tuple[str, str], Any]:
    from airflow_region_failover.graph.model import Exchange
    from airflow_region_failover.naming import xcom_key
    from airflow_region_failover.spark.exchange import PartitionRef

    return {(f"src.{i}", xcom_key("src->gen")): PartitionRef("src->gen", i, Exchange.BLOCKING, DAG, run_id, 1,
                                                             50).to_json() for i in (0, 1)}


def published(summary: Any) -> list[str]:
    """The XCom keys of every partition the summary lists (``result#i`` published as ``partition:result:i``)."""
    return sorted(f"partition:{p.replace('#', ':')}" for p in summary.ledger.outputs)


def rows(spark: Any, store: ResultStore, run_id: str) -> list[tuple[int, int]]:
    frames = [store.read(spark, DAG, run_id, PartitionId("fin->sink", i)) for i in (0, 1)]
    return sorted((r.k, r.doubled) for f in frames for r in f.collect())


def test_the_fused_task_commits_what_the_runs_plan_persists_and_keeps_the_rest_in_spark(
        spark: Any, store: ResultStore, monkeypatch: pytest.MonkeyPatch) -> None:
    patch(monkeypatch, store, spark)
    plans = Plans(store.objects)
    summary, ti = run(store, Steps(), "blocking")  # no decision stored: every AUTO result BLOCKING
    fixed = plans.of_run(DAG, "blocking")
    assert fixed is not None and fixed.plan.fused == ()
    assert len(store.partitions(DAG, "blocking", "gen->agg")) == 2
    assert len(store.partitions(DAG, "blocking", "agg->fin")) == 2
    assert set(summary.ledger.outputs) == {f"{r}#{i}" for r in ("gen->agg", "agg->fin", "fin->sink") for i in (0, 1)}
    assert sorted(ti.pushed) == published(summary)  # like any BLOCKING result

    plans.decide_next(DAG, PlanDecision("d1", FUSED, "switches", 1.0, "blocking"))
    summary, _ = run(store, Steps(), "fused")
    assert plans.of_run(DAG, "fused").plan == FUSED  # type: ignore[union-attr]
    assert store.partitions(DAG, "fused", "gen->agg") == () and store.partitions(DAG, "fused", "agg->fin") == ()
    assert set(summary.ledger.outputs) == {"fin->sink#0", "fin->sink#1"}
    assert rows(spark, store, "fused") == rows(spark, store, "blocking") != []


def test_a_retried_try_resumes_the_members_an_earlier_try_committed(
        spark: Any, store: ResultStore, monkeypatch: pytest.MonkeyPatch) -> None:
    patch(monkeypatch, store, spark)
    steps = Steps(fail="fin#1")
    with pytest.raises(RuntimeError, match="injected failure of fin#1"):
        run(store, steps, "resume")
    assert steps.calls == ["gen#0", "gen#1", "agg#0", "agg#1", "fin#0", "fin#1"]
    steps.calls.clear()
    summary, ti = run(store, steps, "resume", try_number=2)
    assert steps.calls == ["fin#1"]  # every other member's outputs were committed from the same inputs and code
    kept = {p for p, o in summary.ledger.outputs.items() if o.kept}
    assert kept == {"gen->agg#0", "gen->agg#1", "agg->fin#0", "agg->fin#1", "fin->sink#0"}
    assert summary.ledger.outputs["fin->sink#1"].attempt == 2 and summary.ledger.outputs["gen->agg#0"].attempt == 1
    assert sorted(ti.pushed) == published(summary)  # the kept ones again too
    expected = Steps()
    run(store, expected, "undisturbed")
    assert rows(spark, store, "resume") == rows(spark, store, "undisturbed") != []


def test_under_the_fused_plan_a_retried_try_recomputes_the_whole_region(
        spark: Any, store: ResultStore, monkeypatch: pytest.MonkeyPatch) -> None:
    patch(monkeypatch, store, spark)
    Plans(store.objects).decide_next(DAG, PlanDecision("d1", FUSED, "switches", 1.0, ""))
    steps = Steps(fail="fin#1")
    with pytest.raises(RuntimeError):
        run(store, steps, "whole")
    steps.calls.clear()
    summary, _ = run(store, steps, "whole", try_number=2)
    assert steps.calls == ["gen#0", "gen#1", "agg#0", "agg#1", "fin#0", "fin#1"]  # fin#0's commit reads memory
    assert not any(o.kept for o in summary.ledger.outputs.values())


@pytest.mark.parametrize("store", ["driver", "executors"], indirect=True)  # Arrow in the driver, and the JVM's writer
def test_under_a_mixed_plan_a_retried_try_keeps_every_region_the_failure_did_not_touch(
        spark: Any, store: ResultStore, monkeypatch: pytest.MonkeyPatch) -> None:
    """gen#0 | gen#1 ==B==> agg#0 -F-> fin#0 | agg#1 -F-> fin#1 (fails on try 1): try 2 runs only agg#1, fin#1's
    region; agg#0+fin#0 is kept whole — its commit records the BLOCKING inputs agg#0 read, byte-identical now."""
    patch(monkeypatch, store, spark)
    Plans(store.objects).decide_next(DAG, PlanDecision("d1", MIXED, "mixed", 1.0, ""))
    steps = Steps(fail="fin#1")
    with timeline.measured(), pytest.raises(RuntimeError, match="injected failure of fin#1"):
        run(store, steps, "mixed")
    assert steps.calls == ["gen#0", "gen#1", "agg#0", "fin#0", "agg#1", "fin#1"]  # region by region
    recorded = store.manifest(DAG, "mixed", PartitionId("fin->sink", 0)).inputs
    assert sorted(str(v.partition) for v in recorded) == ["gen->agg#0", "gen->agg#1"]  # what agg#0 read
    failed = [TaskSummary.from_json(b) for b in FailedTries(store.objects).of_run(DAG, "mixed")[TASK]]
    assert [str(m) for m in failed[0].members] == ["gen#0", "gen#1", "agg#0", "fin#0"]  # agg#1 ran in no commit
    assert failed[0].timeline is not None and set(failed[0].ledger.outputs) == {
        "gen->agg#0", "gen->agg#1", "fin->sink#0"}
    steps.calls.clear()
    summary, ti = run(store, steps, "mixed", try_number=2)
    assert steps.calls == ["agg#1", "fin#1"]
    assert [str(m) for m in summary.resumed] == ["gen#0", "gen#1", "agg#0", "fin#0"]
    kept = {p for p, o in summary.ledger.outputs.items() if o.kept}
    assert kept == {"gen->agg#0", "gen->agg#1", "fin->sink#0"}
    assert summary.ledger.outputs["fin->sink#1"].attempt == 2
    assert sorted(ti.pushed) == published(summary)
    run(store, Steps(), "undisturbed")
    assert rows(spark, store, "mixed") == rows(spark, store, "undisturbed") != []


def test_under_a_mixed_plan_a_region_whose_inputs_came_back_different_recomputes(
        spark: Any, store: ResultStore, monkeypatch: pytest.MonkeyPatch) -> None:
    """As above, but gen (reuse=False) writes other rows on every call: agg#0+fin#0 read changed bytes and rerun."""
    patch(monkeypatch, store, spark)
    Plans(store.objects).decide_next(DAG, PlanDecision("d1", MIXED, "mixed", 1.0, ""))
    steps = Steps(fail="fin#1", salted=True)
    with pytest.raises(RuntimeError):
        run(store, steps, "salted")
    steps.calls.clear()
    summary, _ = run(store, steps, "salted", try_number=2)
    assert steps.calls == ["gen#0", "gen#1", "agg#0", "fin#0", "agg#1", "fin#1"]
    assert not any(o.kept for o in summary.ledger.outputs.values())

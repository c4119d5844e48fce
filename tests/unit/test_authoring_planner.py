"""A job's own planner policy (``RegionJob.render(planner=...)``): in the job document, and what its advice uses.

    gen#0,1 --AUTO keyed--> agg#0,1
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

import pytest
from airflow.sdk import DAG

from airflow_region_failover import OptionError, PlannerPolicy, RegionJob
from airflow_region_failover.graph.auto import Choice, ExchangePlan
from airflow_region_failover.job import JobSpec, job_of
from airflow_region_failover.planning.history import History, ResultBytes, RunRecord, StepTimes
from airflow_region_failover.plugins.advice import advise


def noop(spark: Any, inputs: Any, context: Any) -> None:
    return None


def _spec(planner: PlannerPolicy | None = None) -> JobSpec:
    job = RegionJob()
    job.step("gen", noop, parallelism=2)
    job.step("agg", noop, parallelism=2)
    job.edge("gen", "agg", exchange="AUTO", partition_by=["k"])
    with DAG("planned", schedule=None, start_date=datetime(2026, 1, 1)) as dag:
        job.render(planner=planner)
    spec = job_of(dag)
    assert spec is not None
    return spec


class _Runs:
    """Four measured runs, the oldest with a failure of agg; persisting gen->agg costs 0.6 s of a ~80 s run."""

    def history(self, dag_id: str) -> History:
        steps = (StepTimes("gen", (20.0, 20.0)), StepTimes("agg", (60.0, 60.0)))
        moved = (ResultBytes("gen->agg", 10**6, 0.4, 0.2),)
        return History(tuple(RunRecord(f"r{i}", steps, moved, {"agg": 1} if i == 0 else {}, 160.0)
                             for i in range(4)))


def test_the_jobs_policy_travels_in_its_document_and_the_default_adds_nothing() -> None:
    policy = PlannerPolicy(margin=0.0, window=3, restart_seconds=120.0)
    spec = _spec(policy)
    assert spec.planner == policy and spec.to_document()["planner"] == policy.to_json()
    assert JobSpec.from_document(spec.to_document()).planner == policy
    assert "planner" not in _spec().to_document() and _spec().planner == PlannerPolicy()


def test_the_advice_uses_the_jobs_window_and_margin() -> None:
    default = advise("planned", _spec(), _Runs()).decision
    assert default is not None and default.plan.fused == () and default.reason.endswith("it is the cheapest")
    assert default.rate.runs == ("r0", "r1", "r2", "r3") and default.rate.failures == 1
    recent = advise("planned", _spec(PlannerPolicy(window=3)), _Runs()).decision
    assert recent is not None and recent.rate.runs == ("r1", "r2", "r3") and recent.rate.failures == 0
    assert recent.plan.fused == () and "within the 10% margin" in recent.reason
    eager = advise("planned", _spec(PlannerPolicy(window=3, margin=0.0)), _Runs()).decision
    assert eager is not None and eager.plan == ExchangePlan({"gen->agg": Choice.FUSED})
    assert eager.reason.startswith("switches") and "0% margin" in eager.reason
    assert eager.to_json()["planner"]["window"] == 3 and "deadline_seconds" not in eager.to_json()["planner"]
    assert "the newest 3, a switch saving more than 0%" in eager.policy.describe()


def test_a_run_budget_in_the_dag_files_policy_is_refused_naming_the_deadline_alert() -> None:
    with pytest.raises(OptionError, match=r"deadline_seconds=600\.0.*DeadlineAlert"):
        _spec(PlannerPolicy(deadline_seconds=600.0))

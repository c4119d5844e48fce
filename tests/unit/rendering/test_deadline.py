"""A DAG's deadline alert reaches the planner: the run budget it declares, in the job document and in the advice.

    gen#0,1 --AUTO keyed--> agg#0,1
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

from airflow.sdk import DAG
from airflow.sdk.definitions.callback import SyncCallback
from airflow.sdk.definitions.deadline import DeadlineAlert, DeadlineReference

from airflow_region_failover import RegionJob
from airflow_region_failover.job import JobSpec, job_of
from airflow_region_failover.planning.history import History, ResultBytes, RunRecord, StepTimes
from airflow_region_failover.plugins.advice import advise


def noop(spark: Any, inputs: Any, context: Any) -> None:
    return None


def notify(**_: Any) -> None:
    """A deadline alert's callback (never called here)."""


def _alert(reference: Any, interval: timedelta) -> DeadlineAlert:
    return DeadlineAlert(reference=reference, interval=interval, callback=SyncCallback(notify))


def _spec(deadline: Any = None) -> JobSpec:
    job = RegionJob()
    job.step("gen", noop, parallelism=2)
    job.step("agg", noop, parallelism=2)
    job.edge("gen", "agg", exchange="AUTO", partition_by=["k"])
    with DAG("deadlined", schedule=None, start_date=datetime(2026, 1, 1), deadline=deadline) as dag:
        job.render()
    spec = job_of(dag)
    assert spec is not None
    return spec


def test_a_deadline_from_the_runs_queueing_is_the_run_budget_in_the_job_document() -> None:
    spec = _spec(_alert(DeadlineReference.DAGRUN_QUEUED_AT, timedelta(minutes=30)))
    assert spec.auto.deadline_seconds == 1800.0
    assert JobSpec.from_document(spec.to_document()).auto == spec.auto
    assert _spec().auto.deadline_seconds is None


def test_the_tightest_usable_alert_counts_and_the_others_give_no_budget() -> None:
    alerts = [_alert(DeadlineReference.DAGRUN_QUEUED_AT, timedelta(hours=2)),
              _alert(DeadlineReference.DAGRUN_QUEUED_AT, timedelta(minutes=45)),
              _alert(DeadlineReference.DAGRUN_LOGICAL_DATE, timedelta(minutes=5))]
    assert _spec(alerts).auto.deadline_seconds == 2700.0
    assert _spec(_alert(DeadlineReference.DAGRUN_LOGICAL_DATE, timedelta(minutes=5))).auto.deadline_seconds is None


class _Runs:
    """A history source of three measured runs."""

    def history(self, dag_id: str) -> History:
        steps = (StepTimes("gen", (20.0, 20.0)), StepTimes("agg", (60.0, 60.0)))
        return History(tuple(RunRecord(f"r{i}", steps, (ResultBytes("gen->agg", 10**8, 4.0, 2.0),), {}, 160.0)
                             for i in range(3)))


def test_the_advice_plans_against_the_dags_deadline() -> None:
    advice = advise("deadlined", _spec(_alert(DeadlineReference.DAGRUN_QUEUED_AT, timedelta(minutes=30))), _Runs())
    assert advice.decision is not None and advice.decision.deadline_seconds == 1800.0
    assert advice.decision.to_json()["deadline"]["seconds"] == 1800.0
    plain = advise("deadlined", _spec(), _Runs())
    assert plain.decision is not None and plain.decision.to_json()["deadline"] is None

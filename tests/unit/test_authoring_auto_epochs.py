"""A step declared ``Checkpoint(epochs="AUTO")``: the render carries it to the scheduler, the scheduler decides its
next run's epochs from the history, the run fixes them with its plan, and the step's every try runs them.

    src#0 ==BLOCKING==> sessions#0 ==BLOCKING==> sink#0       (sessions: Checkpoint(epochs="AUTO"), not PER_RUN)
"""

from __future__ import annotations

from typing import Any

import pytest
from airflow.sdk import DAG

from airflow_region_failover import Checkpoint, RegionJob
from airflow_region_failover.checkpoint.declared import chain_checkpoint
from airflow_region_failover.decisions.plans import Plans
from airflow_region_failover.exceptions import GraphError, RunPlanUnavailable, StoreUnreachable
from airflow_region_failover.job import JobSpec, job_of
from airflow_region_failover.planning.history import History, RunRecord, StepTimes
from airflow_region_failover.plugins.advice import advise
from airflow_region_failover.plugins.next_plan import decide_next
from airflow_region_failover.spark.checkpointed import run_epochs_of
from tests.support.fakes import MemoryObjects

DAG_ID = "auto_epochs"


def noop(spark: Any, inputs: Any, context: Any) -> None:
    return None


def sessionize(spark: Any, inputs: Any, state: Any, context: Any) -> None:
    return None


AUTO = Checkpoint(state_key="user", state_schema="user string, n long", epochs="AUTO", max_epochs=40)


def _job() -> tuple[JobSpec, RegionJob]:
    job = RegionJob()
    job.step("src", noop)
    job.step("sessions", sessionize, checkpoint=AUTO)
    job.step("sink", noop)
    job.edge("src", "sessions", exchange="BLOCKING").edge("sessions", "sink", exchange="BLOCKING")
    with DAG(DAG_ID, schedule=None) as dag:
        job.render()
    spec = job_of(dag)
    assert spec is not None
    return spec, job


class Measured:
    """A history source answering fixed runs."""

    def __init__(self, history: History) -> None:
        self.found = history

    def history(self, dag_id: str) -> History:
        return self.found


def _history(failures: int) -> History:
    """Three runs of sessions (600 s of work, 5 s per checkpoint), each with ``failures`` failed tries of it."""
    return History(tuple(RunRecord(f"r{i}", (StepTimes("sessions", (600.0,), 5.0),), (),
                                   {"sessions": failures} if failures else {}, 600.0) for i in range(3)))


def test_the_render_carries_the_auto_steps_to_the_scheduler() -> None:
    spec, _ = _job()
    assert spec.auto_epochs == {"sessions": 40} and not spec.auto.per_run
    assert JobSpec.from_document(spec.to_document()).auto_epochs == {"sessions": 40}
    assert "auto_epochs" not in JobSpec(spec.graph, spec.options).to_document()  # documents without it: none
    with pytest.raises(GraphError, match="'auto_epochs' must map"):
        JobSpec.from_document({**spec.to_document(), "auto_epochs": {"sessions": 0}})


def test_the_scheduler_decides_the_epochs_and_a_run_fixes_them_for_every_try() -> None:
    spec, _ = _job()
    objects = MemoryObjects()
    plans = Plans(objects, clock=lambda: 5.0)  # type: ignore[arg-type]
    first = decide_next(DAG_ID, spec, plans, "", Measured(History()))
    assert first is not None and first.epochs["sessions"].epochs == 10  # no history: the declared default
    assert advise(DAG_ID, spec, Measured(History())).to_json()["epochs"]["sessions"]["epochs"] == 10
    frequent = decide_next(DAG_ID, spec, plans, "r2", Measured(_history(2)))
    assert frequent is not None and plans.next(DAG_ID) == frequent
    chosen = frequent.epochs["sessions"]
    assert 1 < chosen.epochs <= 40 and "Daly's interval" in chosen.reason
    chain = chain_checkpoint(spec.graph, ["sessions"], _job()[1]._impls)
    assert chain is not None and chain.auto
    ran = run_epochs_of(plans, DAG_ID, "run_1", chain)  # the first try fixes the run's plan
    assert ran.declaration.epochs == chosen.epochs and not ran.auto
    rare = decide_next(DAG_ID, spec, plans, "r3", Measured(_history(0)))
    assert rare is not None and rare.epochs["sessions"].epochs == 1
    # a retry in the same run: the epochs fixed with its plan, not the newer decision's
    assert run_epochs_of(plans, DAG_ID, "run_1", chain).declaration.epochs == chosen.epochs
    assert run_epochs_of(plans, DAG_ID, "run_2", chain).declaration.epochs == 1


class Unreachable(MemoryObjects):
    def get_with_etag(self, key: str) -> tuple[bytes, str] | None:
        raise StoreUnreachable("S3 did not answer after 5 tries")


def test_a_run_plan_that_cannot_be_read_fails_the_try_rather_than_run_another_number() -> None:
    spec, job = _job()
    chain = chain_checkpoint(spec.graph, ["sessions"], job._impls)
    assert chain is not None
    with pytest.raises(RunPlanUnavailable, match=r"step 'sessions' declares Checkpoint\(epochs='AUTO'\).*could not "
                                                 r"be read or fixed \(S3 did not answer"):
        run_epochs_of(Plans(Unreachable()), DAG_ID, "run_1", chain)  # type: ignore[arg-type]

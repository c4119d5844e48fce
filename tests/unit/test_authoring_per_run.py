"""A job rendered PER_RUN: static maximal fusion, each run planned (restart sets, its next plan) by its own plan.

    src#0 ==B==> gen#0 --AUTO--> agg#0 --AUTO--> fin#0 ==B==> sink#0
                 \\______ one task: gen.agg.fin.0 ______/
"""

from __future__ import annotations

from typing import Any

from airflow.sdk import DAG

from airflow_region_failover import PER_RUN, RegionJob, SubtaskId
from airflow_region_failover.decisions.plans import Plans
from airflow_region_failover.decisions.storage import RunLogs
from airflow_region_failover.graph.auto import Choice, ExchangePlan
from airflow_region_failover.graph.elements import Exchange
from airflow_region_failover.job import JobSpec, job_of
from airflow_region_failover.planning.history import History
from airflow_region_failover.planning.stored import PlanDecision
from airflow_region_failover.plugins.clearing import handle_failure
from airflow_region_failover.plugins.next_plan import decide_next
from tests.support.fakes import FakeApi, MemoryObjects, failure, services

DAG_ID, RUN = "per_run", "r1"
FUSED = ExchangePlan({"gen->agg": Choice.FUSED, "agg->fin": Choice.FUSED})


def noop(spark: Any, inputs: Any, context: Any) -> None:
    return None


def _spec(plan: Any = PER_RUN) -> JobSpec:
    job = RegionJob(default_exchange="AUTO")
    for step in ("src", "gen", "agg", "fin", "sink"):
        job.step(step, noop)
    job.edge("src", "gen", exchange="BLOCKING", distribution="POINTWISE")
    job.edge("gen", "agg", distribution="POINTWISE").edge("agg", "fin", distribution="POINTWISE")
    job.edge("fin", "sink", exchange="BLOCKING", distribution="POINTWISE")
    with DAG(DAG_ID, schedule=None) as dag:
        job.render(plan=plan)
    spec = job_of(dag)
    assert spec is not None
    return spec


def test_per_run_renders_every_fusable_auto_result_fused_in_one_task_whatever_the_run() -> None:
    spec = _spec()
    assert spec.auto.per_run and spec.auto.plan == FUSED
    assert [t.task_id for t in spec.fused] == ["gen.agg.fin.0"]  # never a chain: the run's plan may persist inside
    assert JobSpec.from_document(spec.to_document()).auto == spec.auto
    for plan in (ExchangePlan(), FUSED, ExchangePlan({"agg->fin": Choice.FUSED})):
        run = spec.for_run(plan)
        assert run.names.subtasks("gen.agg.fin.0") == tuple(SubtaskId(s, 0) for s in ("gen", "agg", "fin"))
        assert run.names.task_id(SubtaskId("agg", 0)) == "gen.agg.fin.0"
    blocking = spec.for_run(ExchangePlan())
    assert [e.exchange for e in blocking.graph.edges] == [Exchange.BLOCKING] * 4
    assert len(blocking.topology.regions.regions) == 5 and len(spec.topology.regions.regions) == 3
    assert _spec(FUSED).for_run(ExchangePlan()) == _spec(FUSED)  # a job rendered with a fixed plan is itself


def _restarted(plan: ExchangePlan | None) -> Any:
    """The regions a failure of fin#0 inside gen.agg.fin.0 restarts, the run having fixed ``plan``."""
    objects = MemoryObjects()
    plans = Plans(objects)  # type: ignore[arg-type]
    if plan is not None:
        plans.decide_next(DAG_ID, PlanDecision("d1", plan, "chosen", 1.0))
    logs = RunLogs(objects)  # type: ignore[arg-type]
    handle_failure(DAG_ID, RUN, failure("gen.agg.fin.0", subtask="fin#0"), _spec(), services(logs, FakeApi()),
                   now=lambda: 100.0)
    decision = logs.read(DAG_ID, RUN).decisions[0]
    return plans.of_run(DAG_ID, RUN), decision


def test_a_failure_restarts_the_region_of_the_runs_plan() -> None:
    fixed, decision = _restarted(None)  # no decision: the handler fixes every AUTO result BLOCKING
    assert fixed is not None and fixed.plan.fused == ()
    assert [(r.subtasks, r.reason) for r in decision.regions] == [(("fin#0",), "failed"), (("sink#0",), "consumer")]
    assert decision.restart == ("gen.agg.fin.0", "sink.0")
    fixed, decision = _restarted(FUSED)
    assert fixed is not None and fixed.plan == FUSED
    assert [(r.subtasks, r.reason) for r in decision.regions] == [(("gen#0", "agg#0", "fin#0"), "failed"),
                                                                   (("sink#0",), "consumer")]
    assert decision.restart == ("gen.agg.fin.0", "sink.0")


class Measured:
    """A history source answering fixed runs."""

    def __init__(self, history: History) -> None:
        self.found = history

    def history(self, dag_id: str) -> History:
        return self.found


def test_the_next_plan_is_the_planners_choice_or_blocking_with_the_reason() -> None:
    plans = Plans(MemoryObjects(), clock=lambda: 3.0)  # type: ignore[arg-type]
    decided = decide_next(DAG_ID, _spec(), plans, "r1", Measured(History(())))
    assert decided is not None and decided == plans.next(DAG_ID)
    assert decided.plan.fused == () and decided.after_run == "r1" and "fewer than the 3" in decided.reason
    assert decide_next(DAG_ID, _spec(FUSED), plans, "r2", Measured(History(()))) is None  # not PER_RUN
    assert plans.next(DAG_ID) == decided


def test_a_history_that_cannot_be_costed_keeps_the_stored_plan_in_a_decision_after_the_run_saying_why() -> None:
    from airflow_region_failover.exceptions import HistoryError

    class Unmeasured:
        def history(self, dag_id: str) -> History:
            raise HistoryError("step 'gen': no run of the history measured it")

    plans = Plans(MemoryObjects(), clock=lambda: 3.0)  # type: ignore[arg-type]
    plans.decide_next(DAG_ID, PlanDecision("d1", FUSED, "switches", 1.0, "r1"))
    decided = decide_next(DAG_ID, _spec(), plans, "r2", Unmeasured())
    assert decided is not None and decided == plans.next(DAG_ID) and decided.after_run == "r2"
    assert decided.plan == FUSED and "keeps the stored plan" in decided.reason
    assert "no run of the history measured it" in decided.reason

"""The stored plans of a job rendered PER_RUN: the next run's decision and a run's own plan, as JSON.

    gen#0 --AUTO--> agg#0 --AUTO--> fin#0          (results gen->agg, agg->fin)
"""

from __future__ import annotations

import pytest

from airflow_region_failover.graph.auto import Choice, ExchangePlan
from airflow_region_failover.graph.errors import GraphError
from airflow_region_failover.planning.epochs import EpochsChoice
from airflow_region_failover.planning.stored import NO_DECISION, PlanDecision, RunPlan

PLAN = ExchangePlan({"gen->agg": Choice.FUSED, "agg->fin": Choice.BLOCKING})
DECISION = PlanDecision("a1b2c3", PLAN, "switches: saves 30.0 s", 1700000000.5, "manual__1")


def test_a_decision_and_a_run_plan_round_trip_through_json() -> None:
    assert DECISION.to_json() == {"format": 1, "id": "a1b2c3", "plan": {"choices": {"agg->fin": "BLOCKING",
                                                                                   "gen->agg": "FUSED"}},
                                  "reason": "switches: saves 30.0 s", "decided_at": 1700000000.5,
                                  "after_run": "manual__1"}
    assert PlanDecision.from_json(DECISION.to_json()) == DECISION
    fixed = RunPlan.of(DECISION, 1700000100.0)
    assert (fixed.plan, fixed.reason, fixed.fixed_at, fixed.decision) == (PLAN, DECISION.reason, 1700000100.0,
                                                                          DECISION)
    assert RunPlan.from_json(fixed.to_json()) == fixed


def test_without_a_decision_a_run_plans_every_auto_result_blocking() -> None:
    fixed = RunPlan.of(None, 5.0)
    assert fixed.plan.fused == () and fixed.reason == NO_DECISION and fixed.decision is None
    assert fixed.to_json()["decision"] is None and RunPlan.from_json(fixed.to_json()) == fixed


@pytest.mark.parametrize(("document", "named"), [
    ({"format": 2, "plan": {"choices": {}}, "reason": "", "fixed_at": 1.0, "decision": None}, "format 1"),
    ({"format": 1, "plan": {"choices": {}}, "reason": "", "fixed_at": 1.0}, "exactly the keys"),
    ({"format": 1, "plan": {"choices": {}}, "reason": 3, "fixed_at": 1.0, "decision": None}, "'reason' must be"),
    ({"format": 1, "plan": {"choices": {}}, "reason": "", "fixed_at": True, "decision": None}, "'fixed_at' must"),
    ({"format": 1, "plan": {"choices": {"x": "MAYBE"}}, "reason": "", "fixed_at": 1.0, "decision": None},
     "use BLOCKING or FUSED"),
])
def test_a_bad_record_is_refused_naming_what_is_wrong(document: object, named: str) -> None:
    with pytest.raises(GraphError, match=named):
        RunPlan.from_json(document)


def test_the_epochs_of_auto_steps_travel_with_the_decision_into_the_run_plan() -> None:
    """A step ``agg`` declared Checkpoint(epochs="AUTO"): its epochs are fixed with the run's plan."""
    decided = PlanDecision("e1", PLAN, "switches", 2.0, "r1", {"agg": EpochsChoice(4, "Daly")})
    assert decided.to_json()["epochs"] == {"agg": {"epochs": 4, "reason": "Daly"}}
    assert PlanDecision.from_json(decided.to_json()) == decided
    fixed = RunPlan.of(decided, 3.0)
    assert fixed.epochs == {"agg": EpochsChoice(4, "Daly")} and RunPlan.from_json(fixed.to_json()) == fixed
    assert fixed.epochs_of("agg", 1000) == EpochsChoice(4, "Daly")
    # a step no decision named (none stored when the run was fixed): the no-history default, bounded
    assert RunPlan.of(None, 1.0).epochs_of("agg", 1000).epochs == 10
    assert RunPlan.of(None, 1.0).epochs_of("agg", 3).epochs == 3


def test_records_written_before_epochs_were_planned_read_as_none() -> None:
    old = DECISION.to_json()
    assert "epochs" not in old and PlanDecision.from_json(old).epochs == {}
    run = {"format": 1, "plan": {"choices": {}}, "reason": "", "fixed_at": 1.0, "decision": old}
    assert RunPlan.from_json(run).epochs == {} and RunPlan.from_json(run).decision == DECISION
    with pytest.raises(GraphError, match="epochs of 'agg'"):
        RunPlan.from_json({**run, "epochs": {"agg": {"epochs": 0, "reason": ""}}})
    with pytest.raises(GraphError, match="'epochs' must map"):
        PlanDecision.from_json({**old, "epochs": [4]})

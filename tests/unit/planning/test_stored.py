"""The stored plans of a job rendered PER_RUN: the next run's decision and a run's own plan, as JSON.

    gen#0 --AUTO--> agg#0 --AUTO--> fin#0          (results gen->agg, agg->fin)
"""

from __future__ import annotations

import pytest

from airflow_region_failover.graph.auto import Choice, ExchangePlan
from airflow_region_failover.graph.errors import GraphError
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

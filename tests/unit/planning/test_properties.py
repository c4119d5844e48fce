"""Properties of the planner on random histories of the ETL's shape (tests/unit/planning/test_choice.py):

    (gen_orders#0,1) ---AUTO keyed--+
                                    +--> (join#0,1) --AUTO--> (report#0)
    (gen_lineitem#0,1) -AUTO keyed--+

* the cheapest plan is no dearer than all-BLOCKING or all-fused;
* the chosen plan is the previous one or the cheapest, and never dearer than the cheapest by more than the margin;
* a plan's expected time is at least its failure-free time, and grows with the failure rate.
"""

from __future__ import annotations

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from airflow_region_failover.graph.auto import Choice, ExchangePlan
from airflow_region_failover.planning.choice import decide
from airflow_region_failover.planning.estimates import estimate
from airflow_region_failover.planning.history import History, ResultBytes, RunRecord, StepTimes
from airflow_region_failover.planning.model import plan_cost
from airflow_region_failover.planning.policy import PlannerPolicy
from tests.unit.planning.test_choice import JOINED, LINEITEM, ORDERS, _etl

SETTINGS = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
seconds = st.floats(min_value=0.5, max_value=300.0)
plans = st.fixed_dictionaries({r: st.sampled_from(list(Choice)) for r in (ORDERS, LINEITEM, JOINED)})


@st.composite
def histories(draw: st.DrawFn) -> History:
    runs = []
    for i in range(draw(st.integers(min_value=3, max_value=6))):
        steps = tuple(StepTimes(s, tuple(draw(seconds) for _ in range(n)))
                      for s, n in (("gen_orders", 2), ("gen_lineitem", 2), ("join", 2), ("report", 1)))
        results = tuple(ResultBytes(r, draw(st.integers(0, 10**9)), draw(seconds), draw(seconds))
                        for r in (ORDERS, LINEITEM, JOINED))
        failures = draw(st.dictionaries(st.sampled_from(["gen_orders", "join", "report"]), st.integers(0, 3)))
        runs.append(RunRecord(f"run{i}", steps, results, failures, draw(seconds) * 7,
                              ExchangePlan(draw(plans))))
    return History(tuple(runs))


@SETTINGS
@given(histories())
def test_the_choice_is_bounded_by_the_cheapest_plan(history: History) -> None:
    policy = PlannerPolicy()
    decision = decide(_etl(), history, policy)
    assert decision.best is not None and decision.chosen is not None and decision.previous_cost is not None
    assert decision.all_blocking is not None and decision.all_fused is not None
    best = decision.best.expected
    assert best <= min(decision.all_blocking.expected, decision.all_fused.expected) + 1e-6
    assert decision.plan in (decision.previous, decision.best.plan)
    assert decision.chosen.expected * (1 - policy.margin) <= best + 1e-6


@SETTINGS
@given(histories(), plans, st.floats(min_value=1e-6, max_value=1e-2))
def test_failures_never_make_a_plan_cheaper(history: History, choices: dict[str, Choice], rate: float) -> None:
    graph, plan = _etl(), ExchangePlan(choices)
    figures = estimate(graph, history)
    steps = [s.id for s in graph.steps]
    free = plan_cost(graph, plan, figures, dict.fromkeys(steps, 0.0)).expected
    low = plan_cost(graph, plan, figures, dict.fromkeys(steps, rate)).expected
    high = plan_cost(graph, plan, figures, dict.fromkeys(steps, 2 * rate)).expected
    assert free <= low * (1 + 1e-9) and low <= high * (1 + 1e-9)

"""The dry-run tab's AUTO section (failover_view/advice.py) without enough history to choose:

    a#0 --AUTO--> b#0
"""

from __future__ import annotations

from airflow_region_failover.failover_view.advice import advice_section
from airflow_region_failover.graph.builder import JobGraphBuilder
from airflow_region_failover.planning.choice import decide, declared_cost
from airflow_region_failover.planning.history import History, RunRecord, StepTimes


def test_too_little_history_keeps_blocking_and_costs_no_plan() -> None:
    graph = JobGraphBuilder().step("a").step("b").edge("a", "b", exchange="AUTO").build()
    run = RunRecord("r1", (StepTimes("a", (1.0,)), StepTimes("b", (1.0,))), (), {}, 2.0)
    html = advice_section(decide(graph, History((run,))))
    assert "1 run(s) of history" in html and "fewer than the 3 a choice needs" in html
    assert html.count("not costed: too little history") == 3


def test_no_decision_is_the_note_escaped() -> None:
    assert '<p id="rf-auto-note">DAG &#x27;x&#x27; declares &lt;no&gt; AUTO edge</p>' in advice_section(
        None, "DAG 'x' declares <no> AUTO edge")


def test_no_decision_shows_the_declared_plans_expected_time_when_the_history_costs_it() -> None:
    #   a#0 ==B==> b#0, no AUTO edge: the one plan as declared
    graph = JobGraphBuilder().step("a").step("b").edge("a", "b", exchange="BLOCKING").build()
    run = RunRecord("r1", (StepTimes("a", (30.0,)), StepTimes("b", (12.0,))), (), {}, 42.0)
    cost = declared_cost(graph, History((run,)))
    assert 42.0 <= cost.expected < 43.0  # the work, and a little for the prior's rare failures
    html = advice_section(None, "no AUTO edge", cost)
    assert f"<tr><td>as declared</td><td>{cost.expected:.1f} s</td><td>{cost.spread:.1f} s</td>" in html
    assert html.index("rf-auto-note") < html.index("rf-auto-plans") and "not costed" not in html

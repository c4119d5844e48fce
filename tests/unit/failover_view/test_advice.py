"""The dry-run tab's AUTO section (failover_view/advice.py) without enough history to choose:

    a#0 --AUTO--> b#0
"""

from __future__ import annotations

from airflow_region_failover.failover_view.advice import advice_section
from airflow_region_failover.graph.builder import JobGraphBuilder
from airflow_region_failover.planning.choice import decide
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

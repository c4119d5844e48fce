"""The failover view's model and pages: subtask states from task instances (a chain task for each subtask it
runs), each decision's timeline failure -> decision -> clear -> rerun done, kept regions, escaping.

    a#0 -> b#0 ==+==> c#0 ==> d#0        a -PIPELINED POINTWISE-> b (chained: tasks a.b.0, a.b.1)
    a#1 -> b#1 ==+==> c#1 ==> d#1          -BLOCKING ALL_TO_ALL-> c -BLOCKING POINTWISE-> d; side#0
"""

from __future__ import annotations

from html import escape

from airflow_region_failover.failover.availability import KnownAvailability
from airflow_region_failover.failover.run_log import Decision, DecisionStatus, FailureRecord, RegionRecord, RunLog
from airflow_region_failover.failover_view.page import TaskRow, plan_page, run_model, run_page
from airflow_region_failover.graph.ids import SubtaskId
from airflow_region_failover.job import JobSpec
from tests.unit.failover_view.test_svg import e2e_graph

SPEC = JobSpec(e2e_graph(), {})


def decision(number: int, failed: str, error: str = "boom", applied: float | None = 101.0) -> Decision:
    plan = SPEC.plan(SubtaskId.parse(failed), KnownAvailability.except_([]))
    status = DecisionStatus.APPLIED if applied is not None else DecisionStatus.PENDING
    return Decision(number, status, 100.0 * number, (FailureRecord(SPEC.names.task_id(plan.failed), -1, 1, error,
                                                                   "listener", 99.0 * number),),
                    strategy="region", budget={"failures_total": number, "total_failures_left": 10 - number},
                    regions=tuple(RegionRecord.of(r) for r in plan.regions),
                    restart=tuple(sorted({SPEC.names.task_id(s) for s in plan.restart})), applied_at=applied,
                    restarting_time_s=2.0 if applied else None)


def test_a_chain_task_gives_its_state_to_every_subtask_it_runs() -> None:
    doc = RunLog("dag", "run", decisions=(decision(1, "c#0"),))
    model = run_model(SPEC, doc, [TaskRow("a.b.0", "success", 1, 10.0), TaskRow("c.0", "running", 2)])
    subtasks = {s["subtask"]: s for step in model["graph"]["steps"] for s in step["subtasks"]}
    assert subtasks["a#0"]["state"] == subtasks["b#0"]["state"] == "success"
    assert subtasks["a#0"]["task_id"] == "a.b.0" and subtasks["c#0"]["try_number"] == 2
    assert subtasks["a#1"]["state"] is None
    assert [e["exchange"] for e in model["graph"]["edges"]] == ["PIPELINED", "BLOCKING", "BLOCKING"]


def test_the_timeline_runs_failure_decision_clear_rerun_done_once_every_cleared_task_succeeded() -> None:
    doc = RunLog("dag", "run", decisions=(decision(1, "c#0"),))
    running = run_model(SPEC, doc, [TaskRow("c.0", "success", 2, 130.0), TaskRow("d.0", "running", 2)])
    events = running["decisions"][0]["timeline"]
    assert [e["event"] for e in events] == ["failure", "decision", "clear", "rerun"]
    assert events[-1] == {"event": "rerun", "status": "in progress"}
    done = run_model(SPEC, doc, [TaskRow("c.0", "success", 2, 130.0), TaskRow("d.0", "success", 2, 140.0)])
    assert done["decisions"][0]["timeline"][-1] == {"event": "rerun", "status": "done", "at": 140.0}
    assert done["budget"] == {"failures_total": 1, "total_failures_left": 9}


def test_a_later_decision_supersedes_the_rerun_and_a_pending_one_has_no_clear_yet() -> None:
    doc = RunLog("dag", "run", decisions=(decision(1, "c#0"), decision(2, "d#1", applied=None)))
    model = run_model(SPEC, doc, [])
    assert model["decisions"][0]["timeline"][-1] == {"event": "rerun", "status": "superseded", "by": 2}
    assert [e["event"] for e in model["decisions"][1]["timeline"]] == ["failure", "decision"]


def test_every_region_of_a_decision_has_its_reason_or_is_kept() -> None:
    regions = SPEC.topology.regions
    c0, d0 = regions.region_of(SubtaskId("c", 0)).id, regions.region_of(SubtaskId("d", 0)).id
    model = run_model(SPEC, RunLog("dag", "run", decisions=(decision(1, "c#0"),)), [])
    reasons = {r: v["reason"] for r, v in model["decisions"][0]["regions"].items()}
    assert reasons == {r.id: {c0: "failed", d0: "consumer"}.get(r.id, "kept") for r in regions.regions}


def test_the_run_page_escapes_error_texts_and_links_under_its_mount_path() -> None:
    doc = RunLog("dag", "run<x>", decisions=(decision(1, "c#0", error="<img src=x onerror=alert(1)>"),))
    page = run_page(SPEC, doc, [], None, "/airflow/region-failover")
    assert "<img" not in page and "&lt;img src=x" in page
    assert 'href="/airflow/region-failover/api/run/dag/run%3Cx%3E"' in page
    assert 'href="/airflow/region-failover/plan/dag"' in page and "decision #1" in page
    assert "Restarted failover regions:" in page and "total failures left 9" in page


def test_the_dry_run_page_lists_every_subtask_and_draws_the_plan() -> None:
    plan = SPEC.plan(SubtaskId("c", 0), KnownAvailability.except_([]))
    page = plan_page(SPEC, "dag", plan, {}, "/region-failover", "c#0")
    assert '<option value="c#0" selected>' in page and '<option value="side#0">' in page
    assert 'data-reason="failed"' in page and 'data-reason="consumer"' in page
    assert 'data-reason="kept"' in page
    empty = plan_page(SPEC, "dag", None, {}, "/region-failover")
    assert "Choose a subtask" in empty and 'data-reason="failed"' not in empty


def test_the_run_page_says_why_each_region_restarted() -> None:
    """The JSON and the dry run gave each restarted region's cause; the run tab showed only the reason: it has the
    same table (region, reason, cause, subtasks) for the decision shown."""
    doc = RunLog("dag", "run", decisions=(decision(1, "c#0"),))
    page = run_page(SPEC, doc, [], None, "/region-failover")
    table = page.split('<table id="rf-regions">', 1)[1].split("</table>", 1)[0]
    for record in doc.decisions[0].regions:
        assert (f'<tr data-region="{record.region}"><td>{record.region}</td><td>{record.reason}</td>'
                f"<td>{escape(record.cause)}</td><td>{', '.join(record.subtasks)}</td></tr>") in table, table
    plan = SPEC.plan(SubtaskId("c", 0), KnownAvailability.except_([]))
    dry = plan_page(SPEC, "dag", plan, {}, "/region-failover", "c#0")
    assert dry.split('<table id="rf-regions">', 1)[1].split("</table>", 1)[0] == table, "one table, both pages"


def test_the_dry_run_page_shows_no_states() -> None:
    plan = SPEC.plan(SubtaskId("c", 0), KnownAvailability.except_([]))
    page = plan_page(SPEC, "dag", plan, {}, "/region-failover", "c#0")
    assert " none<" not in page and 'data-state="none"' not in page and "States:" not in page
    assert "States:" in run_page(SPEC, RunLog("dag", "run"), [], None, "/region-failover")


def test_a_not_recoverable_decision_shows_the_failures_class_in_the_timeline_and_the_page() -> None:
    from dataclasses import replace

    from airflow_region_failover.failover.error_class import ErrorClass

    ended = decision(1, "c#0", error="'price'", applied=None)
    failure = replace(ended.failures[0], error_class=ErrorClass.of(KeyError("price")))
    ended = replace(ended, status=DecisionStatus.NOT_RECOVERABLE, failures=(failure,), restart=(),
                    reason="not recoverable: the rule 'same error on the same inputs and code'")
    doc = RunLog("dag", "run", decisions=(ended,))
    [model] = run_model(SPEC, doc, [])["decisions"]
    first = model["timeline"][0]
    assert (model["status"], first["error_class"], first["signature"]) == (
        "not-recoverable", "KeyError", failure.error_class.signature)  # type: ignore[union-attr]
    page = run_page(SPEC, doc, [], None, "/region-failover")
    assert "c.0 failed (try 1, KeyError)" in page and "not-recoverable" in page

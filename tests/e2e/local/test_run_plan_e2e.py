"""Each run its own plan, chosen from the DAG's real history, end to end on the embedded stack
(``tests/e2e/dags/rf_fused.py``, rendered PER_RUN with a planner over the newest 3 runs, margin 0)::

    gen#0,1 --AUTO keyed by k--> agg#0..3 ==BLOCKING==> report#0        one task gen.agg.0 in every run
    run 1:    no decision stored -> gen->agg BLOCKING; agg#1 fails on try 1 -> the failure restarts agg#1's region;
              try 2 keeps gen#0,1 and agg#0 (committed by try 1), recomputes agg#1 and runs agg#2,3
    runs 2-3: BLOCKING (fewer than 3 runs of history before each); run 4: whatever the decision after run 3 chose
              (its window still holds run 1's failure)
    after 4:  the window is runs 2-4, none failed: fusing saves the exchange's write and read -> FUSED
    run 5:    FUSED, agg#1 fails on try 1 -> the failure recomputes the whole region

No decision is written by the test: the watchers decide each next plan from Airflow's and the store's record of
the runs that ended. (A failure does not switch a one-task job back to BLOCKING at this size: the task restarts
whole under either plan, and what BLOCKING saves of the lost work is less than its write and read.)
"""

from __future__ import annotations

import time
from html import escape
from typing import Any

import httpx
import pytest

from airflow_region_failover.decisions.plans import Plans
from airflow_region_failover.graph.ids import PartitionId
from airflow_region_failover.planning.stored import PlanDecision
from tests.e2e.scenarios import _the_decision, expected_rows

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(1500)]
DAG = "rf_e2e_fused_per_run"
FAIL = {"fail": ["agg#1"]}


def _report(e2e: Any, run_id: str) -> list[tuple[Any, ...]]:
    manifest = e2e.store.manifest(DAG, run_id, PartitionId("report", 0))
    return sorted(tuple(r.values()) for r in e2e.store.read_arrow(manifest).to_pylist())


def _attempts(e2e: Any, run_id: str, result: str, count: int) -> list[int]:
    return [e2e.store.manifest(DAG, run_id, PartitionId(result, i)).attempt for i in range(count)]


def _next_after(plans: Plans, run_id: str, timeout: float = 120.0) -> PlanDecision:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        decided = plans.next(DAG)
        if decided is not None and decided.after_run == run_id:
            return decided
        time.sleep(1.0)
    raise AssertionError(f"the watcher stored no decision after {run_id} within {timeout} s: {plans.next(DAG)}")


def _settled(plans: Plans, run_id: str) -> PlanDecision:
    """The decision stored after ``run_id``, once both watchers (the scheduler's and the second) have decided."""
    _next_after(plans, run_id)
    time.sleep(10.0)
    decided = plans.next(DAG)
    assert decided is not None and decided.after_run == run_id, decided
    return decided


def _clean_run(e2e: Any, plans: Plans) -> tuple[str, PlanDecision]:
    run_id, state = e2e.run(DAG)
    assert state == "success", e2e.explain(DAG, run_id)
    assert e2e.tries(DAG, run_id) == {"gen.agg.0": 1, "report.0": 1}
    return run_id, _settled(plans, run_id)


def test_the_history_switches_the_plan_and_each_failure_restarts_its_plans_regions(e2e: Any,
                                                                                   spark_connect: str) -> None:
    e2e.api.wait_for_dag(DAG, timeout=180)
    plans = Plans(e2e.store.objects)
    blocking_run, state = e2e.run(DAG, FAIL)
    assert state == "success", e2e.explain(DAG, blocking_run)
    fixed = plans.of_run(DAG, blocking_run)
    assert fixed is not None and fixed.plan.fused == () and fixed.decision is None
    assert e2e.tries(DAG, blocking_run) == {"gen.agg.0": 2, "report.0": 1}
    decision = _the_decision(e2e, DAG, blocking_run)
    assert decision["restart"] == ["gen.agg.0", "report.0"]
    regions = {s: r["reason"] for r in decision["regions"] for s in r["subtasks"]}  # the plan's regions: one each
    assert all(len(r["subtasks"]) == 1 for r in decision["regions"]), decision["regions"]
    assert regions == {"agg#1": "failed", "agg#2": "producer-unavailable", "agg#3": "producer-unavailable",
                       "report#0": "consumer"}  # agg#2,3's partitions were never written: try 1 failed first
    assert _attempts(e2e, blocking_run, "gen->agg", 2) == [1, 1]  # committed by try 1, kept by try 2
    assert _attempts(e2e, blocking_run, "agg->report", 4) == [1, 2, 2, 2]  # agg#0 kept; agg#2,3 not run in try 1
    assert "fewer than the 3" in _settled(plans, blocking_run).reason

    clean = [_clean_run(e2e, plans) for _ in range(3)]
    for run_id, _ in clean[:2]:
        fixed = plans.of_run(DAG, run_id)
        assert fixed is not None and fixed.plan.fused == ()
        assert len(e2e.store.partitions(DAG, run_id, "gen->agg")) == 2  # persisted: what the choice measures
    assert "fewer than the 3" in clean[0][1].reason
    switched = clean[-1][1]  # after runs 2-4: no failure in the window
    assert switched.plan.fused == ("gen->agg",), switched

    fused_run, state = e2e.run(DAG, FAIL)
    assert state == "success", e2e.explain(DAG, fused_run)
    fixed = plans.of_run(DAG, fused_run)
    assert fixed is not None and fixed.plan.fused == ("gen->agg",) and fixed.decision == switched
    assert e2e.tries(DAG, fused_run) == {"gen.agg.0": 2, "report.0": 1}
    decision = _the_decision(e2e, DAG, fused_run)
    assert decision["regions"][0]["reason"] == "failed"
    assert sorted(decision["regions"][0]["subtasks"]) == sorted(
        [f"gen#{i}" for i in range(2)] + [f"agg#{i}" for i in range(4)])
    assert e2e.store.partitions(DAG, fused_run, "gen->agg") == ()  # fused: the exchange never left Spark
    assert _attempts(e2e, fused_run, "agg->report", 4) == [2, 2, 2, 2]  # the whole region recomputed

    with httpx.Client(base_url=e2e.stack.url, timeout=30,
                      headers={"Authorization": f"Bearer {e2e.api.token()}"}) as client:  # the Failover tab's answer
        shown = [client.get(f"/region-failover/api/run/{DAG}/{run}").json()["plan"]
                 for run in (blocking_run, fused_run)]
        tab = client.get(f"/region-failover/run/{DAG}/{fused_run}").text
    assert [(p["state"], p["results"], p["decision"]) for p in shown] == [
        ("fixed", {"gen->agg": "BLOCKING"}, None),
        ("fixed", {"gen->agg": "FUSED"}, {"id": switched.id, "decided_at": switched.decided_at,
                                          "after_run": clean[-1][0]})]
    assert 'id="rf-run-plan"' in tab and escape(switched.reason) in tab

    expected = expected_rows("rf_fused.py", spark_connect)
    assert all(_report(e2e, run) == expected for run in (blocking_run, *(r for r, _ in clean), fused_run))

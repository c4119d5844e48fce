"""Each run its own plan, end to end on the embedded stack (``tests/e2e/dags/rf_fused.py``, rendered PER_RUN):
two runs of the one task ``gen.agg.0``, agg#1 failing on its first try in both::

    gen#0,1 --AUTO keyed by k--> agg#0..3 ==BLOCKING==> report#0        one task gen.agg.0 in every run
    run 1: no decision stored -> gen->agg BLOCKING: the failure restarts agg#1's region; try 2 keeps gen#0,1 and
           agg#0 (committed by try 1), recomputes agg#1 and runs agg#2,3 (not reached by try 1)
    run 2: the next run's decision says FUSED -> the failure recomputes the whole region

Between the runs the watcher stores the decision for the next run (after run 1, with one run of history: every
AUTO result BLOCKING, the previous plan); the test then replaces it by a FUSED one, standing in for a history
that chooses fusing (the planner needs three runs before it switches).
"""

from __future__ import annotations

import time
from typing import Any

import httpx
import pytest

from airflow_region_failover.decisions.plans import Plans
from airflow_region_failover.graph.auto import Choice, ExchangePlan
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


def test_each_run_restarts_exactly_the_members_of_its_own_plan(e2e: Any, spark_connect: str) -> None:
    e2e.api.wait_for_dag(DAG, timeout=180)
    plans = Plans(e2e.store.objects)
    first, state = e2e.run(DAG, FAIL)
    assert state == "success", e2e.explain(DAG, first)
    fixed = plans.of_run(DAG, first)
    assert fixed is not None and fixed.plan.fused == () and fixed.decision is None
    assert e2e.tries(DAG, first) == {"gen.agg.0": 2, "report.0": 1}
    decision = _the_decision(e2e, DAG, first)
    assert decision["restart"] == ["gen.agg.0", "report.0"]
    regions = {s: r["reason"] for r in decision["regions"] for s in r["subtasks"]}  # the plan's regions: one each
    assert all(len(r["subtasks"]) == 1 for r in decision["regions"]), decision["regions"]
    assert regions == {"agg#1": "failed", "agg#2": "producer-unavailable", "agg#3": "producer-unavailable",
                       "report#0": "consumer"}  # agg#2,3's partitions were never written: try 1 failed first
    assert _attempts(e2e, first, "gen->agg", 2) == [1, 1]  # committed by try 1, kept by try 2
    assert _attempts(e2e, first, "agg->report", 4) == [1, 2, 2, 2]  # agg#0 kept; agg#2,3 had not run in try 1

    after = _next_after(plans, first)
    assert after.plan.fused == () and "fewer than the 3" in after.reason
    time.sleep(10.0)  # both watchers (the scheduler's and the second) decide once after the run's end
    injected = PlanDecision("e2e", ExchangePlan({"gen->agg": Choice.FUSED}), "the test's history", time.time(), first)
    plans.decide_next(DAG, injected)
    time.sleep(3.0)
    assert plans.next(DAG) == injected, "a watcher decided again after the run's end"
    second, state = e2e.run(DAG, FAIL)
    assert state == "success", e2e.explain(DAG, second)
    fixed = plans.of_run(DAG, second)
    assert fixed is not None and fixed.plan.fused == ("gen->agg",) and fixed.decision is not None
    assert e2e.tries(DAG, second) == {"gen.agg.0": 2, "report.0": 1}
    decision = _the_decision(e2e, DAG, second)
    assert decision["regions"][0]["reason"] == "failed"
    assert sorted(decision["regions"][0]["subtasks"]) == sorted(
        [f"gen#{i}" for i in range(2)] + [f"agg#{i}" for i in range(4)])
    assert e2e.store.partitions(DAG, second, "gen->agg") == ()  # fused: the exchange never left Spark
    assert _attempts(e2e, second, "agg->report", 4) == [2, 2, 2, 2]  # the whole region recomputed

    with httpx.Client(base_url=e2e.stack.url, timeout=30,
                      headers={"Authorization": f"Bearer {e2e.api.token()}"}) as client:  # the Failover tab's answer
        shown = [client.get(f"/region-failover/api/run/{DAG}/{run}").json()["plan"] for run in (first, second)]
        tab = client.get(f"/region-failover/run/{DAG}/{second}").text
    assert [(p["state"], p["results"], p["decision"]) for p in shown] == [
        ("fixed", {"gen->agg": "BLOCKING"}, None),
        ("fixed", {"gen->agg": "FUSED"}, {"id": "e2e", "decided_at": injected.decided_at, "after_run": first})]
    assert 'id="rf-run-plan"' in tab and "the test&#x27;s history" in tab

    expected = expected_rows("rf_fused.py", spark_connect)
    assert _report(e2e, first) == expected and _report(e2e, second) == expected

"""A sliced chain end to end on the embedded stack (``tests/e2e/dags/rf_sliced.py``)::

    gen#0,1 ==keyed by k==> total#0,1 ==> report#0      the run's plan: gen 2 epochs, total 3 epochs
                            X total#0 fails in its epoch 1 (virtual subtask total#1 of 6) on try 1

The decision is stored before the run, as the scheduler's watcher stores one after a history of frequent failures.
The run's first tasks fix it; region failover restarts {total#0} and its consumer; total#0's second try resumes
after its epoch 0 (the task log and the Failover tab say so) and the report equals the one computed in Python.
"""

from __future__ import annotations

import re
from typing import Any

import httpx
import pytest

from airflow_region_failover.decisions.plans import Plans
from airflow_region_failover.graph.auto import ExchangePlan
from airflow_region_failover.graph.ids import PartitionId
from airflow_region_failover.planning.epochs import EpochsChoice
from airflow_region_failover.planning.stored import PlanDecision
from tests.e2e.dags.rf_sliced import DAG_ID, expected
from tests.e2e.scenarios import _reasons, _the_decision

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(1500)]


def test_a_sliced_chain_runs_its_run_plans_epochs_and_a_failed_try_resumes_after_its_last(e2e: Any) -> None:
    e2e.api.wait_for_dag(DAG_ID, timeout=180)
    plans = Plans(e2e.store.objects)
    plans.decide_next(DAG_ID, PlanDecision("e2e", ExchangePlan(), "stored by the test", 1.0, "", {
        "gen": EpochsChoice(2, "the test's choice"), "total": EpochsChoice(3, "the test's choice")}))
    run_id, state = e2e.run(DAG_ID, {"fail": ["total#1"]})
    assert state == "success", e2e.explain(DAG_ID, run_id)
    fixed = plans.of_run(DAG_ID, run_id)
    assert fixed is not None and {s: c.epochs for s, c in fixed.epochs.items()} == {"gen": 2, "total": 3}
    assert e2e.tries(DAG_ID, run_id) == {"gen.0": 1, "gen.1": 1, "total.0": 2, "total.1": 1, "report.0": 1}
    assert _reasons(_the_decision(e2e, DAG_ID, run_id)) == {"total#0": "failed", "report#0": "consumer"}

    first = e2e.stack.task_log(DAG_ID, run_id, "total.0", 1)
    assert "injected failure of total#1 on try 1" in first, first[-3000:]
    second = e2e.stack.task_log(DAG_ID, run_id, "total.0", 2)
    found = re.search(r"total#0: resumed from checkpoint (\d+) \(after epoch 0 of 3, taken by try 1\)", second)
    assert found, second[-3000:]
    with httpx.Client(base_url=e2e.stack.url, timeout=30,
                      headers={"Authorization": f"Bearer {e2e.api.token()}"}) as client:
        model = client.get(f"/region-failover/api/run/{DAG_ID}/{run_id}").json()
    resumed = next(e for e in model["checkpoints"] if e["event"] == "resumed")
    assert (resumed["task_id"], resumed["skipped"], resumed["epochs"]) == ("total.0", 1, 3), model["checkpoints"]
    assert model["plan"]["epochs"]["total"]["epochs"] == 3, model["plan"]

    manifest = e2e.store.manifest(DAG_ID, run_id, PartitionId("report", 0))
    rows = sorted((r["k"], r["total"], r["n"]) for r in e2e.store.read_arrow(manifest).to_pylist())
    assert rows == expected()

"""Scenarios on the production-like stack: PostgreSQL, Redis, CeleryExecutor with one Celery worker, two
schedulers (each runs a watcher), api-server, dag-processor, triggerer, a Spark standalone cluster (master + two
workers) with a Spark Connect server on it, SeaweedFS.

    a#0 -> b#0 ==+==> c#0 ==> d#0        rf_e2e_*: a -PIPELINED POINTWISE-> b -BLOCKING ALL_TO_ALL-> c
    a#1 -> b#1 ==+==> c#1 ==> d#1                  -BLOCKING POINTWISE-> d; plus an unconnected side#0

a -> b is chained: tasks ``a.b.0`` and ``a.b.1`` run a#i and b#i (a failure of either is a failure of that task).
"""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

from airflow_region_failover.graph.ids import PartitionId
from tests.e2e.scenarios import (
    E2E_DAG,
    _attempts,
    _check_history_cli,
    _check_tries,
    _d_output,
    _delete_partition,
    _one_clear_per_decision,
    _reasons,
    _runs,
    _the_decision,
    _wait_idle,
)

pytestmark = [pytest.mark.e2e, pytest.mark.production, pytest.mark.timeout(1500)]


@pytest.mark.prefetch("region")
def test_region_failure_reruns_failed_region_and_consumers(e2e: Any) -> None:
    """c#0 fails once -> {c#0} (failed) + {d#0} (consumer) rerun; b's committed results are reused."""
    _, run_id, state = e2e.finished("region")
    assert state == "success", e2e.explain("rf_e2e_region", run_id)
    _check_tries(e2e.tries("rf_e2e_region", run_id), {"c.0"}, {"d.0"})
    assert set(_attempts(e2e, "rf_e2e_region", run_id, ["b->c#0", "b->c#1", "c->d#1"]).values()) == {1}
    assert _d_output(e2e, "rf_e2e_region", run_id) == E2E_DAG["expected_d"]()
    decision = _the_decision(e2e, "rf_e2e_region", run_id)
    assert _reasons(decision) == {"c#0": "failed", "d#0": "consumer"}
    assert decision["reused"] == ["b->c#0", "b->c#1"]
    _check_history_cli(e2e, "rf_e2e_region", run_id)


def test_deleted_producer_result_backtracks_to_producer_region(e2e: Any, tmp_path: Path) -> None:
    """b#1's committed result is deleted before c#0 fails -> the producer region {a#1,b#1} reruns too."""
    gate = tmp_path / "gate"
    run_id = e2e.api.trigger("rf_e2e_region", {"fail": {"c#0": 1}, "gate": str(gate)})
    e2e.wait_until(lambda: (gate / "c#0.started").exists(), 900, "c#0 at the gate")
    e2e.wait_until(lambda: e2e.states("rf_e2e_region", run_id).get("c.1") == "success", 900, "c#1 done")
    assert _delete_partition(e2e, "rf_e2e_region", run_id, "b->c", 1) > 0
    (gate / "go").touch()
    assert e2e.final_state("rf_e2e_region", run_id) == "success"
    tries = e2e.tries("rf_e2e_region", run_id)
    _check_tries(tries, {"c.0"}, {"a.b.1", "c.1", "d.0", "d.1"})
    assert tries["a.b.1"] == tries["c.1"] == 2, "ran before the failure, so rerun"
    decision = _the_decision(e2e, "rf_e2e_region", run_id)
    assert _reasons(decision) == {"a#1+b#1": "producer-unavailable", "c#0": "failed", "c#1": "consumer",
                                  "d#0": "consumer", "d#1": "consumer"}
    assert _d_output(e2e, "rf_e2e_region", run_id) == E2E_DAG["expected_d"]()


@pytest.mark.prefetch("budget")
def test_budget_exhausted_fails_the_run_with_reason(e2e: Any) -> None:
    """fixed-delay attempts=1: the first failure restarts, the second exhausts -> run failed, history says why."""
    _, run_id, state = e2e.finished("budget")
    assert state == "failed"
    doc = e2e.history("rf_e2e_budget", run_id)
    assert [d["status"] for d in doc["decisions"]] == ["applied", "exhausted"]
    assert "allows no further restart" in doc["decisions"][-1]["reason"]
    assert e2e.tries("rf_e2e_budget", run_id)["c.0"] == 2
    note = e2e.api.dag_run("rf_e2e_budget", run_id)["note"] or ""
    assert "EXHAUSTED" in note and "allows no further restart" in note


def test_two_concurrent_failures_are_one_merged_restart(e2e: Any, tmp_path: Path) -> None:
    """c#0 and c#1 fail together (barrier) -> one decision listing both failures, one clear, one rerun each."""
    conf = {"fail": {"c#0": 1, "c#1": 1}, "gate": str(tmp_path / "gate"), "barrier": True}
    run_id, state = e2e.run("rf_e2e_region", conf)
    assert state == "success", e2e.explain("rf_e2e_region", run_id)
    doc = e2e.history("rf_e2e_region", run_id)
    assert len(doc["decisions"]) == 1, e2e.explain("rf_e2e_region", run_id)
    [decision] = doc["decisions"]
    assert decision["status"] == "applied"
    assert sorted(f["task_id"] for f in decision["failures"]) == ["c.0", "c.1"]
    assert decision["restart"] == ["c.0", "c.1", "d.0", "d.1"]
    _check_tries(e2e.tries("rf_e2e_region", run_id), {"c.0", "c.1"}, {"d.0", "d.1"})
    assert _d_output(e2e, "rf_e2e_region", run_id) == E2E_DAG["expected_d"]()


@pytest.mark.prefetch("kill")
def test_sigkilled_task_is_recovered_through_the_scheduler(e2e: Any) -> None:
    """c#0 SIGKILLs its own process (no hook fires anywhere) -> the scheduler's watcher records and restarts."""
    _, run_id, state = e2e.finished("kill")
    assert state == "success", e2e.explain("rf_e2e_region", run_id)
    decision = _the_decision(e2e, "rf_e2e_region", run_id)
    assert [f["path"] for f in decision["failures"]] == ["scheduler"]
    _check_tries(e2e.tries("rf_e2e_region", run_id), {"c.0"}, {"d.0"})



@pytest.mark.prefetch("region", "kill", "budget")
def test_every_decision_of_the_prefetched_runs_is_cleared_exactly_once_by_two_schedulers(e2e: Any) -> None:
    """Two schedulers, each with a watcher, see every failure: each applied decision is one clear."""
    for name in ("region", "kill", "budget"):
        dag_id, run_id, _state = e2e.finished(name)
        assert _one_clear_per_decision(e2e, dag_id, run_id) >= 1, name


def test_a_scheduler_killed_mid_recovery_leaves_it_to_the_other(e2e: Any, tmp_path: Path) -> None:
    """c#0 fails; the moment its decision is in the run log, scheduler 1 is SIGKILLed and kept down. Scheduler 2
    applies the decision and finishes the run: exactly one clear for the one decision (the API's audit log)."""
    dag_id, gate = "rf_e2e_region", tmp_path / "gate"
    run_id = e2e.api.trigger(dag_id, {"fail": {"c#0": 1}, "gate": str(gate)})
    e2e.wait_until(lambda: (gate / "c#0.started").exists(), 900, "c#0 at the gate")
    (gate / "go").touch()
    e2e.wait_until(lambda: bool(e2e.history(dag_id, run_id).get("decisions")), 300, "the decision recorded")
    e2e.stack.kill("scheduler", stay_down=True)
    try:
        assert e2e.final_state(dag_id, run_id) == "success", e2e.explain(dag_id, run_id)
    finally:
        e2e.stack.revive("scheduler")
    assert _reasons(_the_decision(e2e, dag_id, run_id)) == {"c#0": "failed", "d#0": "consumer"}
    _check_tries(e2e.tries(dag_id, run_id), {"c.0"}, {"d.0"})
    assert _one_clear_per_decision(e2e, dag_id, run_id) == 1


def _expect_one_failing_run(e2e: Any, dag_id: str, runs: list[dict[str, Any]], failing_day: str) -> None:
    """Only the run of ``failing_day`` restarted ({c#0} failed + {d#0} consumer), every other run ran each task
    once; every run's output is right and lives under its own run id."""
    for run in runs:
        run_id, day = run["dag_run_id"], run["logical_date"][:10]
        assert e2e.final_state(dag_id, run_id) == "success", e2e.explain(dag_id, run_id)
        if day == failing_day:
            assert _reasons(_the_decision(e2e, dag_id, run_id)) == {"c#0": "failed", "d#0": "consumer"}
            _check_tries(e2e.tries(dag_id, run_id), {"c.0"}, {"d.0"})
        else:
            assert not e2e.history(dag_id, run_id).get("decisions"), e2e.explain(dag_id, run_id)
            assert set(e2e.tries(dag_id, run_id).values()) == {1}
        assert _d_output(e2e, dag_id, run_id) == E2E_DAG["expected_d"]()
        assert e2e.store.manifest(dag_id, run_id, PartitionId("d", 0)).run_id == run_id


@pytest.mark.prefetch("daily")
def test_scheduled_daily_runs_catch_up_and_restart_only_the_failing_day(e2e: Any) -> None:
    """``rf_e2e_daily`` (``@daily``, catch-up from yesterday; Airflow 3's cron timetable runs at each midnight,
    today's included): once unpaused, the scheduler creates both runs by itself; the second day's c#0 fails once:
    only that run's region restarts."""
    dag_id, count = "rf_e2e_daily", E2E_DAG["DAILY_RUNS"]
    start = E2E_DAG["DAILY_START"]
    days = [(start + timedelta(days=i)).strftime("%Y-%m-%d") for i in range(count)]
    e2e.wait_until(lambda: len(_runs(e2e, dag_id, "scheduled")) >= count, 300, "the scheduled runs")
    runs = _runs(e2e, dag_id, "scheduled")
    assert [r["logical_date"][:10] for r in runs] == days
    _expect_one_failing_run(e2e, dag_id, runs, E2E_DAG["DAILY_FAILING_DAY"])


@pytest.mark.prefetch("backfill")
def test_a_backfill_of_three_dates_restarts_only_the_failing_runs_region(e2e: Any) -> None:
    """A backfill (REST ``POST /backfills``) of 2026-02-01..03 whose 02-02 run's c#0 fails once: that run's
    {c#0} + {d#0} restart, the other two runs are untouched, each run's results live under its own run."""
    dag_id = "rf_e2e_backfill"
    e2e.wait_until(lambda: len(_runs(e2e, dag_id, "backfill")) == 3, 300, "three backfill runs")
    runs = _runs(e2e, dag_id, "backfill")
    assert [r["logical_date"][:10] for r in runs] == ["2026-02-01", "2026-02-02", "2026-02-03"]
    _expect_one_failing_run(e2e, dag_id, runs, "2026-02-02")
    assert not _runs(e2e, dag_id, "scheduled"), "the DAG ends 2026-02-03: only the backfill runs it"


def test_sigkilled_celery_worker_mid_task_is_recovered(e2e: Any, tmp_path: Path) -> None:
    """The Celery worker (and every task process under it) is SIGKILLed while c#0, the run's last task at work,
    runs, as a lost machine or pod: no hook fires anywhere. The scheduler fails the task once its heartbeat stops
    (30 s here), a watcher records the failure and restarts {c#0} + its consumer {d#0}; the restarted worker runs
    them; nothing else reruns."""
    _wait_idle(e2e)  # last, alone: every task on the worker dies with it
    dag_id, gate = "rf_e2e_region", tmp_path / "gate"
    run_id = e2e.api.trigger(dag_id, {"hold": ["c#0"], "gate": str(gate)})
    e2e.wait_until(lambda: (gate / "c#0.started").exists(), 900, "c#0 running on the worker")
    others = ("a.b.0", "a.b.1", "c.1", "d.1", "side.0")  # killing the worker kills all it runs
    e2e.wait_until(lambda: all(e2e.states(dag_id, run_id).get(t) == "success" for t in others), 900, "the rest")
    e2e.stack.kill("celery-worker", tree=True)
    assert e2e.final_state(dag_id, run_id) == "success", e2e.explain(dag_id, run_id)
    decision = _the_decision(e2e, dag_id, run_id)
    assert _reasons(decision) == {"c#0": "failed", "d#0": "consumer"}
    assert [f["path"] for f in decision["failures"]] == ["scheduler"]
    _check_tries(e2e.tries(dag_id, run_id), {"c.0"}, {"d.0"})
    assert e2e.stack.restarts.get("celery-worker", 0) >= 1
    assert _one_clear_per_decision(e2e, dag_id, run_id) == 1
    assert _d_output(e2e, dag_id, run_id) == E2E_DAG["expected_d"]()

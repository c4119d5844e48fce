"""The run-time failover loop on an in-memory decision log and a fake REST API (no Airflow processes)."""

from __future__ import annotations

import runpy
from pathlib import Path
from typing import Any

import pytest

from airflow_region_failover.airflow.decisions import DecisionLogs, MemoryLogBackend, open_decision
from airflow_region_failover.airflow.executor import (
    FailureEvent,
    apply_due,
    plan_for,
    record_failure,
    restart_wait,
)
from airflow_region_failover.airflow.history import format_history, note_text
from airflow_region_failover.airflow.render import job_of
from airflow_region_failover.failover.availability import KnownAvailability
from airflow_region_failover.graph.ids import SubtaskId

DAGS = runpy.run_path(str(Path(__file__).parents[1] / "e2e" / "dags" / "rf_e2e.py"))


def spec() -> Any:
    """The job of ``rf_e2e_budget`` (the module's last DAG): fixed-delay, attempts 1, delay 0 s."""
    return job_of(DAGS["_dag"])


class FakeApi:
    def __init__(self) -> None:
        self.cleared: list[list[str]] = []
        self.notes: list[str] = []

    def clear(self, dag_id: str, run_id: str, task_ids: list[str]) -> list[dict[str, Any]]:
        self.cleared.append(list(task_ids))
        return [{"task_id": t, "try_number": 1} for t in task_ids]

    def set_run_note(self, dag_id: str, run_id: str, note: str) -> None:
        self.notes.append(note)


def event(task: str, try_number: int = 1, at: float = 100.0) -> FailureEvent:
    return FailureEvent("rf_e2e_budget", "r1", task, -1, try_number, "boom", "worker", at)


def record(logs: DecisionLogs, ev: FailureEvent, now: float, unavailable: tuple[str, ...] = ()) -> Any:
    job = spec()
    sub = SubtaskId.parse(ev.task_id.replace(".", "#"))
    plan = plan_for(job, sub, KnownAvailability.except_(unavailable))
    return logs.update(ev.dag_id, ev.run_id, lambda d: record_failure(d, ev, job, plan, now))


@pytest.fixture
def logs() -> DecisionLogs:
    return DecisionLogs(MemoryLogBackend(), "rf/failover/v1")


def test_failure_creates_pending_decision_then_duplicate_is_ignored(logs: DecisionLogs) -> None:
    doc, out = record(logs, event("c.0"), 100.0)
    assert out.kind == "created" and open_decision(doc)["restart"] == ["c.0", "d.0"]
    assert list(logs.pending_runs()) == [("rf_e2e_budget", "r1")]
    _, again = record(logs, event("c.0"), 100.5)
    assert again.kind == "duplicate"


def test_concurrent_failure_merges_into_pending_and_apply_clears_once(logs: DecisionLogs) -> None:
    doc, out = record(logs, event("c.0"), 100.0)
    api = FakeApi()
    applied = apply_due(logs, api, "rf_e2e_budget", "r1", "test", now=lambda: 100.1)
    assert applied is not None and api.cleared == [["c.0", "d.0"]]
    assert list(logs.pending_runs()) == []
    # the killed try of a cleared task is stale, not a new failure
    _, stale = record(logs, event("d.0", 1), 100.2)
    assert stale.kind == "stale"
    # a second real failure exceeds fixed-delay attempts=1: exhausted, with a reason, nothing cleared
    doc, out = record(logs, event("c.0", 2), 101.0)
    assert out.kind == "exhausted" and "allows no further restart" in doc["decisions"][-1]["reason"]
    assert "EXHAUSTED" in format_history(doc) and "Region failover" in note_text(doc)
    assert apply_due(logs, api, "rf_e2e_budget", "r1", "test", now=lambda: 102.0) is None


def test_second_failure_while_pending_counts_like_flink_fixed_delay(logs: DecisionLogs) -> None:
    """fixed-delay counts every failure (only exponential-delay merges attempts): attempts=1 -> exhausted."""
    record(logs, event("c.0"), 100.0)
    doc, second = record(logs, event("c.1"), 100.0)
    assert second.kind == "exhausted"
    assert [d["status"] for d in doc["decisions"]] == ["cancelled", "exhausted"]


def test_restarted_task_waits_for_the_delay_only_on_its_first_try_after_the_clear(logs: DecisionLogs) -> None:
    record(logs, event("c.0"), 100.0)
    doc, _ = logs.update("rf_e2e_budget", "r1", lambda d: d["decisions"][0].update(apply_at=130.0))
    apply_due(logs, FakeApi(), "rf_e2e_budget", "r1", "test", now=lambda: 101.5)
    doc = logs.read("rf_e2e_budget", "r1")
    assert doc["decisions"][0]["status"] == "applied"
    assert restart_wait(doc, "c.0", 2, 110.0) == 20.0
    assert restart_wait(doc, "c.0", 3, 110.0) == 0.0
    assert restart_wait(doc, "a.0", 2, 110.0) == 0.0

"""The watcher decides the next run's plan of a DAG rendered PER_RUN when one of its runs ends.

    src#0 ==B==> gen#0 --AUTO--> agg#0 --AUTO--> fin#0 ==B==> sink#0        (tests/unit/test_authoring_per_run.py)
"""

from __future__ import annotations

from typing import Any

import pytest

from airflow_region_failover.decisions.plans import Plans
from airflow_region_failover.decisions.storage import RunLogs
from airflow_region_failover.plugins import metadata_db as probes
from airflow_region_failover.plugins import next_plan
from tests.support.fakes import FakeApi, MemoryObjects
from tests.unit.plugins.test_watcher import watcher
from tests.unit.test_authoring_per_run import DAG_ID, Measured, _spec


def _watching(monkeypatch: pytest.MonkeyPatch, logs: RunLogs) -> tuple[Any, set[tuple[str, str]], list[str]]:
    """A watcher over ``logs`` that sees r1 at work, the job of ``_spec()`` and an empty history: the watcher, the
    runs at work (change it to end runs) and the runs each next plan was decided after."""
    from airflow_region_failover.planning.history import History

    w = watcher(logs, FakeApi(), monkeypatch, [])  # type: ignore[arg-type]
    active = {(DAG_ID, "r1")}
    monkeypatch.setattr(probes, "active_runs", lambda: set(active))
    monkeypatch.setattr(probes, "serialized_job", lambda dag_id: _spec())
    decided: list[str] = []
    real = next_plan.decide_next

    def decide(dag_id: str, spec: Any, plans: Plans, after: str = "") -> Any:
        decided.append(after)
        return real(dag_id, spec, plans, after, Measured(History(())))

    monkeypatch.setattr(next_plan, "decide_next", decide)
    return w, active, decided


def test_a_run_that_ends_gets_its_dag_a_next_plan_once(monkeypatch: pytest.MonkeyPatch) -> None:
    from airflow_region_failover.plugins import watcher as watcher_module

    objects = MemoryObjects()
    w, active, decided = _watching(monkeypatch, RunLogs(objects))
    w.tick()
    assert decided == [] and Plans(objects).next(DAG_ID) is None  # r1 at work: nothing to decide yet
    active.clear()
    w.tick()
    w.clock.now += watcher_module.PLAN_SETTLE_S  # type: ignore[attr-defined]
    w.tick()
    w.tick()
    stored = Plans(objects).next(DAG_ID)  # type: ignore[arg-type]
    assert decided == ["r1"] and stored is not None and stored.after_run == "r1" and stored.plan.fused == ()


def test_a_decision_that_fails_is_tried_again_later_then_given_up(monkeypatch: pytest.MonkeyPatch) -> None:
    from airflow_region_failover.plugins import watcher as watcher_module

    w = watcher(RunLogs(MemoryObjects()), FakeApi(), monkeypatch, [])  # type: ignore[arg-type]
    active = {(DAG_ID, "r1")}
    monkeypatch.setattr(probes, "active_runs", lambda: set(active))
    tries: list[float] = []

    def away(dag_id: str) -> Any:
        tries.append(w.clock())
        raise ConnectionError("metadata DB away")

    w.tick()
    monkeypatch.setattr(probes, "serialized_job", away)
    active.clear()
    for _ in range(300):  # 30 s of passes
        w.tick()
        w.clock.now += 0.1  # type: ignore[attr-defined]
    assert len(tries) == watcher_module.GIVE_UP_TRIES and tries[1] - tries[0] >= 1.0, tries


def test_a_run_that_stops_for_a_restart_is_planned_after_only_when_it_has_really_ended(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """r1 fails: it leaves the runs at work while its restart is decided (an open decision) and comes back once the
    clear is applied. A plan decided then would miss r1's last try (a failed try leaves no task summary, so its
    run is not in the history yet); the next plan comes when r1 has ended for good."""
    from airflow_region_failover.failover.run_log import Decision, DecisionStatus, RunLog

    logs = RunLogs(MemoryObjects())
    w, active, decided = _watching(monkeypatch, logs)
    monkeypatch.setattr(type(w), "_apply", lambda self, dag_id, run_id: None)  # the restart stays open
    w.tick()
    pending = Decision(1, DecisionStatus.PENDING, w.clock(), ())
    logs.update(DAG_ID, "r1", lambda log: (RunLog(DAG_ID, "r1", decisions=(pending,)), None))
    active.clear()  # r1 failed; its restart is decided, not applied
    for _ in range(50):
        w.tick()
        w.clock.now += 0.2  # type: ignore[attr-defined]
    assert decided == [], "planned after a run that is about to restart"
    active.add((DAG_ID, "r1"))  # the clear applied: r1 at work again
    w.tick()
    applied = Decision(1, DecisionStatus.APPLIED, w.clock(), ())
    logs.update(DAG_ID, "r1", lambda log: (RunLog(DAG_ID, "r1", decisions=(applied,)), None))
    active.clear()  # r1 ended
    for _ in range(50):
        w.tick()
        w.clock.now += 0.2  # type: ignore[attr-defined]
    assert decided == ["r1"]

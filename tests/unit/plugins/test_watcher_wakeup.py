"""When the watcher's next pass comes (plugins/watcher.py): at the moment an open decision it saw becomes due, and
soon again while a due one waits for Airflow to settle — not a whole ``watch_interval`` later — on the in-memory
decision log of test_watcher.py::

    a#0 -> b#0 ==+==> c#0 ==> d#0        rf_e2e_budget: c#0 fails; the decision restarts c.0 + d.0
    a#1 -> b#1 ==+==> c#1 ==> d#1
"""

from __future__ import annotations

import threading
import time

import pytest

from airflow_region_failover.decisions.storage import RunLogs
from airflow_region_failover.failover import run_log
from airflow_region_failover.plugins import metadata_db as probes
from airflow_region_failover.plugins.watcher import Watcher
from tests.support.fakes import DAG, RUN, FakeApi, MemoryObjects, edit_decision
from tests.unit.plugins.test_watcher import event, watcher


def test_a_pass_that_records_a_failure_asks_for_the_next_when_its_decision_becomes_due(
        monkeypatch: pytest.MonkeyPatch) -> None:
    logs, api = RunLogs(MemoryObjects()), FakeApi()  # type: ignore[arg-type]
    w = watcher(logs, api, monkeypatch, [event()])
    monkeypatch.setattr(run_log, "MERGE_WINDOW_S", 30.0)
    monkeypatch.setattr(probes, "settled", lambda dag_id, run_id, failed, downstream_too=True: False)
    w.tick()  # records the failure: a restart 30 s from now (its delay)
    edit_decision(logs, 1, apply_at=time.time() + 30.0)
    monkeypatch.setattr(probes, "settled", lambda dag_id, run_id, failed, downstream_too=True: True)
    wake = w.tick()
    decision = logs.read(DAG, RUN).decisions[0]
    assert api.cleared == [] and decision.clear_at > time.time() + 20
    assert wake == decision.clear_at


def test_a_due_decision_waiting_for_airflow_to_settle_is_looked_at_again_soon(
        monkeypatch: pytest.MonkeyPatch) -> None:
    logs, api = RunLogs(MemoryObjects()), FakeApi()  # type: ignore[arg-type]
    w = watcher(logs, api, monkeypatch, [event()])
    monkeypatch.setattr(probes, "settled", lambda dag_id, run_id, failed, downstream_too=True: False)
    before = time.time()
    wake = w.tick()
    assert wake is not None and before < wake <= time.time() + 0.5, "sooner than the 1 s interval"
    assert api.cleared == []
    monkeypatch.setattr(probes, "settled", lambda dag_id, run_id, failed, downstream_too=True: True)
    assert w.tick() is None and api.cleared == [["c.0", "d.0"]]


class Waits(threading.Event):
    """The watcher thread's stop event: records how long each wait was asked to be, stops after ``n``."""

    def __init__(self, n: int) -> None:
        super().__init__()
        self.n, self.asked = n, []

    def wait(self, timeout: float | None = None) -> bool:
        self.asked.append(timeout)
        return len(self.asked) > self.n


def test_the_thread_waits_until_the_next_due_time_never_longer_than_the_interval() -> None:
    w = Watcher(interval=5.0, lookback=60.0)
    now = time.time()
    wakes = iter([now + 0.5, None, now + 60.0])
    w.tick = lambda: next(wakes)  # type: ignore[method-assign]
    w._stop = Waits(3)
    w._run()
    first, after_due, after_none, after_far = w._stop.asked
    assert first == 5.0 and 0.0 < after_due <= 0.5 and after_none == 5.0 and after_far == 5.0

"""The scheduler's watcher on an in-memory decision log, with its metadata-DB probes stubbed.

    a#0 -> b#0 ==+==> c#0 ==> d#0        rf_e2e_budget: c#0 fails; the decision restarts c.0 + d.0
    a#1 -> b#1 ==+==> c#1 ==> d#1
"""

from __future__ import annotations

import contextlib
import time
from typing import Any

import pytest

from airflow_region_failover.decisions.storage import RunLogs
from airflow_region_failover.failover.run_log import FailureRecord
from airflow_region_failover.plugins import metadata_db as probes
from airflow_region_failover.plugins.watcher import Watcher
from tests.support.fakes import DAG, RUN, FakeApi, MemoryObjects, budget_spec, failure, services

Found = tuple[str, str, FailureRecord]
REAL_SETTLED = probes.settled


def event(task: str = "c.0", try_number: int = 1) -> Found:
    return DAG, RUN, failure(task, try_number, time.time() - 5)


class FlakyLogs(RunLogs):
    """Decision logs whose first ``failures`` writes fail as a throttled or restarting S3 would."""

    def __init__(self, objects: Any, failures: int) -> None:
        super().__init__(objects)
        self.failures = failures

    def update(self, *args: Any, **kwargs: Any) -> Any:
        if self.failures:
            self.failures -= 1
            raise ConnectionError("S3 SlowDown")
        return super().update(*args, **kwargs)


def watcher(logs: RunLogs, api: FakeApi, monkeypatch: pytest.MonkeyPatch, found: list[Found]) -> Watcher:
    """A watcher whose metadata-DB probes answer from ``found`` (failed step tasks), with Airflow settled."""
    from airflow_region_failover.failover import run_log

    monkeypatch.setattr(run_log, "MERGE_WINDOW_S", 0.0)
    monkeypatch.setattr(probes, "active_runs", lambda: {(DAG, RUN)})
    monkeypatch.setattr(probes, "failed_step_tasks", lambda runs, since: list(found))
    monkeypatch.setattr(probes, "serialized_job", lambda dag_id: budget_spec())
    monkeypatch.setattr(probes, "settled", lambda dag_id, run_id, failed, downstream_too=True: True)
    monkeypatch.setattr(probes, "not_restarted", lambda runs: {})
    monkeypatch.setattr(probes, "user_stopped", lambda dag_id, run_id, task_ids, since: None)
    w = Watcher(interval=0.1, lookback=60.0, services=services(logs, api), clock=Clock())
    w._since = time.time() - 60
    return w


class Clock:
    """The watcher's clock for retries: stands still until a test moves it."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def tick(w: Watcher) -> None:
    """One pass of the watcher thread, which logs and survives whatever a pass raises."""
    with contextlib.suppress(Exception):
        w.tick()


def test_a_failure_whose_handling_hit_a_transient_s3_error_is_handled_on_the_next_tick(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """One throttled write must not drop the failure for good: the next tick records and applies it."""
    logs, api = FlakyLogs(MemoryObjects(), failures=1), FakeApi()
    w = watcher(logs, api, monkeypatch, [event()])
    tick(w)
    assert logs.read(DAG, RUN).decisions == ()
    tick(w)
    assert logs.read(DAG, RUN).decisions == (), "tried again before its retry was due"
    w.clock.now += 1.0  # type: ignore[attr-defined]
    tick(w)
    tick(w)
    assert [d.status.value for d in logs.read(DAG, RUN).decisions] == ["applied"]
    assert api.cleared == [["c.0", "d.0"]]


def test_a_failure_that_cannot_be_recorded_is_tried_again_less_and_less_often(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """S3 away for a minute: the failure is tried again after 1, 2, 4, 8 s, then every 10 s — not on every pass
    (each try is a REST call and S3 requests, per failure)."""
    logs, api = FlakyLogs(MemoryObjects(), failures=10**6), FakeApi()
    w = watcher(logs, api, monkeypatch, [event()])
    for _ in range(600):  # 60 s of passes, every 0.1 s
        tick(w)
        w.clock.now += 0.1  # type: ignore[attr-defined]
    tried = 10**6 - logs.failures
    assert tried == 9, tried  # at t = 0, 1, 3, 7, 15, 25, 35, 45, 55 s (not 600 times)


def test_two_watchers_clear_a_task_our_clear_did_not_restart_once(monkeypatch: pytest.MonkeyPatch) -> None:
    """Two schedulers (HA) both find c.0 parked in up_for_retry at the try our clear stopped: one clear, not two
    (a second clear would kill the try the first one started)."""
    logs, api = RunLogs(MemoryObjects()), FakeApi()  # type: ignore[arg-type]
    found = [event()]
    first, second = watcher(logs, api, monkeypatch, found), watcher(logs, api, monkeypatch, found)
    first.tick()
    first.tick()
    assert api.cleared == [["c.0", "d.0"]]
    monkeypatch.setattr(probes, "not_restarted", lambda runs: {(DAG, RUN): [("c.0", 1)]})
    first._kick()
    second._kick()
    assert api.cleared[1:] == [["c.0"]], api.cleared


def test_watch_interval_and_lookback_that_would_spin_or_blind_the_watcher_fall_back(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AIRFLOW__REGION_FAILOVER__WATCH_INTERVAL", "0")
    monkeypatch.setenv("AIRFLOW__REGION_FAILOVER__WATCH_LOOKBACK", "nan")
    w = Watcher()
    assert w.interval == 1.0 and w.lookback == 600.0


def test_the_late_path_still_waits_for_airflow_to_settle(monkeypatch: pytest.MonkeyPatch) -> None:
    """A decision past the settle timeout must not be cleared while the scheduler is still marking the failed
    task's downstream (the StaleDataError window): late only lifts the wait for the *downstream* marks."""
    from airflow_region_failover.plugins import watcher as watcher_module

    logs, api = RunLogs(MemoryObjects()), FakeApi()  # type: ignore[arg-type]
    w = watcher(logs, api, monkeypatch, [event()])
    monkeypatch.setattr(probes, "states", lambda dag_id, run_id, task_ids: {"running"})
    monkeypatch.setattr(probes, "settled", REAL_SETTLED)
    monkeypatch.setattr(watcher_module, "SETTLE_TIMEOUT_S", 0.0)
    w.tick()
    w.tick()
    assert api.cleared == [], "cleared while the failed task is still running"



def test_a_failure_unrecorded_for_longer_than_the_look_back_window_is_still_recorded(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """S3 is away for longer than ``watch_lookback``: by the time it is back, the DB probe no longer looks as far
    back as the failure's end (nor, once the run has ended, at the run). The failure must not be dropped with the
    window: every failure the watcher could not record is retried until it is."""
    logs, api = FlakyLogs(MemoryObjects(), failures=1), FakeApi()
    found = [event()]
    w = watcher(logs, api, monkeypatch, found)
    monkeypatch.setattr(probes, "failed_step_tasks",
                        lambda runs, since: [f for f in found if f[2].at >= since and (f[0], f[1]) in runs])
    tick(w)
    assert logs.read(DAG, RUN).decisions == ()
    w.clock.now += 1.0  # type: ignore[attr-defined]
    w._since = time.time()  # the window moved past the failure's end ...
    monkeypatch.setattr(probes, "active_runs", lambda: set())
    w._runs.clear()  # ... and past the run, which ended
    tick(w)
    tick(w)
    assert [d.status.value for d in logs.read(DAG, RUN).decisions] == ["applied"]
    assert api.cleared == [["c.0", "d.0"]]

"""The run-time failover loop on an in-memory decision log and a fake REST API (no Airflow processes).

    a#0 -> b#0 ==+==> c#0 ==> d#0        rf_e2e_budget (fixed-delay, attempts 1, delay 0 s)
    a#1 -> b#1 ==+==> c#1 ==> d#1
"""

from __future__ import annotations

from typing import Any

import pytest

from airflow_region_failover.decisions.storage import RunLogs
from airflow_region_failover.decisions.try_log import LogState, TryLog
from airflow_region_failover.failover.handler import HandlingResult, restart_wait
from airflow_region_failover.failover.options import FailoverConfig
from airflow_region_failover.failover.run_log import FailureRecord, RunLog
from airflow_region_failover.plugins.clearing import apply_due, handle_failure
from airflow_region_failover.plugins.history import format_history, note_text
from tests.support.fakes import DAG, RUN, FakeApi, KnownStore, MemoryObjects, budget_spec, edit_decision, services
from tests.support.fakes import failure as event


def record(logs: RunLogs, ev: FailureRecord, now: float, unavailable: tuple[str, ...] = ()) -> tuple[RunLog, Any]:
    """What the worker's listener does for ``ev`` at time ``now``; returns the log and the outcome."""
    result: HandlingResult = handle_failure(DAG, RUN, ev, budget_spec(), services(logs, store=KnownStore(unavailable)),
                                            now=lambda: now)
    return logs.read(DAG, RUN), result


def kind(result: HandlingResult) -> str:
    return result.outcome.value


def open_restart(doc: RunLog) -> list[str]:
    assert doc.open_decision is not None
    return list(doc.open_decision.restart)


def statuses(doc: RunLog) -> list[str]:
    return [d.status.value for d in doc.decisions]


@pytest.fixture
def logs() -> RunLogs:
    return RunLogs(MemoryObjects())  # type: ignore[arg-type]


def test_failure_creates_pending_decision_then_duplicate_is_ignored(logs: RunLogs) -> None:
    doc, out = record(logs, event("c.0"), 100.0)
    assert kind(out) == "created" and open_restart(doc) == ["c.0", "d.0"]
    assert list(logs.pending_runs()) == [("rf_e2e_budget", "r1")]
    _, again = record(logs, event("c.0"), 100.5)
    assert kind(again) == "duplicate"


def test_concurrent_failure_merges_into_pending_and_apply_clears_once(logs: RunLogs) -> None:
    doc, out = record(logs, event("c.0"), 100.0)
    api = FakeApi()
    applied = apply_due(services(logs, api), DAG, RUN, "test", now=lambda: 100.1)
    assert applied is not None and api.cleared == [["c.0", "d.0"]]
    assert list(logs.pending_runs()) == []
    # the killed try of a cleared task is stale, not a new failure
    _, stale = record(logs, event("d.0", 1), 100.2)
    assert kind(stale) == "stale"
    # a second real failure exceeds fixed-delay attempts=1: exhausted, with a reason, nothing cleared
    doc, out = record(logs, event("c.0", 2), 101.0)
    assert kind(out) == "exhausted" and "allows no further restart" in doc.decisions[-1].reason
    assert "EXHAUSTED" in format_history(doc) and "Region failover" in note_text(doc)
    assert apply_due(services(logs, api), DAG, RUN, "test", now=lambda: 102.0) is None


def test_second_failure_while_pending_counts_like_flink_fixed_delay(logs: RunLogs) -> None:
    """fixed-delay counts every failure (only exponential-delay merges attempts): attempts=1 -> exhausted."""
    record(logs, event("c.0"), 100.0)
    doc, second = record(logs, event("c.1"), 100.0)
    assert kind(second) == "exhausted"
    assert statuses(doc) == ["cancelled", "exhausted"]


def test_restarted_task_waits_for_the_delay_only_on_its_first_try_after_the_clear(logs: RunLogs) -> None:
    record(logs, event("c.0"), 100.0)
    edit_decision(logs, 1, apply_at=130.0)
    apply_due(services(logs), DAG, RUN, "test", now=lambda: 101.5)
    doc = logs.read(DAG, RUN)
    assert statuses(doc) == ["applied"]
    assert restart_wait(doc, "c.0", 2, 110.0) == 20.0
    assert restart_wait(doc, "c.0", 3, 110.0) == 0.0
    assert restart_wait(doc, "a.0", 2, 110.0) == 0.0


def restarted_scheduler(logs: RunLogs, api: FakeApi, monkeypatch: pytest.MonkeyPatch) -> Any:
    """A watcher as a freshly started scheduler builds it: nothing in memory, only the durable log. The three
    metadata-DB probes are stubbed (no failed task in the DB, Airflow settled, nothing to requeue)."""
    from airflow_region_failover.plugins import metadata_db as probes
    from airflow_region_failover.plugins.watcher import Watcher

    monkeypatch.setattr(Watcher, "_failed_in_db", lambda self: [])
    monkeypatch.setattr(Watcher, "_settled", lambda self, dag_id, run_id, failed, downstream_too=True: True)
    monkeypatch.setattr(Watcher, "_kick", lambda self: None)
    monkeypatch.setattr(probes, "active_runs", lambda: set())
    monkeypatch.setattr(probes, "user_stopped", lambda dag_id, run_id, task_ids, since: None)
    return Watcher(interval=0.1, lookback=60.0, services=services(logs, api))


def test_decision_recorded_while_no_scheduler_runs_is_applied_by_the_next_one(
        logs: RunLogs, monkeypatch: pytest.MonkeyPatch) -> None:
    """The worker records the decision; the scheduler that would apply it is down (killed during the backoff
    delay). The durable log is all a restarted scheduler needs: it applies the decision once, and a further
    restart does not apply it again."""
    import time

    record(logs, event("c.0", at=time.time() - 5), time.time() - 5)
    api = FakeApi()
    restarted_scheduler(logs, api, monkeypatch).tick()
    assert api.cleared == [["c.0", "d.0"]]
    assert statuses(logs.read(DAG, RUN)) == ["applied"]
    restarted_scheduler(logs, api, monkeypatch).tick()
    assert api.cleared == [["c.0", "d.0"]], "applied twice"


def test_decision_claimed_by_a_scheduler_killed_mid_apply_is_retried_after_the_stuck_timeout(
        logs: RunLogs, monkeypatch: pytest.MonkeyPatch) -> None:
    """A scheduler claimed the decision (``applying``) and died before its clear: a restarted scheduler leaves it
    alone while the claim is fresh (the first one may still be clearing) and applies it once it is stuck."""
    import time

    from airflow_region_failover.failover import handler as executor

    now = time.time()
    record(logs, event("c.0", at=now - 5), now - 5)
    logs.update(DAG, RUN, lambda d: executor.claim(d, now - 1, "killed-scheduler"))
    api = FakeApi()
    restarted_scheduler(logs, api, monkeypatch).tick()
    assert api.cleared == [] and statuses(logs.read(DAG, RUN)) == ["applying"]
    edit_decision(logs, 1, claimed_at=now - executor.STUCK_APPLYING_S - 1)
    restarted_scheduler(logs, api, monkeypatch).tick()
    assert api.cleared == [["c.0", "d.0"]]
    assert statuses(logs.read(DAG, RUN)) == ["applied"]


def test_clear_lost_to_the_scheduler_is_issued_again_for_the_cleared_try_only(
        logs: RunLogs, monkeypatch: pytest.MonkeyPatch) -> None:
    """CI, Airflow 3.3.2 + SQLite: the scheduler ended the run ``failed`` from states read before our clear
    committed, so c.0/d.0 stayed ``none`` and nothing ever ran. The watcher clears again exactly the tasks still
    at the try our clear left them; a task that started a new try since, or that we never cleared, is left alone.

        a -> b ==> c#0 ==> d#0        (c#0 failed; the decision restarts c.0 + d.0)
    """
    import time

    from airflow_region_failover.plugins import metadata_db as probes
    from airflow_region_failover.plugins.watcher import Watcher

    kick = Watcher._kick
    record(logs, event("c.0", at=time.time() - 5), time.time() - 5)
    api = FakeApi()
    watcher = restarted_scheduler(logs, api, monkeypatch)
    watcher.tick()
    assert api.cleared == [["c.0", "d.0"]]
    monkeypatch.setattr(Watcher, "_kick", kick)
    probe = {("rf_e2e_budget", "r1"): [("c.0", 1, "none"), ("d.0", 2, "none"), ("side.0", 0, "none")]}
    monkeypatch.setattr(probes, "not_restarted", lambda runs: probe)
    watcher.tick()
    assert api.cleared[1:] == [["c.0"]], "d.0 ran again since (try 2); side.0 was never cleared by us"
    probe.clear()
    watcher.tick()
    assert api.cleared[1:] == [["c.0"]]


class _Ti:
    dag_id, run_id, task_id = "rf_e2e_budget", "r1", "c.0"

    def __init__(self, try_number: int) -> None:
        self.try_number = try_number


def test_restart_delay_left_reads_the_durable_log_and_never_holds_a_task_on_error(logs: RunLogs) -> None:
    import time

    from airflow_region_failover.operators.step import restart_delay_left

    now = time.time()
    record(logs, event("c.0", at=now), now)
    edit_decision(logs, 1, apply_at=now + 30)
    apply_due(services(logs), DAG, RUN, "test", now=lambda: now + 1.5)
    config = FailoverConfig()  # restart-strategy none: a try facing an unreadable log waits 0 s
    assert 25 < restart_delay_left(_Ti(2), config, logs) <= 30  # type: ignore[arg-type]
    assert restart_delay_left(_Ti(3), config, logs) == 0.0  # type: ignore[arg-type]

    class Broken:
        def read(self, dag_id: str, run_id: str) -> Any:
            raise RuntimeError("S3 down")

    assert restart_delay_left(_Ti(2), config, Broken()) == 0.0  # type: ignore[arg-type]


@pytest.mark.parametrize("wait, outcome", [(0.0, "runs"), (0.2, "sleeps"), (30.0, "rescheduled")])
def test_step_operator_reschedules_a_restarted_task_to_its_restart_time(
        monkeypatch: pytest.MonkeyPatch, wait: float, outcome: str) -> None:
    """A long delay frees the worker slot (``up_for_reschedule`` until the restart time); a short one is slept."""
    import logging
    import time
    from datetime import datetime, timezone

    from airflow.sdk.exceptions import AirflowRescheduleException

    from airflow_region_failover.operators import step
    from airflow_region_failover.operators.step import RegionStepOperator

    monkeypatch.setattr(step, "delay_left", lambda read, config: wait)
    from types import SimpleNamespace

    op = SimpleNamespace(log=logging.getLogger("t"), task_id="c.0",
                         runtime=SimpleNamespace(spec=SimpleNamespace(config=FailoverConfig())))
    start = time.monotonic()
    try:
        read = TryLog("c.0", 2, LogState.READ, RunLog(DAG, RUN))
        RegionStepOperator._wait_for_restart_time(op, {"ti": _Ti(2)}, read)  # type: ignore[arg-type]
        got = "sleeps" if time.monotonic() - start >= wait > 0 else "runs"
    except AirflowRescheduleException as exc:
        got = "rescheduled"
        ahead = (exc.reschedule_date - datetime.now(timezone.utc)).total_seconds()
        assert 28 < ahead <= 30
    assert got == outcome


def test_at_work_lists_producers_still_running_but_never_the_failed_task() -> None:
    """The worker path sees its own failed task still ``running`` in the API: it must not count as at work. A task
    with no state yet (d.0: waiting for its upstream) will run: at work; a finished one (b.1) is not."""
    from airflow_region_failover.plugins.clearing import at_work

    class Api(FakeApi):
        def task_instances(self, dag_id: str, run_id: str) -> list[dict[str, Any]]:
            return [{"task_id": "c.0", "state": "running"}, {"task_id": "c.1", "state": "running"},
                    {"task_id": "b.0", "state": "queued"}, {"task_id": "b.1", "state": "success"},
                    {"task_id": "d.0", "state": None}, {"task_id": "other_task", "state": "running"}]

    found = at_work(services(RunLogs(MemoryObjects()), Api()), event("c.0"), DAG, RUN)  # type: ignore[arg-type]
    assert sorted(map(str, found)) == ["b#0", "c#1", "d#0"]

    class Down(FakeApi):
        def task_instances(self, dag_id: str, run_id: str) -> list[dict[str, Any]]:
            raise ConnectionError("api server down")

    assert at_work(services(RunLogs(MemoryObjects()), Down()), event("c.0"), DAG, RUN) == []  # type: ignore[arg-type]


def test_at_work_expands_a_chain_task_into_every_subtask_it_runs() -> None:
    """With the job, a chain task at work (a.b.0: a#0 then b#0) produces every partition of its members; an id
    that names no task of the job (the unchained ``b.1``) is not a producer of it."""
    from airflow_region_failover.plugins.clearing import at_work

    class Api(FakeApi):
        def task_instances(self, dag_id: str, run_id: str) -> list[dict[str, Any]]:
            return [{"task_id": "a.b.0", "state": "queued"}, {"task_id": "b.1", "state": "running"},
                    {"task_id": "c.1", "state": None}]

    found = at_work(services(RunLogs(MemoryObjects()), Api()), event("c.0"), DAG, RUN,  # type: ignore[arg-type]
                    budget_spec())
    assert sorted(map(str, found)) == ["a#0", "b#0", "c#1"]

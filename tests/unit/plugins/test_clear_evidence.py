"""Whether a clear took effect, told per task from the states before it (plugins/clearing.py, M1 and L4 of
issue 48): a task's try increased, or it went from a finished state to a waiting one; a task already waiting
before the clear is no evidence.

    a#0 -> b#0 ==+==> c#0 ==> d#0        rf_e2e_budget (fixed-delay, attempts 1): a.b.1 fails, so c.0/c.1 are
    a#1 -> b#1 ==+==> c#1 ==> d#1        upstream_failed and d.0/d.1 still none (two levels below the failure)
"""

from __future__ import annotations

from typing import Any

import pytest

from airflow_region_failover.decisions.storage import RunLogs
from airflow_region_failover.exceptions import RestError
from airflow_region_failover.failover.handler import STUCK_APPLYING_S
from airflow_region_failover.plugins.clearing import CLEAR_TRIES, apply_due, handle_failure
from tests.support.fakes import DAG, RUN, FakeApi, MemoryObjects, budget_spec, failure, services

RESTART = ["a.b.1", "c.0", "c.1", "d.0", "d.1"]


def failed_run() -> list[dict[str, Any]]:
    """The run's task instances once Airflow has reacted to a.b.1's failure."""
    return [{"task_id": "a.b.0", "try_number": 1, "state": "success"},
            {"task_id": "a.b.1", "try_number": 1, "state": "failed"},
            {"task_id": "c.0", "try_number": 0, "state": "upstream_failed"},
            {"task_id": "c.1", "try_number": 0, "state": "upstream_failed"},
            {"task_id": "d.0", "try_number": 0, "state": None},
            {"task_id": "d.1", "try_number": 0, "state": None}]


def cleared(instances: list[dict[str, Any]], tasks: list[str]) -> list[dict[str, Any]]:
    """``instances`` after a committed clear of ``tasks``: each back to no state, at the same try."""
    return [{**ti, "state": None} if ti["task_id"] in tasks else ti for ti in instances]


class Answering500Api(FakeApi):
    """Answers every clear HTTP 500 (the standalone API server gave up on SQLite's lock); the clears numbered in
    ``effective`` committed all the same."""

    def __init__(self, effective: tuple[int, ...] = ()) -> None:
        super().__init__(failed_run())
        self.effective, self.sent = effective, 0

    def clear(self, dag_id: str, run_id: str, task_ids: list[str]) -> list[dict[str, Any]]:
        self.sent += 1
        self.cleared.append(list(task_ids))
        if self.sent in self.effective:
            self.instances = cleared(self.instances, task_ids)
        raise RestError(f"POST /api/v2/dags/{dag_id}/clearTaskInstances -> HTTP 500: Database error", 500)


class SchedulerKilled(BaseException):
    """The applying scheduler's process died (SIGKILL, OOM) right after sending its clear."""


class DyingApi(FakeApi):
    """The clear reaches the API (committed if ``commits``), then the process that sent it dies."""

    def __init__(self, commits: bool) -> None:
        super().__init__(failed_run())
        self.commits = commits

    def clear(self, dag_id: str, run_id: str, task_ids: list[str]) -> list[dict[str, Any]]:
        self.cleared.append(list(task_ids))
        if self.commits:
            self.instances = cleared(self.instances, task_ids)
        raise SchedulerKilled


def recorded(logs: RunLogs) -> None:
    handle_failure(DAG, RUN, failure("a.b.1"), budget_spec(), services(logs, FakeApi(failed_run())),
                   now=lambda: 100.0)
    assert sorted(logs.read(DAG, RUN).decisions[0].restart) == RESTART


def test_a_5xx_that_cleared_nothing_is_not_applied_though_consumers_below_were_already_waiting() -> None:
    """d.0/d.1 were ``none`` before the clear and still are: no evidence. Nothing cleared: sent CLEAR_TRIES times,
    the decision stays ``applying`` (claimed again once stuck) — before the fix it was marked ``applied`` after one
    send, the failed task stayed ``failed`` and the run ended ``failed``."""
    logs = RunLogs(MemoryObjects())  # type: ignore[arg-type]
    recorded(logs)
    api = Answering500Api()
    with pytest.raises(RestError):
        apply_due(services(logs, api), DAG, RUN, "test", now=lambda: 101.0)
    assert [d.status.value for d in logs.read(DAG, RUN).decisions] == ["applying"]
    assert api.sent == CLEAR_TRIES


def test_a_5xx_clear_is_sent_again_and_applied_when_the_resend_takes_effect() -> None:
    """The first clear answered 500 and cleared nothing; the second answered 500 too but committed: a.b.1 and
    c.0/c.1 went from finished to waiting. Applied after two sends, with the tries the clear stopped."""
    logs = RunLogs(MemoryObjects())  # type: ignore[arg-type]
    recorded(logs)
    api = Answering500Api(effective=(2,))
    applied = apply_due(services(logs, api), DAG, RUN, "test", now=lambda: 101.0)
    assert applied is not None and applied.status.value == "applied"
    assert api.sent == 2
    assert logs.read(DAG, RUN).cleared_tries["a.b.1"] == 1


def reclaimed_after_a_dying_applier(commits: bool) -> tuple[RunLogs, FakeApi, Any]:
    """The recorded decision claimed by a scheduler that dies in its clear (which ``commits`` or not), then re-claimed
    by a watcher once stuck: the logs, the watcher's API and what its :func:`apply_due` returned."""
    logs = RunLogs(MemoryObjects())  # type: ignore[arg-type]
    recorded(logs)
    dying = DyingApi(commits=commits)
    with pytest.raises(SchedulerKilled):
        apply_due(services(logs, dying), DAG, RUN, "killed-scheduler", now=lambda: 101.0)
    later = FakeApi(dying.instances)
    return logs, later, apply_due(services(logs, later), DAG, RUN, "test", now=lambda: 102.0 + STUCK_APPLYING_S)


def test_a_decision_reclaimed_after_its_applier_died_is_not_cleared_again_when_the_first_clear_took_effect() -> None:
    """A scheduler claimed the decision, sent the clear (it committed: the restarted tries may be running) and died
    before marking it applied. The watcher that re-claims it once stuck asks the evidence question against the
    states the first applier recorded when it claimed: it marks it applied without clearing again (before the
    fix it cleared again, killing the tries the first clear started)."""
    logs, later, applied = reclaimed_after_a_dying_applier(commits=True)
    assert later.cleared == [], "cleared again"
    assert applied is not None and applied.status.value == "applied"
    assert logs.read(DAG, RUN).cleared_tries["a.b.1"] == 1


def test_a_decision_reclaimed_after_its_applier_died_before_the_clear_committed_is_cleared() -> None:
    """The first applier died before its clear committed: no task shows evidence, so the re-claim clears."""
    _, later, applied = reclaimed_after_a_dying_applier(commits=False)
    assert [sorted(c) for c in later.cleared] == [RESTART]
    assert applied is not None and applied.status.value == "applied"

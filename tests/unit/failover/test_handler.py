"""The pure failure handler and its typed run log (failover/handler.py, failover/run_log.py).

    a#0 -> b#0 ==+==> c#0 ==> d#0        rf_e2e_budget: fixed-delay attempts 1, delay 0 s
    a#1 -> b#1 ==+==> c#1 ==> d#1        c#0 fails -> restart c#0 (failed) + d#0 (consumer)
"""

from __future__ import annotations

import json

import pytest

from airflow_region_failover.failover.availability import KnownAvailability
from airflow_region_failover.failover.handler import (
    FailureHandler,
    Outcome,
    claim,
    claim_reclear,
    close,
    mark_applied,
    restart_wait,
    restarted_by,
)
from airflow_region_failover.failover.run_log import DecisionStatus, FailureRecord, RunLog
from airflow_region_failover.graph.ids import SubtaskId
from airflow_region_failover.naming import task_id_of
from tests.support.fakes import DAG, RUN, budget_spec


def handler() -> FailureHandler:
    return FailureHandler(budget_spec().config, task_id_of)


def fail(log: RunLog, task: str, try_number: int, now: float,
         clear_number: int | None = None) -> tuple[RunLog, Outcome]:
    spec = budget_spec()
    failure = FailureRecord(task, -1, try_number, "boom", "worker", now, clear_number=clear_number)
    plan = spec.plan(SubtaskId.parse(task.replace(".", "#")), KnownAvailability())
    log, result = handler().handle(log, failure, plan, (), now)
    return log, result.outcome


def applied(log: RunLog, now: float, clear_number: int | None) -> RunLog:
    log, decision = claim(log, now, "w1")
    assert decision is not None
    return mark_applied(log, decision.id, {t: 1 for t in decision.restart}, clear_number, now)


def test_a_person_re_running_the_run_starts_a_fresh_budget() -> None:
    """attempts=1: the first failure restarts, the second exhausts. The user clears the whole run (Airflow's
    clear count goes from 1, ours, to 2): the next failure is a new epoch with a fresh budget."""
    log = RunLog(DAG, RUN)
    log, first = fail(log, "c.0", 1, 100.0, clear_number=0)
    log = applied(log, 101.0, clear_number=1)
    log, second = fail(log, "c.0", 2, 110.0, clear_number=1)
    assert (first, second) == (Outcome.CREATED, Outcome.EXHAUSTED)
    log, third = fail(log, "c.0", 3, 200.0, clear_number=2)
    assert third is Outcome.CREATED and log.epoch == 1
    assert [d.epoch for d in log.decisions] == [0, 0, 1]


def test_our_own_clears_do_not_start_an_epoch() -> None:
    log = RunLog(DAG, RUN)
    log, _ = fail(log, "c.0", 1, 100.0, clear_number=0)
    log = applied(log, 101.0, clear_number=1)
    log, again = fail(log, "c.0", 2, 110.0, clear_number=1)
    assert again is Outcome.EXHAUSTED and log.epoch == 0


def restarted_as(log: RunLog, task_id: str, try_number: int) -> str | None:
    decision = restarted_by(log, task_id, try_number)
    return None if decision is None else decision.reasons.get(task_id)


def test_why_our_clear_started_a_try() -> None:
    log, _ = fail(RunLog(DAG, RUN), "c.0", 1, 100.0)
    log = applied(log, 101.0, clear_number=1)
    assert restarted_as(log, "d.0", 2) == "consumer"
    assert restarted_as(log, "c.0", 2) == "failed"
    assert restarted_as(log, "d.0", 3) is None, "a later try (a person's clear, Airflow's retry) is not ours"
    assert restarted_as(log, "a.0", 2) is None
    assert restart_wait(log, "c.0", 2, 101.0) == 0.0


def test_a_re_clear_is_claimed_once_per_try() -> None:
    log, _ = fail(RunLog(DAG, RUN), "c.0", 1, 100.0)
    log = applied(log, 101.0, clear_number=1)
    log, first = claim_reclear(log, [("c.0", 1), ("d.0", 5)], 102.0, "w1")
    log, second = claim_reclear(log, [("c.0", 1)], 102.5, "w2")
    assert (first, second) == (["c.0"], [])
    _, stuck = claim_reclear(log, [("c.0", 1)], 102.0 + 61, "w2")
    assert stuck == ["c.0"], "a claim whose watcher died is taken over"


@pytest.mark.parametrize("status", [DecisionStatus.ABANDONED, DecisionStatus.CANCELLED])
def test_a_closed_decision_is_no_longer_open(status: DecisionStatus) -> None:
    log, _ = fail(RunLog(DAG, RUN), "c.0", 1, 100.0)
    closed = close(log, 1, status, "because")
    assert closed.open_decision is None and closed.decision(1).reason == "because"
    with pytest.raises(ValueError, match="abandoned or cancelled"):
        close(log, 1, DecisionStatus.APPLIED, "no")


def test_the_log_round_trips_through_json_and_reads_format_1() -> None:
    log, _ = fail(RunLog(DAG, RUN), "c.0", 1, 100.0)
    log = applied(log, 101.0, clear_number=1)
    assert RunLog.from_json(json.loads(json.dumps(log.to_json()))) == log
    old = {"format": 1, "dag_id": DAG, "run_id": RUN, "events": {"c.0:-1:1": {"decision": 1, "at": 1.0}},
           "decisions": [{"id": 1, "status": "applied", "created": 1.0, "apply_at": 1.0, "restart": ["c.0"],
                          "failures": [{"task_id": "c.0", "try_number": 1, "at": 1.0}], "regions": []}],
           "strategy_state": None, "budget_state": None, "cleared_tries": {"c.0": 1}}
    parsed = RunLog.from_json(old)
    assert parsed.epoch == 0 and parsed.decisions[0].status is DecisionStatus.APPLIED
    with pytest.raises(ValueError, match="format 9"):
        RunLog.from_json({**old, "format": 9})

"""The evidence that a clear took effect, task by task (failover/clear_evidence.py).

    c#0 ==> d#0 ==> e#0        c.0 failed, d.0 upstream_failed, e.0 still without a state (two levels below)
"""

from __future__ import annotations

from airflow_region_failover.failover.clear_evidence import evidence
from airflow_region_failover.failover.run_log import TaskSnapshot

BEFORE = {"c.0": TaskSnapshot("failed", 1), "d.0": TaskSnapshot("upstream_failed", 0), "e.0": TaskSnapshot(None, 0)}


def test_a_task_already_waiting_before_the_clear_is_no_evidence() -> None:
    assert evidence(BEFORE, dict(BEFORE)) == ()
    assert evidence(BEFORE, {**BEFORE, "e.0": TaskSnapshot("scheduled", 0)}) == ()


def test_a_finished_task_back_to_waiting_or_at_a_later_try_is_evidence() -> None:
    assert evidence(BEFORE, {**BEFORE, "c.0": TaskSnapshot(None, 1)}) == ("c.0",)
    assert evidence(BEFORE, {**BEFORE, "d.0": TaskSnapshot("queued", 0)}) == ("d.0",)
    assert evidence(BEFORE, {**BEFORE, "c.0": TaskSnapshot("running", 2), "e.0": TaskSnapshot("success", 1)}) == (
        "c.0", "e.0")


def test_a_running_task_set_restarting_is_evidence_and_a_missing_task_is_not() -> None:
    assert evidence({"c.0": TaskSnapshot("running", 1)}, {"c.0": TaskSnapshot("restarting", 1)}) == ("c.0",)
    assert evidence(BEFORE, {}) == ()


def test_the_json_form_reads_airflow_s_none_state_as_no_state() -> None:
    assert TaskSnapshot.from_json({"state": "none", "try_number": None}) == TaskSnapshot(None, 0)
    snap = TaskSnapshot("failed", 3)
    assert TaskSnapshot.from_json(snap.to_json()) == snap


def test_the_first_claim_records_the_restart_set_s_states_and_a_re_claim_keeps_them() -> None:
    """What a re-claimed decision (its claimer died mid-apply) asks: the states the first claimer's clear started
    from, kept in the decision and its JSON form; the states of tasks outside the restart set are not kept."""
    from dataclasses import replace

    from airflow_region_failover.failover.handler import STUCK_APPLYING_S, claim
    from airflow_region_failover.failover.run_log import Decision, DecisionStatus, RunLog

    pending = Decision(1, DecisionStatus.PENDING, 100.0, (), restart=("c.0", "d.0"), apply_at=100.0)
    log = RunLog("dag", "run", decisions=(pending,))
    log, first = claim(log, 102.0, "one", {**BEFORE, "x.0": TaskSnapshot("success", 1)})
    assert first is not None and dict(first.before) == {"c.0": BEFORE["c.0"], "d.0": BEFORE["d.0"]}
    assert first.claims == 1
    later = {"c.0": TaskSnapshot(None, 1), "d.0": TaskSnapshot(None, 0)}
    log, again = claim(log, 103.0 + STUCK_APPLYING_S, "two", later)
    assert again is not None and again.before == first.before and again.claims == 2
    assert Decision.from_json(again.to_json()) == again
    assert Decision.from_json({k: v for k, v in again.to_json().items() if k not in ("before", "claims")}) == replace(
        again, before={}, claims=0)

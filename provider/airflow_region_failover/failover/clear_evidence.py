"""Whether a clear took effect, told from the task instances before and after it.

Rule (issue 48, M1): a clear whose answer was lost or was a 5xx counts as done only by evidence per task of the
restart set — its try number increased, or it went from a finished state (``success``, ``failed``,
``upstream_failed``, ``skipped``, ``removed``) to a waiting one (no state, ``scheduled``, ``queued``), or to
``restarting`` (which only a clear gives a running task). A task that was already waiting before the clear is no
evidence: consumers two levels below a failure are routinely still without a state. A clear is one transaction,
so one task's evidence shows that the whole restart set was cleared.
"""

from __future__ import annotations

from collections.abc import Mapping

from airflow_region_failover.failover.run_log import TaskSnapshot

FINISHED_STATES = frozenset({"success", "failed", "upstream_failed", "skipped", "removed"})
"""Airflow's finished task-instance states: only a clear takes a task from one of them back to waiting."""
WAITING_STATES = frozenset({None, "scheduled", "queued"})
"""Task-instance states of a task that waits to run (``None``: no state yet)."""


def evidence(before: Mapping[str, TaskSnapshot], after: Mapping[str, TaskSnapshot]) -> tuple[str, ...]:
    """The tasks of ``before`` whose state in ``after`` shows that a clear sent in between took effect (module
    rule), sorted; empty when none does (a task missing from ``after`` is no evidence)."""
    return tuple(sorted(task for task, was in before.items()
                        if (now := after.get(task)) is not None and _cleared(was, now)))


def _cleared(was: TaskSnapshot, now: TaskSnapshot) -> bool:
    if now.try_number > was.try_number:
        return True
    if now.state == "restarting":
        return was.state != "restarting"
    return was.state in FINISHED_STATES and now.state in WAITING_STATES

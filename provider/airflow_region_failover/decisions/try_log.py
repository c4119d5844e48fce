"""What one try of a step task knows of its run's decision log: read once, before anything runs, and passed down.

Rule: the step operator reads the log once per try (:func:`read_try_log`) and hands the one typed answer to the
restart wait (:meth:`TryLog.wait`) and to the reuse rule (:meth:`TryLog.restart`); nothing reads it a second time.
The answer is one of three, never confused:

* ``first-try``: try 1 — no clear of ours can have started it, so nothing is read: it does not wait and keeps
  nothing;
* ``read``: the log as stored — the wait and the decision whose clear started this try come from it
  (:func:`~airflow_region_failover.failover.handler.restart_wait`, :func:`~.handler.restarted_by`);
* ``unreadable``: the log could not be read (S3 down, a body that does not parse). The safe choice: the try
  **waits** the job's restart strategy's first backoff (:func:`~.handler.unknown_restart_wait`: the least any
  decision of this job makes a restarted try wait, so a restart is never started early), and **keeps nothing**
  (its outputs are recomputed: no decision proves that a consumer restart started it).
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass
from enum import Enum
from typing import Any

from airflow_region_failover.decisions.storage import RunLogs, default_run_logs
from airflow_region_failover.failover.handler import restart_wait, restarted_by, unknown_restart_wait
from airflow_region_failover.failover.options import FailoverConfig
from airflow_region_failover.failover.run_log import Decision, RunLog

log = logging.getLogger(__name__)


class LogState(str, Enum):
    """What a try learnt of its run's decision log (module rule)."""

    FIRST_TRY = "first-try"
    READ = "read"
    UNREADABLE = "unreadable"


@dataclass(frozen=True)
class TryLog:
    """The decision log as try ``try_number`` of task ``task_id`` read it: ``state``, the ``log`` when ``read``,
    the ``error`` when ``unreadable``."""

    task_id: str
    try_number: int
    state: LogState
    log: RunLog | None = None
    error: str = ""

    def __post_init__(self) -> None:
        if (self.log is not None) != (self.state is LogState.READ):
            raise ValueError(f"a decision log in state {self.state.value!r} "
                             f"{'needs its log' if self.log is None else 'carries no log'}; give the log exactly when "
                             "it was read")

    def restart(self) -> Decision | None:
        """The applied decision whose clear started this try, or ``None`` (a first try, another cause, or an
        unreadable log: then nothing is kept)."""
        if self.log is None:
            return None
        return restarted_by(self.log, self.task_id, self.try_number)

    def wait(self, config: FailoverConfig, now: float) -> float:
        """Seconds this try must still wait before it runs (module rule; unbounded: the caller caps it)."""
        if self.state is LogState.FIRST_TRY:
            return 0.0
        if self.log is None:
            return unknown_restart_wait(config)
        return restart_wait(self.log, self.task_id, self.try_number, now)

    def to_json(self) -> dict[str, Any]:
        """JSON form."""
        body: dict[str, Any] = {"task_id": self.task_id, "try_number": self.try_number, "state": self.state.value}
        if self.log is not None:
            body["log"] = self.log.to_json()
        if self.error:
            body["error"] = self.error
        return body

    @classmethod
    def from_json(cls, body: Mapping[str, Any]) -> TryLog:
        """Parse the JSON form."""
        doc = body.get("log")
        return cls(str(body["task_id"]), int(body["try_number"]), LogState(body["state"]),
                   RunLog.from_json(doc) if doc is not None else None, str(body.get("error", "")))


def read_try_log(ti: Any, logs: RunLogs | None = None) -> TryLog:
    """The decision log as this try of ``ti`` sees it (module rule): not read on a first try; an error reading it
    is logged and answered ``unreadable``."""
    task_id, try_number = str(ti.task_id), int(getattr(ti, "try_number", 1) or 1)
    if try_number <= 1:
        return TryLog(task_id, try_number, LogState.FIRST_TRY)
    try:
        doc = (logs or default_run_logs()).read(ti.dag_id, ti.run_id)
    except Exception as exc:
        log.warning("region failover: could not read the decision log of %s/%s (%s); try %d of %s waits the "
                    "restart strategy's first backoff and recomputes its outputs", ti.dag_id, ti.run_id, exc,
                    try_number, task_id, exc_info=True)
        return TryLog(task_id, try_number, LogState.UNREADABLE, error=f"{type(exc).__name__}: {exc}"[:500])
    return TryLog(task_id, try_number, LogState.READ, doc)

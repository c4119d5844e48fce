"""The failover listener: Airflow's task-instance hooks, in the worker and in the scheduler.

Rules:
- **Never raise, never block the scheduler.** Every hook catches and logs. In the scheduler the hook only queues
  the failure; the watcher thread (:mod:`.watcher`) does the S3 and REST work.
- **Worker path** (ordinary failure; measured on Airflow 3.3.2: ``on_task_instance_failed`` runs in the task
  process while the task instance is still ``running`` in the DB — the supervisor reports FAILED only after the
  process exits): plan and record the decision (durable, merged, counted; :func:`.clearing.handle_failure`). It
  does not clear: clearing a ``running`` instance makes it ``restarting`` and Airflow then parks it in
  ``up_for_retry`` for ``retry_delay``. The watcher clears it after a short merge window.
- **Scheduler path**: ``on_starting`` starts the watcher in the scheduler process only; in a scheduler that runs
  a LocalExecutor it first preloads step tasks' imports (:mod:`.preload`), before the executor forks
  its workers.
- Step tasks' failures are recorded, and a failure of any other task of a job that names a partition it could
  not read (a publishing task: :class:`~airflow_region_failover.publication.operator.SinkUnavailable`); the
  failure handler decides what it restarts (:func:`.clearing.failed_subtask`).
- A task in ``up_for_retry`` is Airflow's own retry and is left alone; only terminal failures are recorded. (The
  Task SDK hands the hook an enum whose ``str`` is ``TaskInstanceState.UP_FOR_RETRY``: states are compared by
  value.)
- **What a failure records**: the exception text, masked with Airflow's secrets masker (a password a driver
  echoed never reaches the log, the note or the view); the partition it names as unreadable
  (:class:`~airflow_region_failover.exceptions.InputUnavailable`); the run's clear count when the try
  started (a person's clear starts a new epoch of the budget); the exception's class names and message signature
  (:class:`~airflow_region_failover.failover.error_class.ErrorClass`, of the masked text); and, in the worker,
  what the try computed from (the step operator's ``try_inputs``: its inputs' checksums and code fingerprint).
  The scheduler path has no exception object and no operator run: neither, so its failures are never evidence.
"""

from __future__ import annotations

import logging
import threading
import time
from typing import Any

from airflow.listeners import hookimpl

from airflow_region_failover.exceptions import InputUnavailable
from airflow_region_failover.failover.error_class import ErrorClass, TryInputs
from airflow_region_failover.failover.run_log import FailureRecord
from airflow_region_failover.job import JobSpec, job_of
from airflow_region_failover.naming import FAILED_SUBTASK, subtask_of
from airflow_region_failover.plugins.clearing import handle_failure
from airflow_region_failover.plugins.history import masked
from airflow_region_failover.plugins.preload import forks_local_tasks, preload
from airflow_region_failover.plugins.watcher import Watcher

log = logging.getLogger(__name__)


def failure_event(ti: Any, error: object, path: str) -> FailureRecord:
    """The failure of task instance ``ti`` (worker's ``RuntimeTaskInstance`` or scheduler's ORM row)."""
    map_index = getattr(ti, "map_index", None)
    cause = error.partition if isinstance(error, InputUnavailable) else None
    text = masked(str(error or ""))
    return FailureRecord(task_id=ti.task_id, map_index=int(map_index) if map_index is not None else -1,
                         try_number=int(ti.try_number or 0), error=text[:500], path=path,
                         at=time.time(), cause=str(cause) if cause is not None else None,
                         clear_number=_clear_number(ti),
                         error_class=ErrorClass.of(error, text) if isinstance(error, BaseException) else None,
                         inputs=_try_inputs(ti), subtask=_failed_member(error))


def _failed_member(error: object) -> str | None:
    """The member a fused region's task names as the one that raised (:data:`~..naming.FAILED_SUBTASK`)."""
    member = getattr(error, FAILED_SUBTASK, None)
    return member if isinstance(member, str) else None


def _try_inputs(ti: Any) -> TryInputs | None:
    """What the failed try computed from, as its step operator kept it (``None``: not a step task of this
    process, or the try failed before it looked its inputs up)."""
    found = getattr(getattr(ti, "task", None), "try_inputs", None)
    return found if isinstance(found, TryInputs) else None


def _clear_number(ti: Any) -> int | None:
    """The run's clear count when this try started (the worker's task context knows it), or ``None``."""
    context = getattr(ti, "_ti_context_from_server", None)
    number = getattr(getattr(context, "dag_run", None), "clear_number", None)
    return int(number) if isinstance(number, int) else None


def _state(ti: Any) -> str:
    state = getattr(ti, "state", None)
    return str(getattr(state, "value", state))


def _spec_of_task(ti: Any) -> JobSpec | None:
    task = getattr(ti, "task", None)
    dag = getattr(task, "dag", None) if task is not None else None
    return job_of(dag) if dag is not None else None


class FailoverListener:
    """Listener object registered by the plugin (one per process)."""

    def __init__(self) -> None:
        self.watcher: Watcher | None = None

    @hookimpl  # type: ignore[untyped-decorator]
    def on_task_instance_failed(self, previous_state: Any, task_instance: Any, error: Any) -> None:
        """Record a restart for a terminally failed step task; never raises."""
        try:
            self._on_failed(task_instance, error)
        except Exception:
            log.exception("region failover: listener failed (the failure is left to the watcher)")

    def _on_failed(self, ti: Any, error: Any) -> None:
        names_partition = getattr(error, "partition", None) is not None  # e.g. a publishing task's unreadable sink
        if (subtask_of(ti.task_id) is None and not names_partition) or _state(ti) == "up_for_retry":
            return
        in_worker = type(ti).__name__ == "RuntimeTaskInstance"
        if not in_worker:
            if self.watcher is not None:  # scheduler: hand over, never block the scheduling loop
                self.watcher.submit(ti.dag_id, ti.run_id, failure_event(ti, error, "scheduler"))
            return
        spec = _spec_of_task(ti)
        if spec is not None:
            handle_failure(ti.dag_id, ti.run_id, failure_event(ti, error, "worker"), spec)

    @hookimpl  # type: ignore[untyped-decorator]
    def on_starting(self, component: Any) -> None:
        """Start the watcher in the scheduler process; never raises.

        The hook fires in ``Job.__init__``, before the runner sets ``job_type``: a short-lived thread waits for it
        and starts the watcher only for ``SchedulerJob`` (not the dag-processor or triggerer).
        """
        try:
            if type(component).__name__ == "Job" and self.watcher is None:
                if forks_local_tasks():
                    preload()  # here, before the executor starts: the forks inherit (a thread could race them)
                threading.Thread(target=self._start_if_scheduler, args=(component,), daemon=True,
                                 name="region-failover-watcher-start").start()
        except Exception:
            log.exception("region failover: could not start the watcher")

    def _start_if_scheduler(self, job: Any, timeout: float = 120.0) -> None:
        deadline = time.monotonic() + timeout
        while getattr(job, "job_type", None) is None and time.monotonic() < deadline:
            time.sleep(0.2)
        if getattr(job, "job_type", None) == "SchedulerJob" and self.watcher is None:
            self.watcher = Watcher()
            self.watcher.start()

    @hookimpl  # type: ignore[untyped-decorator]
    def before_stopping(self, component: Any) -> None:
        """Stop the watcher thread; never raises."""
        try:
            if self.watcher is not None and getattr(component, "job_type", None) == "SchedulerJob":
                self.watcher.stop()
                self.watcher = None
        except Exception:
            log.exception("region failover: could not stop the watcher")

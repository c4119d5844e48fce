"""Who performs a restart: record one failure as a decision, and apply a due decision by clearing its tasks.

Rules (Flink's ``DefaultScheduler#handleTaskFailure`` on Airflow):
- **Record** (:func:`handle_failure`, worker or scheduler): the core plans the restart set with the store's
  availability checker extended by Flink's partition-tracker rule (a partition whose producer task is still at
  work counts as available, :func:`at_work`), and the pure failure handler records it in the run's decision log
  by compare-and-swap (:mod:`~airflow_region_failover.store.runlog`).
- **Apply** (:func:`apply_due`, the scheduler's watcher): claim the due decision (``pending -> applying``, CAS:
  exactly one process clears), clear exactly its task instances in the same run through the public REST API
  (``only_failed: false, reset_dag_runs: true``), mark it ``applied`` with the tries it cleared, then publish the
  metrics and the run note. A failed clear leaves it ``applying``; the watcher retries it once it is stuck.
Why REST and not the ORM: the worker, where an ordinary failure is seen, has no metadata-DB access in Airflow 3;
the public API is versioned, authorised and audited, and the same code runs in worker and scheduler.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from airflow_region_failover.failover.availability import BeingProduced
from airflow_region_failover.failover.handler import (
    FailureEvent,
    Outcome,
    claim,
    mark_applied,
    record_failure,
    reused_partitions,
)
from airflow_region_failover.graph.ids import SubtaskId
from airflow_region_failover.job import JobSpec
from airflow_region_failover.naming import subtask_of, task_id_of
from airflow_region_failover.plugins import history
from airflow_region_failover.plugins.rest import AirflowRestClient, default_api
from airflow_region_failover.store.facade import ResultStore, default_store
from airflow_region_failover.store.runlog import RunLogs, default_run_logs

log = logging.getLogger(__name__)

#: Task-instance states of a producer still at work: its partitions will be written without any restart.
AT_WORK_STATES = frozenset({"scheduled", "queued", "running", "restarting", "up_for_retry", "up_for_reschedule",
                            "deferred"})


@dataclass(frozen=True)
class Services:
    """What the failover loop talks to: the decision logs, the result store and the REST API (each built once
    per process by its ``default_*`` factory; tests pass their own)."""

    logs: Callable[[], RunLogs] = default_run_logs
    store: Callable[[], ResultStore] = default_store
    api: Callable[[], AirflowRestClient] = default_api


SERVICES = Services()


def at_work(services: Services, event: FailureEvent) -> list[SubtaskId]:
    """Step subtasks of the run whose task instance is at work (REST; the failed task itself excluded — in the
    worker path its row still says ``running``). On any error: none, so availability falls back to committed
    partitions only (a restart may then include more, never less)."""
    try:
        instances = services.api().task_instances(event.dag_id, event.run_id)
    except Exception:
        log.warning("region failover: could not list the task instances of %s/%s; treating no producer as at work",
                    event.dag_id, event.run_id, exc_info=True)
        return []
    found = (subtask_of(str(ti.get("task_id"))) for ti in instances
             if str(ti.get("state")) in AT_WORK_STATES and ti.get("task_id") != event.task_id)
    return [s for s in found if s is not None]


def handle_failure(event: FailureEvent, spec: JobSpec, services: Services = SERVICES,
                   now: Callable[[], float] = time.time) -> Outcome:
    """Plan and record the restart for one failure (the scheduler's watcher applies it when due)."""
    subtask = subtask_of(event.task_id)
    if subtask is None:
        return Outcome("ignored")
    checker = BeingProduced.of(services.store().checker(event.dag_id, event.run_id), spec.graph,
                               at_work(services, event))
    plan = spec.plan(subtask, checker)
    restart_ids = [task_id_of(s) for s in plan.restart]
    reused = reused_partitions(spec.graph, plan.restart)
    at = now()
    doc, outcome = services.logs().update(
        event.dag_id, event.run_id, lambda d: record_failure(d, event, spec.config, plan, restart_ids, reused, at))
    log.info("region failover: %s of %s/%s -> %s (decision %s)", event.task_id, event.dag_id, event.run_id,
             outcome.kind, outcome.decision_id)
    if outcome.kind == "exhausted":
        history.publish_note(services.api(), doc)
    return outcome


def apply_due(logs: RunLogs, api: Any, dag_id: str, run_id: str, who: str,
              now: Callable[[], float] = time.time) -> dict[str, Any] | None:
    """Claim the run's due decision (if any), clear its tasks, mark it applied; return it (or None)."""
    _, claimed = logs.update(dag_id, run_id, claim(now(), who))
    if claimed is None:
        return None
    cleared = api.clear(dag_id, run_id, claimed["restart"])
    doc, _ = logs.update(dag_id, run_id, mark_applied(claimed["id"], cleared, now()))
    applied: dict[str, Any] = dict(doc["decisions"][claimed["id"] - 1])
    history.emit_metrics(dag_id, applied)
    history.publish_note(api, doc)
    return applied

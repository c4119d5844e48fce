"""Who performs a restart: record one failure as a decision, and apply a due decision by clearing its tasks.

Rules (Flink's ``DefaultScheduler#handleTaskFailure`` on Airflow):
- **Record** (:func:`handle_failure`, worker or scheduler): the core plans the restart set with the store's
  *deep* availability checker (committed manifest and every data object present and intact — what the failed
  subtask read verified first, in one parallel batch: :mod:`~airflow_region_failover.store.availability`), the
  partition the failure names as unreadable, and Flink's partition-tracker rule (a partition whose producer task
  is still at work counts as available, :func:`at_work`); the pure failure handler records it in the run's
  decision log by compare-and-swap (:mod:`~airflow_region_failover.decisions.storage`), which also holds the run's
  results and marks the decision pending. A job rendered ``PER_RUN`` is planned as the run runs it
  (:func:`run_spec`: the graph of the run's plan, fixed for the run if no task fixed it yet). A publishing task
  that could not read a partition of its sink result is a consumer of it (:func:`failed_subtask`): its failure
  restarts that partition's producer, and the publishing task with it.
- **Apply** (:func:`apply_due`, a scheduler's watcher): claim the due decision (``pending -> applying``, CAS:
  exactly one process clears), clear exactly its task instances in the same run through the public REST API
  (``only_failed: false, reset_dag_runs: true``), mark it ``applied`` with the tries it cleared and the run's
  clear count, then publish the metrics and the run note. A clear the API refuses for good (4xx) abandons the
  decision with the reason; a clear whose answer was lost is verified against the tasks' states before it, never
  re-sent; one answered 5xx is sent again unless a task shows it took effect (its try increased, or it went from
  a finished state to a waiting one: :mod:`~airflow_region_failover.failover.clear_evidence`), judged against
  the states the first claim recorded in the decision. A decision claimed again after its claimer died mid-apply
  asks the same question first, and is marked applied without a second clear when the first took effect.
Why REST and not the ORM: the worker, where an ordinary failure is seen, has no metadata-DB access in Airflow 3;
the public API is versioned, authorised and audited, and the same code runs in worker and scheduler.
"""

from __future__ import annotations

import logging
import os
import socket
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from airflow_region_failover.decisions.plans import Plans
from airflow_region_failover.decisions.storage import RunLogs, default_run_logs
from airflow_region_failover.exceptions import ClearOutcomeUnknown, ConditionFailed, RestError, StoreUnreachable
from airflow_region_failover.failover.availability import BeingProduced
from airflow_region_failover.failover.clear_evidence import evidence
from airflow_region_failover.failover.handler import (
    FailureHandler,
    HandlingResult,
    Outcome,
    claim,
    close,
    mark_applied,
    reused_partitions,
)
from airflow_region_failover.failover.run_log import (
    Decision,
    DecisionStatus,
    FailureRecord,
    TaskSnapshot,
    snapshots_of,
    tries_of,
)
from airflow_region_failover.graph.ids import PartitionId, SubtaskId
from airflow_region_failover.job import JobSpec
from airflow_region_failover.naming import subtasks_of
from airflow_region_failover.plugins import history
from airflow_region_failover.plugins.rest import AirflowRestClient, default_api
from airflow_region_failover.store.availability import Mode, Read, reads_of
from airflow_region_failover.store.result_store import ResultStore, default_store
from airflow_region_failover.store.s3.objects import error_code

log = logging.getLogger(__name__)

#: Task-instance states of a producer still at work: its partitions will be written without any restart.
AT_WORK_STATES = frozenset({"scheduled", "queued", "running", "restarting", "up_for_retry", "up_for_reschedule",
                            "deferred"})


def _no_clear_number(dag_id: str, run_id: str) -> int | None:
    return None


@dataclass(frozen=True)
class Services:
    """What the failover loop talks to: the decision logs, the result store and the REST API (each built once
    per process by its ``default_*`` factory; tests pass their own), and — in the scheduler — how to read a run's
    clear count (the metadata DB)."""

    logs: Callable[[], RunLogs] = default_run_logs
    store: Callable[[], ResultStore] = default_store
    api: Callable[[], AirflowRestClient] = default_api
    clear_number: Callable[[str, str], int | None] = _no_clear_number


SERVICES = Services()
WHO = f"{socket.gethostname()}:{os.getpid()}"
"""This process, as it signs the decisions it claims."""


def handler_of(spec: JobSpec) -> FailureHandler:
    """The failure handler of a job (its options parsed once, its subtasks named as Airflow task ids: every
    subtask of a chain as the chain's task, so a restart clears that task once; a published sink's subtasks
    are followed by its publishing task, which restarts with them; each task's non-recoverable exception classes
    are its steps', :meth:`~airflow_region_failover.job.JobSpec.declared`)."""
    return FailureHandler(spec.config, spec.names.task_id, spec.followers, spec.declared)


def at_work(services: Services, failure: FailureRecord, dag_id: str, run_id: str,
            spec: JobSpec | None = None) -> list[SubtaskId]:
    """Step subtasks of the run whose task instance is at work (REST; the failed task itself excluded — in the
    worker path its row still says ``running``) or has no state yet (it waits for its upstream: it will run, as a
    Flink producer deployed later still produces its partition). On any error: none, so availability falls back
    to committed partitions only (a restart may then include more, never less)."""
    try:
        instances = services.api().task_instances(dag_id, run_id)
    except Exception:
        log.warning("region failover: could not list the task instances of %s/%s; treating no producer as at work",
                    dag_id, run_id, exc_info=True)
        return []
    names = spec.names.subtasks if spec is not None else subtasks_of  # a chain task: every subtask it runs
    found = (names(str(ti.get("task_id"))) for ti in instances
             if (ti.get("state") is None or str(ti.get("state")) in AT_WORK_STATES)
             and ti.get("task_id") != failure.task_id)
    return [s for chain in found if chain is not None for s in chain]


def failed_subtask(spec: JobSpec, failure: FailureRecord) -> SubtaskId | None:
    """The subtask whose region a failure restarts from: a step task's (a chain task's head, in the region of
    every member; a fused region's task: the member that raised, when it says so); for a publishing task whose
    failure names partition ``i`` of its sink result as unreadable, the sink's subtask ``i`` — the publishing task
    consumes it, and restarts with it (module rule); else ``None``."""
    members = spec.names.subtasks(failure.task_id)
    if members is not None and failure.subtask is not None and SubtaskId.parse(failure.subtask) in members:
        return SubtaskId.parse(failure.subtask)  # the member of a fused region's task that raised
    head = members[0] if members else None
    if head is not None or not failure.cause:
        return head
    publication = next((p for p in spec.publications if p.task_id == failure.task_id), None)
    if publication is None:
        return None
    cause = PartitionId.parse(failure.cause)  # a sink step's result is named after the step
    step = spec.graph.step(publication.step)
    return SubtaskId(step.id, cause.index) if cause.result == step.id and cause.index < step.parallelism else None


def task_reads(spec: JobSpec, task_id: str) -> tuple[Read, ...]:
    """Every BLOCKING partition step task ``task_id`` reads (each subtask it runs: a chain's head, every member of
    a fused region), with its key groups; ``()`` for a task that runs no subtask (a publishing task)."""
    return tuple(read for member in spec.names.subtasks(task_id) or () for read in reads_of(spec.graph, member))


def run_spec(spec: JobSpec, dag_id: str, run_id: str, services: Services = SERVICES) -> JobSpec:
    """``spec`` as run ``run_id`` runs it (:meth:`~airflow_region_failover.job.JobSpec.for_run`): for a job rendered
    ``PER_RUN``, under the run's plan, fixed now if none of its tasks fixed it yet
    (:meth:`~airflow_region_failover.decisions.plans.Plans.fix`); any other job as rendered."""
    if not spec.auto.per_run:
        return spec
    return spec.for_run(Plans(services.logs().objects).fix(dag_id, run_id).plan)


def handle_failure(dag_id: str, run_id: str, failure: FailureRecord, spec: JobSpec, services: Services = SERVICES,
                   now: Callable[[], float] = time.time) -> HandlingResult:
    """Plan and record the restart for one failure (a watcher applies it when due). Raises on S3 errors: the
    caller retries (the watcher handles the failure again on its next pass)."""
    spec = run_spec(spec, dag_id, run_id, services)
    subtask = failed_subtask(spec, failure)
    if subtask is None:
        return HandlingResult(Outcome.IGNORED)
    reads = task_reads(spec, failure.task_id)
    committed = services.store().checker(dag_id, run_id, Mode.DEEP, reads=reads)
    checker = BeingProduced.of(committed, spec.graph, at_work(services, failure, dag_id, run_id, spec))
    named = (PartitionId.parse(failure.cause),) if failure.cause else ()
    plan = spec.plan(subtask, checker, named)
    reused = reused_partitions(spec.graph, plan.restart)
    at, handler = now(), handler_of(spec)
    doc, result = services.logs().update(dag_id, run_id, lambda d: handler.handle(d, failure, plan, reused, at))
    log.info("region failover: %s of %s/%s -> %s (decision %s)", failure.task_id, dag_id, run_id,
             result.outcome.value, result.decision_id)
    if result.outcome.ends_run:
        history.publish_note(services.api(), doc)
        if result.decision_id is not None:
            history.emit_ended(dag_id, doc.decision(result.decision_id))
    return result


#: How often a clear answered 5xx is sent, when its tries show it did not clear (:func:`_clear`).
CLEAR_TRIES = 3
#: S3 error codes of a server that is busy or restarting: the same request may succeed later.
TRANSIENT_S3_CODES = frozenset({"SlowDown", "Throttling", "ThrottlingException", "RequestTimeout",
                                "RequestTimeTooSkewed", "ServiceUnavailable", "InternalError", "500", "503"})
#: Exception classes (by name, in any of the exception's bases) of a network or metadata-DB hiccup: botocore's
#: ``ConnectionError``/``HTTPClientError``, httpx's ``TransportError``, SQLAlchemy's ``OperationalError``.
TRANSIENT_CLASSES = frozenset({"ConnectionError", "HTTPClientError", "TransportError", "OperationalError",
                               "DisconnectionError", "TimeoutError"})


def transient(exc: BaseException) -> bool:
    """Whether handling a failure that raised ``exc`` may succeed if tried again unchanged: S3 or the REST API
    unreachable, throttled or failing on their side (5xx, 429), a lost compare-and-swap race, a network or
    metadata-DB error. Anything else (a job that no longer parses, a refused request, a bug) fails again."""
    if isinstance(exc, (StoreUnreachable, ConditionFailed, OSError)):
        return True
    if isinstance(exc, RestError):
        return exc.status is None or exc.status >= 500 or exc.status == 429
    return error_code(exc) in TRANSIENT_S3_CODES or any(k.__name__ in TRANSIENT_CLASSES for k in type(exc).__mro__)


def apply_due(services: Services, dag_id: str, run_id: str, who: str = WHO,
              now: Callable[[], float] = time.time) -> Decision | None:
    """Claim the run's due decision (if any), clear its tasks, mark it applied; return it (or None).

    The run's task instances are read before the claim, which records them in the decision as the states the clear
    starts from. A decision claimed again (its claimer died mid-apply) is first asked whether that claimer's clear
    took effect (:func:`~airflow_region_failover.failover.clear_evidence.evidence` against the recorded states):
    if so it is marked applied without clearing again, which would kill the tries the first clear started."""
    logs, api = services.logs(), services.api()
    current = snapshots_of(api.task_instances(dag_id, run_id))
    _, claimed = logs.update(dag_id, run_id, lambda d: claim(d, now(), who, current))
    if claimed is None:
        return None
    try:
        cleared = _cleared_before(dag_id, run_id, claimed, current) or _clear(api, dag_id, run_id, claimed.restart,
                                                                            claimed.before)
    except RestError as exc:
        if not _refused_for_good(exc):
            raise  # 5xx / unreachable: stays applying, claimed again once stuck
        reason = f"abandoned: the REST API refused the clear ({exc}); check [region_failover] api_conn_id's rights"
        doc, _ = logs.update(dag_id, run_id,
                             lambda d: (close(d, claimed.id, DecisionStatus.ABANDONED, reason), None))
        history.publish_note(api, doc)
        log.error("region failover: decision %d of %s/%s %s", claimed.id, dag_id, run_id, reason)
        return doc.decision(claimed.id)
    clear_number = services.clear_number(dag_id, run_id)
    doc, _ = logs.update(dag_id, run_id,
                         lambda d: (mark_applied(d, claimed.id, cleared, clear_number, now()), None))
    applied = doc.decision(claimed.id)
    history.emit_metrics(dag_id, applied)
    history.publish_note(api, doc)
    return applied


def _clear(api: Any, dag_id: str, run_id: str, tasks: Sequence[str],
           before: Mapping[str, TaskSnapshot]) -> Mapping[str, int]:
    """Clear ``tasks``, whose states before the clear are ``before``; returns ``task -> the try the clear
    stopped``. A clear whose answer was lost is never sent again (it may have cleared, and a second clear would
    kill the tries the first started): the tasks' states tell whether it took effect. A clear answered 5xx has
    ended: unless its tasks show it cleared, it is sent again, up to :data:`CLEAR_TRIES` (the standalone stack's API
    server answers 500 when its event loop gives up on SQLite's lock, ``standalone/sqlite.py``). Evidence is per
    task (:func:`~airflow_region_failover.failover.clear_evidence.evidence`): a task already waiting before the
    clear proves nothing."""
    sent = 0
    while True:
        sent += 1
        try:
            return tries_of(api.clear(dag_id, run_id, list(tasks)))
        except ClearOutcomeUnknown:
            if _took_effect(api, dag_id, run_id, before, "lost"):
                return _stopped(before)
            raise
        except RestError as exc:
            if exc.status is None or exc.status < 500:
                raise
            if _took_effect(api, dag_id, run_id, before, f"HTTP {exc.status}"):
                return _stopped(before)
            if sent == CLEAR_TRIES:
                raise
        time.sleep(0.2 * sent)


def _cleared_before(dag_id: str, run_id: str, claimed: Decision,
                    current: Mapping[str, TaskSnapshot]) -> dict[str, int] | None:
    """For a decision claimed again: the tries its earlier claimer's clear stopped, if the task instances
    ``current`` show that clear took effect; else (or on a first claim) ``None``."""
    if claimed.claims < 2:
        return None
    shown = evidence(claimed.before, current)
    if not shown:
        return None
    log.warning("region failover: decision %d of %s/%s was claimed again (claim %d); the earlier claimer's clear "
                "took effect (shown by %s): not cleared again", claimed.id, dag_id, run_id, claimed.claims,
                ", ".join(shown))
    return _stopped(claimed.before)


def _stopped(before: Mapping[str, TaskSnapshot]) -> dict[str, int]:
    return {t: s.try_number for t, s in before.items()}


def _took_effect(api: Any, dag_id: str, run_id: str, before: Mapping[str, TaskSnapshot], answer: str) -> bool:
    """Whether a clear of ``before``'s tasks, answered ``answer``, took effect: some task shows evidence
    (:func:`~airflow_region_failover.failover.clear_evidence.evidence`)."""
    shown = evidence(before, snapshots_of(api.task_instances(dag_id, run_id)))
    if shown:
        log.warning("region failover: the clear of %s/%s took effect though its answer was %s (shown by %s)",
                    dag_id, run_id, answer, ", ".join(shown))
    return bool(shown)


def _refused_for_good(exc: RestError) -> bool:
    """400/401/403/404/409/422: retrying the same clear will not change the answer."""
    return exc.status is not None and 400 <= exc.status < 500 and exc.status != 429

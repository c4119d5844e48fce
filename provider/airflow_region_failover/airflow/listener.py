"""The failover listener (worker and scheduler) and the scheduler-side watcher thread.

Rules:
- **Never raise, never block the scheduler.** Every hook catches and logs. In the scheduler the hook only queues
  the failure; the watcher thread does the S3 and REST work.
- **Worker path** (ordinary failure; measured on Airflow 3.3.2: ``on_task_instance_failed`` runs in the task
  process while the task instance is still ``running`` in the DB — the supervisor reports FAILED only after the
  process exits): plan and record the decision (durable, merged, counted). It does not clear: clearing a
  ``running`` instance makes it ``restarting`` and Airflow then parks it in ``up_for_retry`` for
  ``retry_delay`` (300 s by default).
- **Delay**: the watcher clears a decision after a short merge window, so the run stays ``running`` during the
  backoff delay; each restarted task asks :func:`restart_delay_left` when it starts and, if its restart time
  (stored in S3 with the decision) is still ahead, is rescheduled to it (``up_for_reschedule``): no worker slot
  is held while waiting, and the delay survives any scheduler or worker restart.
- **Scheduler path**: the watcher thread applies every pending decision once its failed tasks have left the running
  states (at most ``SETTLE_TIMEOUT_S`` later), clears again tasks a clear did not restart (stopped while
  running and parked in ``up_for_retry``, or left ``none`` when the scheduler ended the run concurrently), and
  catches failures no hook reported: measured, a SIGKILLed *task process* fires
  no hook anywhere (its supervisor reports FAILED), and a killed supervisor fires the hook in the scheduler only
  after ``task_instance_heartbeat_timeout``; so it polls the metadata DB every ``watch_interval`` s for failed
  step tasks. Pending decisions live in S3, so a restarted scheduler finds them (and looks back
  ``watch_lookback`` s for failures it missed while down).
- **Availability** for the planner (:func:`at_work`, :class:`BeingProduced`): a partition is available when it is
  committed *or* its producer task is still at work in the run (Flink tracks a partition from its producer's
  deployment), so a failure never restarts a sibling producer that is merely not finished yet.
- A task in ``up_for_retry`` is Airflow's own retry and is left alone; only terminal failures are recorded.
"""

from __future__ import annotations

import logging
import queue
import threading
import time
from dataclasses import dataclass, field
from typing import Any

from airflow.listeners import hookimpl

from airflow_region_failover import conf
from airflow_region_failover.airflow.decisions import open_decision
from airflow_region_failover.airflow.executor import (
    FailureEvent,
    Outcome,
    apply_due,
    clear_at,
    plan_for,
    publish_exhausted,
    record_failure,
    restart_wait,
)
from airflow_region_failover.airflow.render import JobSpec, job_of, subtask_of
from airflow_region_failover.failover.availability import BeingProduced
from airflow_region_failover.graph.ids import SubtaskId

log = logging.getLogger(__name__)
OPERATOR_NAMES = ("RegionStepOperator",)


def get_connection(conn_id: str) -> Any:
    """An Airflow connection in the worker (Task SDK) or the scheduler (secrets backends / metadata DB)."""
    try:
        from airflow.sdk import BaseHook

        return BaseHook.get_connection(conn_id)
    except Exception:
        from airflow.models.connection import Connection

        return Connection.get_connection_from_secrets(conn_id)


class Services:
    """Per-process clients (S3 decision logs, result store, REST API), built on first use and reused."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._logs: Any = None
        self._store: Any = None
        self._api: Any = None

    def logs(self) -> Any:
        """The run decision logs (same bucket and connection as the result store)."""
        with self._lock:
            if self._logs is None:
                from airflow_region_failover.airflow.decisions import s3_decision_logs

                self._logs = s3_decision_logs()
            return self._logs

    def store(self) -> Any:
        """The result store (availability of committed partitions)."""
        with self._lock:
            if self._store is None:
                from airflow_region_failover.store.facade import ResultStore

                self._store = ResultStore.from_airflow()
            return self._store

    def api(self) -> Any:
        """REST client with the credentials of connection ``[region_failover] api_conn_id``."""
        with self._lock:
            if self._api is None:
                from airflow_region_failover.airflow.rest import AirflowRestClient, ApiCredentials

                conn = get_connection(conf.value("api_conn_id", "region_failover_api"))
                self._api = AirflowRestClient(ApiCredentials.from_connection(conn))
            return self._api


SERVICES = Services()

#: A remaining restart delay shorter than this is slept off in place rather than rescheduled.
SLEEP_BELOW_S = 2.0


def restart_delay_left(ti: Any, services: Services = SERVICES) -> float:
    """Seconds this try of a restarted step task must still wait for its decision's restart time (rule: only the
    first try after our clear waits; bounded by ``[region_failover] max_start_delay``). 0 when the decision log
    cannot be read: an unreadable log never holds a task back."""
    try:
        doc = services.logs().read(ti.dag_id, ti.run_id)
        wait = restart_wait(doc, ti.task_id, int(ti.try_number or 0), time.time())
        return min(wait, conf.float_value("max_start_delay", 3600.0))
    except Exception:
        log.exception("region failover: could not check the restart delay (starting now)")
        return 0.0


#: Task-instance states of a producer still at work: its partitions will be written without any restart.
AT_WORK_STATES = frozenset({"scheduled", "queued", "running", "restarting", "up_for_retry", "up_for_reschedule",
                            "deferred"})


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


def handle_failure(event: FailureEvent, spec: JobSpec, services: Services = SERVICES) -> Outcome:
    """Plan and record the restart for one failure (the scheduler's watcher applies it when due)."""
    subtask = subtask_of(event.task_id)
    if subtask is None:
        return Outcome("ignored")
    checker = BeingProduced.of(services.store().checker(event.dag_id, event.run_id), spec.graph,
                               at_work(services, event))
    plan = plan_for(spec, subtask, checker)
    now = time.time()
    doc, outcome = services.logs().update(event.dag_id, event.run_id,
                                          lambda d: record_failure(d, event, spec, plan, now))
    log.info("region failover: %s of %s/%s -> %s (decision %s)", event.task_id, event.dag_id, event.run_id,
             outcome.kind, outcome.decision_id)
    if outcome.kind == "exhausted":
        publish_exhausted(services.api(), doc)
    return outcome if isinstance(outcome, Outcome) else Outcome("ignored")


def _event(ti: Any, error: object, path: str) -> FailureEvent:
    return FailureEvent(dag_id=ti.dag_id, run_id=ti.run_id, task_id=ti.task_id,
                        map_index=int(getattr(ti, "map_index", -1) if getattr(ti, "map_index", None) is not None
                                      else -1),
                        try_number=int(ti.try_number or 0), error=str(error or "")[:500], path=path,
                        at=time.time())


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
        """Record (and maybe apply) a restart for a terminally failed step task; never raises."""
        try:
            self._on_failed(task_instance, error)
        except Exception:
            log.exception("region failover: listener failed (the failure is left to the watcher)")

    def _on_failed(self, ti: Any, error: Any) -> None:
        if subtask_of(ti.task_id) is None or str(getattr(ti, "state", "")).endswith("up_for_retry"):
            return
        in_worker = type(ti).__name__ == "RuntimeTaskInstance"
        if not in_worker:
            if self.watcher is not None:  # scheduler: hand over, never block the scheduling loop
                self.watcher.submit(_event(ti, error, "scheduler"))
            return
        spec = _spec_of_task(ti)
        if spec is not None:
            handle_failure(_event(ti, error, "worker"), spec)

    @hookimpl  # type: ignore[untyped-decorator]
    def on_starting(self, component: Any) -> None:
        """Start the watcher in the scheduler process; never raises.

        The hook fires in ``Job.__init__``, before the runner sets ``job_type``: a short-lived thread waits for it
        and starts the watcher only for ``SchedulerJob`` (not the dag-processor or triggerer).
        """
        try:
            if type(component).__name__ == "Job" and self.watcher is None:
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


@dataclass
class Watcher:
    """Scheduler-side daemon thread: catches failures no hook reported and applies due pending decisions."""

    interval: float = field(default_factory=lambda: conf.float_value("watch_interval", 1.0))
    lookback: float = field(default_factory=lambda: conf.float_value("watch_lookback", 600.0))
    services: Services = field(default_factory=lambda: SERVICES)
    _queue: queue.Queue[FailureEvent] = field(default_factory=queue.Queue)
    _stop: threading.Event = field(default_factory=threading.Event)
    _seen: dict[str, float] = field(default_factory=dict)
    _specs: dict[str, tuple[int, JobSpec | None]] = field(default_factory=dict)
    _thread: threading.Thread | None = None

    def start(self) -> None:
        """Start the daemon thread."""
        self._since = time.time() - self.lookback
        self._thread = threading.Thread(target=self._run, name="region-failover-watcher", daemon=True)
        self._thread.start()
        log.info("region failover: watcher started (every %.1f s, looking back %.0f s)", self.interval,
                 self.lookback)

    def stop(self) -> None:
        """Ask the thread to finish and wait briefly."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5)

    def submit(self, event: FailureEvent) -> None:
        """Queue a failure reported by the scheduler's hook."""
        self._queue.put(event)

    def _run(self) -> None:
        while not self._stop.wait(self.interval):
            try:
                self.tick()
            except Exception:
                log.exception("region failover: watcher tick failed (will retry)")

    def tick(self) -> None:
        """One round: queued events, newly failed step tasks in the DB, due pending decisions."""
        events = []
        while not self._queue.empty():
            events.append(self._queue.get_nowait())
        events.extend(self._failed_in_db())
        for event in events:
            self._handle(event)
        for dag_id, run_id in list(self.services.logs().pending_runs()):
            try:
                self._apply(dag_id, run_id)
            except Exception:
                log.exception("region failover: could not apply the pending decision of %s/%s", dag_id, run_id)
        try:
            self._kick()
        except Exception:
            log.exception("region failover: could not requeue cleared tasks (will retry)")

    def _apply(self, dag_id: str, run_id: str) -> None:
        """Apply the run's due decision once its failed tasks have left the running states (see module doc)."""
        current = open_decision(self.services.logs().read(dag_id, run_id))
        if current is None or (current["status"] == "pending" and clear_at(current) > time.time()):
            return
        late = time.time() - clear_at(current) > SETTLE_TIMEOUT_S
        if not late and not self._settled(dag_id, run_id, [f["task_id"] for f in current["failures"]]):
            return
        apply_due(self.services.logs(), self.services.api(), dag_id, run_id, who="scheduler")

    def _settled(self, dag_id: str, run_id: str, failed: list[str]) -> bool:
        """Whether Airflow is done reacting to the failures: the failed tasks left the running states and their
        direct downstream tasks left ``none``/``scheduled`` (marked ``upstream_failed``).

        Measured on 3.3.2 with SQLite: a clear that lands while the scheduler marks downstream tasks
        ``upstream_failed`` gives those rows new ids under its feet and the scheduler loop dies with
        ``StaleDataError`` (the race of apache/airflow#63926); waiting for this quiet point avoids it.
        """
        if _states(dag_id, run_id, failed) & BUSY_STATES:
            return False
        from airflow.models.serialized_dag import SerializedDagModel

        dag = SerializedDagModel.get_dag(dag_id)
        downstream = sorted({d for t in failed if dag is not None and dag.has_task(t)
                             for d in dag.get_task(t).downstream_task_ids})
        return not downstream or not (_states(dag_id, run_id, downstream) & {"None", "none", "scheduled"})

    def _kick(self) -> None:
        """Clear again the tasks one of our clears did not restart (still at the try it cleared):

        - ``up_for_retry``: the clear stopped them while running, and Airflow parks them for ``retry_delay``;
        - ``none`` in a run that has ended: the scheduler decided the run's end from states it read before our
          clear committed, and its write won (a lost update; measured on 3.3.2 + SQLite in CI: run ``failed``,
          the cleared tasks ``none`` for good). A second clear of an ended run queues it again.
        A task the user marked since (skipped/failed/success) or that started a new try is never touched.
        """
        for (dag_id, run_id), tasks in _not_restarted(_utc(time.time() - max(self.lookback, 60.0))).items():
            doc = self.services.logs().read(dag_id, run_id)
            stopped = [t for t, n in tasks if doc["cleared_tries"].get(t) == n]
            if stopped:
                log.warning("region failover: clear %s of %s/%s again (not restarted by our clear)", stopped,
                            dag_id, run_id)
                self.services.api().clear(dag_id, run_id, stopped)

    def _handle(self, event: FailureEvent) -> None:
        key = f"{event.dag_id}/{event.run_id}/{event.key}"
        if key in self._seen:
            return
        self._seen[key] = time.time()
        spec = self._spec(event.dag_id)
        if spec is not None:
            handle_failure(event, spec, self.services)

    def _failed_in_db(self) -> list[FailureEvent]:
        from airflow.models.taskinstance import TaskInstance
        from airflow.utils.session import create_session
        from airflow.utils.state import TaskInstanceState

        with create_session() as session:
            rows = (session.query(TaskInstance.dag_id, TaskInstance.run_id, TaskInstance.task_id,
                                  TaskInstance.map_index, TaskInstance.try_number, TaskInstance.end_date)
                    .filter(TaskInstance.state == TaskInstanceState.FAILED,
                            TaskInstance.operator.in_(OPERATOR_NAMES),
                            TaskInstance.end_date >= _utc(self._since))
                    .all())
        events = []
        for dag_id, run_id, task_id, map_index, try_number, end_date in rows:
            key = f"{dag_id}/{run_id}/{task_id}:{map_index}:{try_number}"
            if key not in self._seen:
                events.append(FailureEvent(dag_id, run_id, task_id, int(map_index), int(try_number or 0),
                                           "task failed (found by the scheduler's watcher)", "scheduler",
                                           end_date.timestamp() if end_date else time.time()))
        self._since = max(self._since, time.time() - max(self.lookback, 60.0))
        return events

    def _spec(self, dag_id: str) -> JobSpec | None:
        from airflow.models.serialized_dag import SerializedDagModel

        dag = SerializedDagModel.get_dag(dag_id)
        return job_of(dag) if dag is not None else None


BUSY_STATES = frozenset({"running", "queued", "restarting", "scheduled", "deferred", "up_for_reschedule"})
SETTLE_TIMEOUT_S = 60.0


def _states(dag_id: str, run_id: str, task_ids: list[str]) -> set[str]:
    """Current states of some task instances of a run (metadata DB; scheduler only)."""
    from airflow.models.taskinstance import TaskInstance
    from airflow.utils.session import create_session

    with create_session() as session:
        rows = (session.query(TaskInstance.state)
                .filter(TaskInstance.dag_id == dag_id, TaskInstance.run_id == run_id,
                        TaskInstance.task_id.in_(task_ids)).all())
    return {str(getattr(state, "value", state)) for (state,) in rows}


def _not_restarted(ended_since: Any) -> dict[tuple[str, str], list[tuple[str, int]]]:
    """Step tasks a clear may have failed to restart, per run, as ``(task_id, try_number)``: those waiting in
    ``up_for_retry``, and those in state ``none`` of a run that ended after ``ended_since``."""
    from airflow.models.dagrun import DagRun
    from airflow.models.taskinstance import TaskInstance
    from airflow.utils.session import create_session
    from airflow.utils.state import DagRunState, TaskInstanceState
    from sqlalchemy import and_, or_

    ended = and_(TaskInstance.state.is_(None), DagRun.state.in_([DagRunState.FAILED, DagRunState.SUCCESS]),
                 DagRun.end_date >= ended_since)
    with create_session() as session:
        rows = (session.query(TaskInstance.dag_id, TaskInstance.run_id, TaskInstance.task_id,
                              TaskInstance.try_number)
                .join(DagRun, and_(DagRun.dag_id == TaskInstance.dag_id, DagRun.run_id == TaskInstance.run_id))
                .filter(TaskInstance.operator.in_(OPERATOR_NAMES),
                        or_(TaskInstance.state == TaskInstanceState.UP_FOR_RETRY, ended)).all())
    out: dict[tuple[str, str], list[tuple[str, int]]] = {}
    for dag_id, run_id, task_id, try_number in rows:
        out.setdefault((dag_id, run_id), []).append((task_id, int(try_number or 0)))
    return out


def _utc(ts: float) -> Any:
    from datetime import datetime, timezone

    return datetime.fromtimestamp(ts, tz=timezone.utc)

"""What the scheduler's watcher asks the metadata DB (scheduler process only; the worker has no DB access).

Each probe is one query that answers one question: which step tasks failed recently (:func:`failed_step_tasks`),
what states some task instances are in (:func:`states`), whether Airflow is done reacting to a failure
(:func:`settled`), and which step tasks one of our clears may have failed to restart (:func:`not_restarted`).
Step tasks are found by their operator name (:data:`~airflow_region_failover.naming.OPERATOR_NAME`). Airflow's
models are imported inside each probe: the plugin module is loaded by every Airflow component at start-up, and
only the scheduler ever runs a probe.
"""

from __future__ import annotations

from datetime import datetime, timezone

from airflow_region_failover.failover.handler import FailureEvent
from airflow_region_failover.job import JobSpec, job_of
from airflow_region_failover.naming import OPERATOR_NAME

OPERATOR_NAMES = (OPERATOR_NAME,)
BUSY_STATES = frozenset({"running", "queued", "restarting", "scheduled", "deferred", "up_for_reschedule"})


def utc(ts: float) -> datetime:
    """An epoch time as an aware UTC datetime (the metadata DB's column type)."""
    return datetime.fromtimestamp(ts, tz=timezone.utc)


def failed_step_tasks(since: float) -> list[FailureEvent]:
    """Step task instances that ended ``failed`` after ``since`` (epoch seconds), as failure events."""
    from airflow.models.taskinstance import TaskInstance
    from airflow.utils.session import create_session
    from airflow.utils.state import TaskInstanceState

    with create_session() as session:
        rows = (session.query(TaskInstance.dag_id, TaskInstance.run_id, TaskInstance.task_id,
                              TaskInstance.map_index, TaskInstance.try_number, TaskInstance.end_date)
                .filter(TaskInstance.state == TaskInstanceState.FAILED,
                        TaskInstance.operator.in_(OPERATOR_NAMES),
                        TaskInstance.end_date >= utc(since))
                .all())
    return [FailureEvent(dag_id, run_id, task_id, int(map_index), int(try_number or 0),
                         "task failed (found by the scheduler's watcher)", "scheduler",
                         end_date.timestamp() if end_date else since)
            for dag_id, run_id, task_id, map_index, try_number, end_date in rows]


def states(dag_id: str, run_id: str, task_ids: list[str]) -> set[str]:
    """Current states of some task instances of a run."""
    from airflow.models.taskinstance import TaskInstance
    from airflow.utils.session import create_session

    with create_session() as session:
        rows = (session.query(TaskInstance.state)
                .filter(TaskInstance.dag_id == dag_id, TaskInstance.run_id == run_id,
                        TaskInstance.task_id.in_(task_ids)).all())
    return {str(getattr(state, "value", state)) for (state,) in rows}


def settled(dag_id: str, run_id: str, failed: list[str]) -> bool:
    """Whether Airflow is done reacting to the failures: the failed tasks left the running states and their
    direct downstream tasks left ``none``/``scheduled`` (marked ``upstream_failed``).

    Measured on 3.3.2 with SQLite: a clear that lands while the scheduler marks downstream tasks
    ``upstream_failed`` gives those rows new ids under its feet and the scheduler loop dies with
    ``StaleDataError`` (the race of apache/airflow#63926); waiting for this quiet point avoids it.
    """
    if states(dag_id, run_id, failed) & BUSY_STATES:
        return False
    from airflow.models.serialized_dag import SerializedDagModel

    dag = SerializedDagModel.get_dag(dag_id)
    downstream = sorted({d for t in failed if dag is not None and dag.has_task(t)
                         for d in dag.get_task(t).downstream_task_ids})
    return not downstream or not (states(dag_id, run_id, downstream) & {"None", "none", "scheduled"})


def not_restarted(ended_since: datetime) -> dict[tuple[str, str], list[tuple[str, int]]]:
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


def serialized_job(dag_id: str) -> JobSpec | None:
    """The job of ``dag_id``'s serialized DAG (``None`` for a DAG without one)."""
    from airflow.models.serialized_dag import SerializedDagModel

    dag = SerializedDagModel.get_dag(dag_id)
    return job_of(dag) if dag is not None else None

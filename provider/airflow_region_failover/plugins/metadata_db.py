"""What the scheduler's watcher asks the metadata DB, and the failures it keeps there (scheduler process only;
the worker has no DB access).

Each probe is one query that answers one question. Their cost is bounded by the runs that matter, never by
history: the runs *at work* now (``running``/``queued``, found through Airflow's partial indexes on those states)
and the runs the watcher saw at work within its look-back window (:func:`failed_step_tasks`,
:func:`not_restarted` look only inside those, by the ``(dag_id, run_id)`` index). Step tasks are found by their
operator name (:data:`~airflow_region_failover.naming.OPERATOR_NAME`). A person's state changes are read from
Airflow's audit log (:func:`user_stopped`), by its time index. A failure the watcher could not record (S3 away
or throttled: the metadata DB is what the scheduler still reaches) is kept as an XCom of the failed task instance
under :data:`UNRECORDED_KEY` until it is (:func:`keep_unrecorded`, :func:`forget_unrecorded`): a restarted
scheduler finds it again (:func:`unrecorded`, by the XCom key index: the cost is the failures kept, never
history), and whoever looks at the task sees why it was not restarted yet; one given up on is left under
:data:`GIVEN_UP_KEY` with the reason. Airflow's models are imported inside each probe: the plugin module is
loaded by every Airflow component at start-up, and only a scheduler ever runs a probe.
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Iterable
from datetime import datetime, timezone
from typing import Any

from airflow_region_failover.failover.run_log import FailureRecord
from airflow_region_failover.job import JobSpec, job_of
from airflow_region_failover.naming import OPERATOR_NAME

log = logging.getLogger(__name__)
OPERATOR_NAMES = (OPERATOR_NAME,)
UNRECORDED_KEY = "region_failover_unrecorded"
"""XCom key of a failed step task whose failure the watcher has not recorded yet (value: the failure and why)."""
GIVEN_UP_KEY = "region_failover_given_up"
"""XCom key of a failed step task whose failure the watcher gave up on (value: the failure and the reason)."""
BUSY_STATES = frozenset({"running", "queued", "restarting", "scheduled", "deferred", "up_for_reschedule"})
#: Audit-log events of Airflow's REST API that set task or run states (the UI uses the same API).
STATE_EVENTS = ("patch_dag_run", "patch_task_instance", "patch_task_group_instances", "bulk_task_instances",
                "bulk_dag_runs", "patch_dag_runs")
Run = tuple[str, str]


def utc(ts: float) -> datetime:
    """An epoch time as an aware UTC datetime (the metadata DB's column type)."""
    return datetime.fromtimestamp(ts, tz=timezone.utc)


def active_runs() -> set[Run]:
    """Runs ``running`` or ``queued`` now (one query per state: each state has its own partial index)."""
    from airflow.models.dagrun import DagRun
    from airflow.utils.session import create_session
    from airflow.utils.state import DagRunState

    found: set[Run] = set()
    with create_session() as session:
        for state in (DagRunState.RUNNING, DagRunState.QUEUED):
            found.update(session.query(DagRun.dag_id, DagRun.run_id).filter(DagRun.state == state).all())
    return found


def runs_ended_since(since: float) -> set[Run]:
    """Runs that ended after ``since`` (a full scan of ``dag_run``: only when a watcher starts)."""
    from airflow.models.dagrun import DagRun
    from airflow.utils.session import create_session

    with create_session() as session:
        rows = session.query(DagRun.dag_id, DagRun.run_id).filter(DagRun.end_date >= utc(since)).all()
    return {(dag_id, run_id) for dag_id, run_id in rows}


def failed_step_tasks(runs: Iterable[Run], since: float) -> list[tuple[str, str, FailureRecord]]:
    """Step task instances of ``runs`` that ended ``failed`` after ``since``, as ``(dag, run, failure)``; the
    failure carries the run's current clear count."""
    from airflow.models.dagrun import DagRun
    from airflow.utils.session import create_session

    found: list[tuple[str, str, FailureRecord]] = []
    with create_session() as session:
        for dag_id, run_id in runs:
            rows = [(task_id, map_index, try_number, end) for task_id, map_index, try_number, end, state
                    in _step_tasks(session, dag_id, run_id)
                    if state == "failed" and end is not None and end.timestamp() >= since]
            if not rows:
                continue
            clear = session.query(DagRun.clear_number).filter(DagRun.dag_id == dag_id,
                                                              DagRun.run_id == run_id).scalar()
            found.extend((dag_id, run_id, FailureRecord(
                task_id, int(map_index), int(try_number or 0), "task failed (found by the scheduler's watcher)",
                "scheduler", end.timestamp(), clear_number=int(clear) if clear is not None else None))
                for task_id, map_index, try_number, end in rows)
    return found


def _step_tasks(session: Any, dag_id: str, run_id: str) -> list[tuple[str, int, int, Any, str]]:
    """``(task_id, map_index, try_number, end_date, state)`` of the run's step tasks. Selected by the run alone,
    with the state tested here: a state condition in SQL lets a planner without statistics (SQLite's) pick the
    ``(dag_id, state)`` index and walk every failed task of the DAG's history."""
    from airflow.models.taskinstance import TaskInstance

    rows = (session.query(TaskInstance.task_id, TaskInstance.map_index, TaskInstance.try_number, TaskInstance.end_date,
                          TaskInstance.state)
            .filter(TaskInstance.dag_id == dag_id, TaskInstance.run_id == run_id,
                    TaskInstance.operator.in_(OPERATOR_NAMES)).all())
    return [(t, int(m), int(n or 0), e, str(getattr(s, "value", s))) for t, m, n, e, s in rows]


def states(dag_id: str, run_id: str, task_ids: list[str]) -> set[str]:
    """Current states of some task instances of a run."""
    from airflow.models.taskinstance import TaskInstance
    from airflow.utils.session import create_session

    with create_session() as session:
        rows = (session.query(TaskInstance.state)
                .filter(TaskInstance.dag_id == dag_id, TaskInstance.run_id == run_id,
                        TaskInstance.task_id.in_(task_ids)).all())
    return {str(getattr(state, "value", state)) for (state,) in rows}


def settled(dag_id: str, run_id: str, failed: list[str], downstream_too: bool = True) -> bool:
    """Whether Airflow is done reacting to the failures: the failed tasks left the running states and (with
    ``downstream_too``) their direct downstream tasks left ``none``/``scheduled`` (marked ``upstream_failed``).

    Measured on 3.3.2 with SQLite: a clear that lands while the scheduler marks downstream tasks
    ``upstream_failed`` gives those rows new ids under its feet and the scheduler loop dies with
    ``StaleDataError`` (the race of apache/airflow#63926); waiting for this quiet point avoids it.
    """
    if states(dag_id, run_id, failed) & BUSY_STATES:
        return False
    if not downstream_too:
        return True
    dag = serialized_dag(dag_id)
    downstream = sorted({d for t in failed if dag is not None and dag.has_task(t)
                         for d in dag.get_task(t).downstream_task_ids})
    return not downstream or not (states(dag_id, run_id, downstream) & {"None", "none", "scheduled"})


def not_restarted(runs: Iterable[Run]) -> dict[Run, list[tuple[str, int, str]]]:
    """Step tasks a clear may have failed to restart, per run, as ``(task_id, try_number, state)``: those waiting in
    ``up_for_retry`` (any run: the state index holds only the tasks retrying now), and those in state ``none``
    of one of ``runs`` that has ended (per run, :func:`_step_tasks`). One query with both conditions OR-ed would
    scan every task of history."""
    from airflow.models.dagrun import DagRun
    from airflow.models.taskinstance import TaskInstance
    from airflow.utils.session import create_session
    from airflow.utils.state import DagRunState, TaskInstanceState

    columns = (TaskInstance.dag_id, TaskInstance.run_id, TaskInstance.task_id, TaskInstance.try_number)
    ended_states = (DagRunState.FAILED, DagRunState.SUCCESS)
    with create_session() as session:
        rows = [(*row, "up_for_retry") for row in session.query(*columns).filter(
            TaskInstance.state == TaskInstanceState.UP_FOR_RETRY, TaskInstance.operator.in_(OPERATOR_NAMES)).all()]
        for dag_id, run_id in runs:
            state = session.query(DagRun.state).filter(DagRun.dag_id == dag_id, DagRun.run_id == run_id).scalar()
            if state in ended_states:
                rows += [(dag_id, run_id, task_id, try_number, "none")
                         for task_id, _, try_number, _, ti_state in _step_tasks(session, dag_id, run_id)
                         if ti_state == "None"]
    out: dict[Run, list[tuple[str, int, str]]] = {}
    for dag_id, run_id, task_id, try_number, state in rows:
        out.setdefault((dag_id, run_id), []).append((task_id, int(try_number or 0), state))
    return out


def keep_unrecorded(dag_id: str, run_id: str, failure: FailureRecord, why: str) -> None:
    """Keep ``failure`` (not recorded yet: ``why``) on its task instance, where :func:`unrecorded` finds it."""
    from airflow.models.xcom import XComModel
    from airflow.utils.session import create_session

    with create_session() as session:
        XComModel.set(UNRECORDED_KEY, {"failure": failure.to_json(), "why": why[:500]}, dag_id=dag_id,
                      task_id=failure.task_id, run_id=run_id, map_index=failure.map_index, session=session)


def unrecorded() -> list[tuple[str, str, FailureRecord]]:
    """Every kept failure, as ``(dag, run, failure)`` (one query by the XCom key index; a value that is not a
    kept failure is logged and skipped)."""
    from airflow.models.xcom import XComModel
    from airflow.utils.session import create_session

    found = []
    with create_session() as session:
        for row in session.query(XComModel).filter(XComModel.key == UNRECORDED_KEY).all():
            try:
                body = XComModel.deserialize_value(row)
                found.append((row.dag_id, row.run_id, FailureRecord.from_json(body["failure"])))
            except (KeyError, TypeError, ValueError):
                log.warning("region failover: XCom %s of %s/%s/%s is not a kept failure; skipped", UNRECORDED_KEY,
                            row.dag_id, row.run_id, row.task_id)
    return found


def forget_unrecorded(dag_id: str, run_id: str, failure: FailureRecord, gave_up: str | None = None) -> None:
    """Stop keeping ``failure`` (it was recorded); with ``gave_up``, leave that reason under :data:`GIVEN_UP_KEY`
    on its task instance instead (the watcher gave up on it and could not record even that)."""
    from airflow.models.xcom import XComModel
    from airflow.utils.session import create_session

    with create_session() as session:
        session.query(XComModel).filter(
            XComModel.key == UNRECORDED_KEY, XComModel.dag_id == dag_id, XComModel.run_id == run_id,
            XComModel.task_id == failure.task_id, XComModel.map_index == failure.map_index,
        ).delete(synchronize_session=False)
        if gave_up is not None:
            XComModel.set(GIVEN_UP_KEY, {"failure": failure.to_json(), "reason": gave_up[:500]}, dag_id=dag_id,
                          task_id=failure.task_id, run_id=run_id, map_index=failure.map_index, session=session)


def clear_number(dag_id: str, run_id: str) -> int | None:
    """How many times the run has been cleared (Airflow counts every clear of its tasks)."""
    from airflow.models.dagrun import DagRun
    from airflow.utils.session import create_session

    with create_session() as session:
        row = session.query(DagRun.clear_number).filter(DagRun.dag_id == dag_id, DagRun.run_id == run_id).first()
    return None if row is None or row[0] is None else int(row[0])


def user_stopped(dag_id: str, run_id: str, task_ids: Iterable[str], since: float) -> str | None:
    """Who set the run, or one of ``task_ids``, to ``failed`` after ``since`` (Airflow's audit log of the REST
    API), as ``"<user> (<event> at <time>)"``; ``None`` if nobody did."""
    from airflow.models.log import Log
    from airflow.utils.session import create_session
    from sqlalchemy import or_

    wanted = set(task_ids)
    with create_session() as session:
        rows = (session.query(Log.owner, Log.event, Log.dttm, Log.task_id, Log.extra)
                .filter(Log.dttm >= utc(since), Log.event.in_(STATE_EVENTS), Log.dag_id == dag_id,
                        or_(Log.run_id == run_id, Log.run_id.is_(None)))
                .order_by(Log.dttm).all())
    for owner, event, dttm, task_id, extra in rows:
        if '"failed"' in (extra or "") and (task_id is None or task_id in wanted):
            return f"{owner} ({event} at {dttm:%Y-%m-%d %H:%M:%S} UTC)"
    return None


def serialized_dag(dag_id: str) -> Any:
    """The latest serialized DAG of ``dag_id``, deserialised once per DAG version (``None`` if there is none)."""
    return _versioned(dag_id)[0]


def serialized_job(dag_id: str) -> JobSpec | None:
    """The job of ``dag_id``'s latest serialized DAG (``None`` for a DAG without one), read once per version."""
    return _versioned(dag_id)[1]


def _versioned(dag_id: str) -> tuple[Any, JobSpec | None]:
    """One cheap query for the latest version's hash; the DAG and its job are built once per hash."""
    from airflow.models.serialized_dag import SerializedDagModel
    from airflow.utils.session import create_session

    with create_session() as session:
        row = (session.query(SerializedDagModel.dag_hash).filter(SerializedDagModel.dag_id == dag_id)
               .order_by(SerializedDagModel.created_at.desc()).first())
    return (None, None) if row is None else _of_version(dag_id, str(row[0]))


@functools.lru_cache(maxsize=256)
def _of_version(dag_id: str, dag_hash: str) -> tuple[Any, JobSpec | None]:
    from airflow.models.serialized_dag import SerializedDagModel

    dag = SerializedDagModel.get_dag(dag_id)
    return dag, (job_of(dag) if dag is not None else None)

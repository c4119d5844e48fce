"""The watcher's metadata-DB probes on a real Airflow schema: which rows they find is decided by SQL, so they are
tested against SQL, not a stub — a throw-away SQLite database, and (``integration``) PostgreSQL, the production
metadata DB (``metadata_engine`` in ``conftest.py``)."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import datetime, timedelta, timezone
from typing import Any

import pytest

DAG = "rf_e2e_region"


@pytest.fixture
def session(metadata_engine: Any) -> Iterator[Any]:
    from airflow.models.dagrun import DagRun
    from airflow.models.log import Log
    from airflow.models.taskinstance import TaskInstance
    from airflow.utils.session import create_session

    with create_session() as s:
        assert s.get_bind().url == metadata_engine.url, "the probes' create_session must reach the tested DB"
        s.query(TaskInstance).filter(TaskInstance.dag_id == DAG).delete()
        s.query(DagRun).filter(DagRun.dag_id == DAG).delete()
        s.query(Log).filter(Log.dag_id == DAG).delete()
    with create_session() as s:
        yield s


def _run(session: Any, run_id: str, state: str, ended: datetime | None) -> None:
    from airflow.models.dagrun import DagRun

    session.execute(DagRun.__table__.insert().values(
        dag_id=DAG, run_id=run_id, run_type="manual", state=state, end_date=ended, clear_number=0,
        run_after=datetime.now(timezone.utc), data_interval_end=None, logical_date=None))


def _ti(session: Any, run_id: str, task_id: str, state: str | None, try_number: int,
        operator: str = "RegionStepOperator") -> None:
    import uuid

    from airflow.models.taskinstance import TaskInstance

    session.execute(TaskInstance.__table__.insert().values(
        id=uuid.uuid4(), dag_id=DAG, run_id=run_id, task_id=task_id, map_index=-1, state=state,
        try_number=try_number, pool="default_pool", operator=operator))


def test_probe_finds_up_for_retry_and_unstarted_tasks_of_recently_ended_runs_only(session: Any) -> None:
    """Lost update: the scheduler ended ``lost`` (failed) after our clear put c.0/d.0 back to ``none``."""
    from airflow_region_failover.plugins.metadata_db import active_runs, not_restarted, runs_ended_since

    now = datetime.now(timezone.utc)
    _run(session, "lost", "failed", now)
    _ti(session, "lost", "c.0", None, 1)
    _ti(session, "lost", "d.0", None, 0)
    _ti(session, "lost", "b.0", "success", 1)
    _ti(session, "lost", "plain", None, 0, operator="PythonOperator")  # not a step task
    _run(session, "running", "running", None)
    _ti(session, "running", "c.0", None, 1)  # cleared, waiting to be scheduled: fine
    _ti(session, "running", "d.0", "up_for_retry", 1)  # stopped by our clear
    _run(session, "old", "failed", now - timedelta(hours=2))
    _ti(session, "old", "c.0", None, 1)  # ended long before the look-back window
    _run(session, "done", "success", now)
    _ti(session, "done", "c.0", "success", 2)
    session.commit()
    watched = runs_ended_since((now - timedelta(minutes=10)).timestamp()) | active_runs()  # as a watcher sees them
    found = not_restarted(watched)
    assert {k: sorted(v) for k, v in found.items()} == {(DAG, "lost"): [("c.0", 1), ("d.0", 0)],
                                                        (DAG, "running"): [("d.0", 1)]}


def _log(session: Any, event: str, run_id: str | None, task_id: str | None, extra: str, owner: str,
         when: datetime) -> None:
    from airflow.models.log import Log

    session.execute(Log.__table__.insert().values(dttm=when, event=event, owner=owner, dag_id=DAG, run_id=run_id,
                                                  task_id=task_id, extra=extra))


def test_a_person_setting_the_run_or_a_task_failed_is_found_in_the_audit_log(session: Any) -> None:
    """``PATCH .../dagRuns/{run}`` with ``state: failed`` (what the UI's "mark as failed" sends) names its user;
    our own clears, other runs, other states and older actions do not count."""
    from airflow_region_failover.plugins.metadata_db import user_stopped

    now = datetime.now(timezone.utc)
    _log(session, "post_clear_task_instances", "r1", None, '{"dry_run": false}', "region-failover", now)
    _log(session, "patch_dag_run", "r2", None, '{"state": "failed"}', "ana", now)
    _log(session, "patch_task_instance", "r1", "d.0", '{"new_state": "success"}', "ana", now)
    _log(session, "patch_dag_run", "r1", None, '{"state": "failed"}', "bo", now - timedelta(hours=1))
    session.commit()
    since = (now - timedelta(minutes=1)).timestamp()
    assert user_stopped(DAG, "r1", ["c.0"], since) is None
    _log(session, "patch_task_instance", "r1", "c.0", '{"new_state": "failed"}', "ana", now)
    session.commit()
    assert user_stopped(DAG, "r1", ["d.0"], since) is None, "another task"
    assert (user_stopped(DAG, "r1", ["c.0"], since) or "").startswith("ana (patch_task_instance")
    _log(session, "patch_dag_run", "r1", None, '{"state": "failed"}', "bo", now)
    session.commit()
    assert (user_stopped(DAG, "r1", ["d.0"], since) or "").startswith("bo (patch_dag_run")


def test_failed_step_tasks_are_looked_for_only_in_the_watched_runs(session: Any) -> None:
    """History does not cost a pass anything: a failed step task of a run the watcher does not watch (ended long
    ago) is not even looked at; one of a watched run is found with the run's clear count."""
    from airflow_region_failover.plugins.metadata_db import failed_step_tasks

    now = datetime.now(timezone.utc)
    _run(session, "watched", "running", None)
    _run(session, "history", "failed", now - timedelta(days=3))
    for run_id in ("watched", "history"):
        _ti(session, run_id, "c.0", "failed", 1)
    session.commit()
    from airflow.models.taskinstance import TaskInstance

    session.query(TaskInstance).filter(TaskInstance.dag_id == DAG).update({"end_date": now})
    session.commit()
    found = failed_step_tasks([(DAG, "watched")], (now - timedelta(minutes=1)).timestamp())
    assert [(run, f.task_id, f.clear_number) for _, run, f in found] == [("watched", "c.0", 0)]

"""The watcher's metadata-DB probes on a real Airflow schema: which rows they find is decided by SQL, so they are
tested against SQL, not a stub — a throw-away SQLite database, and (``integration``) PostgreSQL, the production
metadata DB (``metadata_engine`` in ``conftest.py``)."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import datetime, timedelta, timezone
from typing import Any

import pytest

from tests.support.metadata import add_run, add_task, delete_dag

DAG = "rf_e2e_region"


@pytest.fixture
def session(metadata_engine: Any) -> Iterator[Any]:
    from airflow.utils.session import create_session

    with create_session() as s:
        assert s.get_bind().url == metadata_engine.url, "the probes' create_session must reach the tested DB"
        delete_dag(s, DAG)
    with create_session() as s:
        yield s


def _run(session: Any, run_id: str, state: str, ended: datetime | None) -> None:
    add_run(session, DAG, run_id, state, ended)


def _ti(session: Any, run_id: str, task_id: str, state: str | None, try_number: int,
        operator: str = "RegionStepOperator") -> None:
    add_task(session, DAG, run_id, task_id, state, try_number, operator)


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
    assert {k: sorted(v) for k, v in found.items()} == {(DAG, "lost"): [("c.0", 1, "none"), ("d.0", 0, "none")],
                                                        (DAG, "running"): [("d.0", 1, "up_for_retry")]}


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


def test_a_failure_kept_on_its_task_instance_is_found_until_it_is_forgotten(session: Any) -> None:
    """What a restarted watcher finds: the failures kept (once each, however often kept), by the XCom key alone;
    one given up on is no longer found, and its task instance carries the reason."""
    from airflow.models.xcom import XComModel

    from airflow_region_failover.plugins.metadata_db import (
        GIVEN_UP_KEY,
        forget_unrecorded,
        keep_unrecorded,
        unrecorded,
    )
    from tests.support.fakes import failure

    now = datetime.now(timezone.utc)
    for run_id in ("r1", "r2"):
        _run(session, run_id, "failed", now - timedelta(days=2))
        _ti(session, run_id, "c.0", "failed", 1)
    session.commit()
    first, second = failure("c.0", 1, 100.0), failure("c.0", 1, 200.0, cause="b->c#1")
    keep_unrecorded(DAG, "r1", first, "StoreUnreachable: S3 PUT failed after retries")
    keep_unrecorded(DAG, "r1", first, "StoreUnreachable: again")
    keep_unrecorded(DAG, "r2", second, "ConnectionError: S3 SlowDown")
    assert sorted(unrecorded(), key=lambda f: f[1]) == [(DAG, "r1", first), (DAG, "r2", second)]
    forget_unrecorded(DAG, "r1", first)
    forget_unrecorded(DAG, "r2", second, gave_up="abandoned: the failure could not be handled (GraphError: x)")
    assert unrecorded() == []
    given_up = session.query(XComModel).filter(XComModel.key == GIVEN_UP_KEY, XComModel.dag_id == DAG).one()
    assert (given_up.run_id, XComModel.deserialize_value(given_up)["reason"]) == (
        "r2", "abandoned: the failure could not be handled (GraphError: x)")

"""The watcher's metadata-DB probe for clears that did not restart their tasks, on a real (throw-away) SQLite
Airflow schema: which rows it finds is decided by SQL, so it is tested against SQL, not a stub."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import datetime, timedelta, timezone
from typing import Any

import pytest

DAG = "rf_e2e_region"


@pytest.fixture
def session() -> Iterator[Any]:
    import airflow.models as models
    from airflow import settings
    from airflow.models.base import Base
    from airflow.models.dagrun import DagRun
    from airflow.models.taskinstance import TaskInstance
    from airflow.utils.session import create_session

    models.import_all_models()
    Base.metadata.create_all(settings.engine)
    with create_session() as s:
        s.query(TaskInstance).filter(TaskInstance.dag_id == DAG).delete()
        s.query(DagRun).filter(DagRun.dag_id == DAG).delete()
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
    from airflow_region_failover.plugins.probes import not_restarted as _not_restarted

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
    found = _not_restarted(now - timedelta(minutes=10))
    assert {k: sorted(v) for k, v in found.items()} == {(DAG, "lost"): [("c.0", 1), ("d.0", 0)],
                                                        (DAG, "running"): [("d.0", 1)]}

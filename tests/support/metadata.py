"""Rows of Airflow's metadata DB for tests of the SQL the watcher runs (inserted as the scheduler would have
left them; the schema is created by ``tests/unit/plugins/conftest.py``'s ``metadata_engine``)."""

from __future__ import annotations

from datetime import datetime
from typing import Any


def add_run(session: Any, dag_id: str, run_id: str, state: str, ended: datetime | None) -> None:
    """A DAG run in ``state`` (ended at ``ended``), cleared 0 times."""
    from datetime import timezone

    from airflow.models.dagrun import DagRun

    session.execute(DagRun.__table__.insert().values(
        dag_id=dag_id, run_id=run_id, run_type="manual", state=state, end_date=ended, clear_number=0,
        run_after=datetime.now(timezone.utc), data_interval_end=None, logical_date=None))


def add_task(session: Any, dag_id: str, run_id: str, task_id: str, state: str | None, try_number: int,
             operator: str = "RegionStepOperator") -> None:
    """A task instance of the run (a step task unless ``operator`` says otherwise)."""
    import uuid

    from airflow.models.taskinstance import TaskInstance

    session.execute(TaskInstance.__table__.insert().values(
        id=uuid.uuid4(), dag_id=dag_id, run_id=run_id, task_id=task_id, map_index=-1, state=state,
        try_number=try_number, pool="default_pool", operator=operator))


def delete_dag(session: Any, dag_id: str) -> None:
    """Every row of ``dag_id`` the tests write (task instances, their XComs, runs, audit log)."""
    from airflow.models.dagrun import DagRun
    from airflow.models.log import Log
    from airflow.models.taskinstance import TaskInstance
    from airflow.models.xcom import XComModel

    session.query(XComModel).filter(XComModel.dag_id == dag_id).delete()
    session.query(TaskInstance).filter(TaskInstance.dag_id == dag_id).delete()
    session.query(DagRun).filter(DagRun.dag_id == dag_id).delete()
    session.query(Log).filter(Log.dag_id == dag_id).delete()

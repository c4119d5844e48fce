"""The standalone stack's SQLite metadata DB under a write lock held longer than SQLite's default busy timeout.

    demo trigger ─┐
    task "run" ───┼──> airflow.db  <── a writer holding the lock 15 s
    scheduler ────┘

On a loaded machine, the stack's components (API server, scheduler, DAG processor and the task processes that
scheduled example DAGs start at once) queue for SQLite's single write lock; pysqlite gives up after 5 s and the
request fails with HTTP 500 "Database error" (seen in ``./dev demo --exit``: its trigger, and a task's start). Every
component of the stack must wait for the lock instead — and the stack's own REST client must wait for their answer as
long: a trigger whose answer came after the client's 3 x 10 s was reported lost, and ``./dev demo --exit`` failed.
"""

from __future__ import annotations

import sqlite3
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from airflow_region_failover.plugins import rest
from airflow_region_failover.standalone import sqlite
from airflow_region_failover.standalone.airflow_stack import AirflowStack

HELD_S = 15.0  # longer than pysqlite's default busy timeout (5 s) plus importing Airflow
HELD_LONG_S = 40.0  # longer than the REST client's patience before (3 tries of 10 s), shorter than the stack's wait

WRITE = """
from airflow import settings
from sqlalchemy import text
settings.configure_orm()
with settings.engine.begin() as conn:
    conn.execute(text("INSERT INTO t VALUES (2)"))
print("written")
"""


TINY_DAG = """
from datetime import datetime
from airflow.sdk import DAG
from airflow.providers.standard.operators.empty import EmptyOperator
with DAG("tiny", schedule=None, start_date=datetime(2026, 1, 1), catchup=False):
    EmptyOperator(task_id="only")
"""


def _hold_write_lock(db: Path, ready: threading.Event, held: float = HELD_S, table: str = "t") -> None:
    conn = sqlite3.connect(db, isolation_level=None)
    conn.execute("BEGIN IMMEDIATE")
    conn.execute(f"INSERT INTO {table} VALUES (1)")
    ready.set()
    time.sleep(held)
    conn.execute("COMMIT")
    conn.close()


def test_a_component_of_the_stack_waits_for_a_write_lock_held_longer_than_five_seconds(tmp_path: Path) -> None:
    stack = AirflowStack(dags_folder=tmp_path / "dags", home=tmp_path / "home", port=1)
    stack.home.mkdir()  # type: ignore[union-attr]
    env = stack.env()
    db = Path(env["AIRFLOW__DATABASE__SQL_ALCHEMY_CONN"].removeprefix("sqlite:///"))
    with sqlite3.connect(db) as conn:
        conn.execute("PRAGMA journal_mode=WAL")  # as Airflow leaves its DB (utils/orm_event_handlers.py)
        conn.execute("CREATE TABLE t (x INTEGER)")
    ready = threading.Event()
    holder = threading.Thread(target=_hold_write_lock, args=(db, ready))
    holder.start()
    try:
        assert ready.wait(10)
        started = time.monotonic()
        done = subprocess.run([sys.executable, "-c", WRITE], env=env, capture_output=True, text=True, timeout=120)
        waited = time.monotonic() - started
    finally:
        holder.join()
    assert done.returncode == 0, done.stderr[-2000:]
    assert "written" in done.stdout
    assert waited < 60
    with sqlite3.connect(db) as conn:
        assert sorted(x for (x,) in conn.execute("SELECT x FROM t")) == [1, 2]


@pytest.mark.timeout(400)
def test_the_stacks_client_waits_for_a_trigger_answered_after_a_write_lock_held_forty_seconds(tmp_path: Path) -> None:
    """
        stack.client() ── trigger ──> api-server ──> airflow.db  <── a writer holding the lock 40 s
    The API server waits for the lock (up to ``BUSY_TIMEOUT_S``), then creates the run: the client must still be
    waiting for that answer, not have given up after its tries and reported the trigger lost."""
    assert 3 * rest.DEFAULT_TIMEOUT < HELD_LONG_S < sqlite.BUSY_TIMEOUT_S
    (tmp_path / "dags").mkdir()
    (tmp_path / "dags" / "tiny.py").write_text(TINY_DAG)
    stack = AirflowStack(dags_folder=tmp_path / "dags", home=tmp_path / "home", supervise=False,
                         components={"api-server": ("api-server",), "dag-processor": ("dag-processor",)})
    stack.start()
    try:
        with stack.client() as api:
            api.wait_for_dag("tiny", timeout=120)
            db = tmp_path / "home" / "airflow.db"
            with sqlite3.connect(db) as conn:
                conn.execute("CREATE TABLE IF NOT EXISTS rf_test_lock (x INTEGER)")
            ready = threading.Event()
            holder = threading.Thread(target=_hold_write_lock, args=(db, ready, HELD_LONG_S, "rf_test_lock"))
            holder.start()
            try:
                assert ready.wait(10)
                started = time.monotonic()
                run_id = api.trigger("tiny")
                waited = time.monotonic() - started
            finally:
                holder.join()
            assert waited >= HELD_LONG_S - 5, "the trigger was answered while the lock was held"
            assert api.dag_run("tiny", run_id)["run_type"] == "manual"
            assert [r["dag_run_id"] for r in api.get("/dags/tiny/dagRuns")["dag_runs"]] == [run_id]
    finally:
        stack.stop()

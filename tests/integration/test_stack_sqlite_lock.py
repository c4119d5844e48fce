"""The standalone stack's SQLite metadata DB under a write lock held longer than SQLite's default busy timeout.

    demo trigger ─┐
    task "run" ───┼──> airflow.db  <── a writer holding the lock 15 s
    scheduler ────┘

On a loaded machine, the stack's components (API server, scheduler, DAG processor and the task processes that
scheduled example DAGs start at once) queue for SQLite's single write lock; pysqlite gives up after 5 s and the
request fails with HTTP 500 "Database error" (seen in ``./dev demo --exit``: its trigger, and a task's start). Every
component of the stack must wait for the lock instead.
"""

from __future__ import annotations

import sqlite3
import subprocess
import sys
import threading
import time
from pathlib import Path

from airflow_region_failover.standalone.airflow_stack import AirflowStack

HELD_S = 15.0  # longer than pysqlite's default busy timeout (5 s) plus importing Airflow

WRITE = """
from airflow import settings
from sqlalchemy import text
settings.configure_orm()
with settings.engine.begin() as conn:
    conn.execute(text("INSERT INTO t VALUES (2)"))
print("written")
"""


def _hold_write_lock(db: Path, ready: threading.Event) -> None:
    conn = sqlite3.connect(db, isolation_level=None)
    conn.execute("BEGIN IMMEDIATE")
    conn.execute("INSERT INTO t VALUES (1)")
    ready.set()
    time.sleep(HELD_S)
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

"""The standalone stack's SQLite metadata DB under a write lock held longer than SQLite's default busy timeout.

    demo trigger ─┐
    task "run" ───┼──> airflow.db  <── a writer holding the lock 15 s
    scheduler ────┘

On a loaded machine, the stack's components (API server, scheduler, DAG processor and the task processes that
scheduled example DAGs start at once) queue for SQLite's single write lock; pysqlite gives up after 5 s and the
request fails with HTTP 500 "Database error" (seen in ``./dev demo --exit``: its trigger, and a task's start). Every
component of the stack must wait for the lock instead — except the API server's event loop (below).
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
from tests.support.sqlite_lock import hold_write_lock

HELD_S = 15.0  # longer than pysqlite's default busy timeout (5 s) plus importing Airflow
CONCURRENT, ROUNDS = 8, 4  # before the fix, one round in three of 8 concurrent triggers deadlocked

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


def test_a_component_of_the_stack_waits_for_a_write_lock_held_longer_than_five_seconds(tmp_path: Path) -> None:
    stack = AirflowStack(dags_folder=tmp_path / "dags", home=tmp_path / "home", port=1)
    stack.home.mkdir()  # type: ignore[union-attr]
    env = stack.env()
    db = Path(env["AIRFLOW__DATABASE__SQL_ALCHEMY_CONN"].removeprefix("sqlite:///"))
    with sqlite3.connect(db) as conn:
        conn.execute("PRAGMA journal_mode=WAL")  # as Airflow leaves its DB (utils/orm_event_handlers.py)
        conn.execute("CREATE TABLE t (x INTEGER)")
    ready = threading.Event()
    holder = threading.Thread(target=hold_write_lock, args=(db, ready, HELD_S, 1))
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


@pytest.mark.timeout(600)
def test_concurrent_triggers_each_create_their_run_without_stalling_the_api_server(tmp_path: Path) -> None:
    """
        trigger 1 ─┐                 ┌─ its audit log, on the event loop: waits for the lock
        ...        ├──> api-server ──┤
        trigger 8 ─┘                 └─ another's create_dagrun, in the thread pool: holds the lock, and its
                                        commit waits for the event loop
    Before: a deadlock until the loop's wait gave up after ``BUSY_TIMEOUT_S`` (seen: a round of 8 took 120.5 s, and
    3 triggers were answered HTTP 500). Now the loop gives up after ``LOOP_BUSY_TIMEOUT_S``, the REST client sends a
    trigger answered 500 again under its run id, and each trigger creates its run once."""
    (tmp_path / "dags").mkdir()
    (tmp_path / "dags" / "tiny.py").write_text(TINY_DAG)
    stack = AirflowStack(dags_folder=tmp_path / "dags", home=tmp_path / "home", supervise=False,
                         components={"api-server": ("api-server",), "dag-processor": ("dag-processor",)})
    stack.start()
    try:
        with stack.client() as api:
            api.wait_for_dag("tiny", timeout=120)
        created: list[str] = []
        for _ in range(ROUNDS):
            started = time.monotonic()
            outcomes = _trigger_together(stack, CONCURRENT)
            took = time.monotonic() - started
            assert all(isinstance(o, str) for o in outcomes), outcomes
            assert took < sqlite.BUSY_TIMEOUT_S, f"the API server stalled for the lock wait ({took:.1f} s)"
            created.extend(str(o) for o in outcomes)
        with stack.client() as api:
            listed = [r["dag_run_id"] for r in api.get("/dags/tiny/dagRuns", limit=100)["dag_runs"]]
        assert sorted(listed) == sorted(created) and len(set(created)) == ROUNDS * CONCURRENT
    finally:
        stack.stop()


def _trigger_together(stack: AirflowStack, n: int) -> list[object]:
    """Trigger ``tiny`` from ``n`` clients at once (each logged in first); each one's run id, or its error."""
    clients = [stack.client() for _ in range(n)]
    outcomes: list[object] = [None] * n
    go = threading.Barrier(n)

    def trigger(i: int) -> None:
        try:
            clients[i].token()
            go.wait(30)
            outcomes[i] = clients[i].trigger("tiny")
        except (rest.RestError, threading.BrokenBarrierError) as exc:
            outcomes[i] = exc

    threads = [threading.Thread(target=trigger, args=(i,)) for i in range(n)]
    try:
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
    finally:
        for client in clients:
            client.close()
    return outcomes

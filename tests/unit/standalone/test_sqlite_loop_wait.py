"""How long a component's statement waits for SQLite's write lock, by the thread it runs on (``standalone/sqlite.py``).

    event-loop thread ── INSERT ──┐
                                  ├──> airflow.db  <── a writer holding the lock 3 s
    any other thread ── INSERT ───┘

Airflow's API server commits its audit log on its event loop (``action_logging``), while a request served by its
thread pool can hold the lock with its commit waiting for that same loop: a wait on the loop is then a deadlock that
ends only when the wait gives up (seen: every request of the API server stalled for the whole 60 s). So a thread
running an event loop gives up after ``LOOP_BUSY_TIMEOUT_S``; every other thread waits up to ``BUSY_TIMEOUT_S``. Real
SQLite, no Airflow.
"""

from __future__ import annotations

import asyncio
import sqlite3
import threading
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from airflow_region_failover.standalone import sqlite
from tests.support.sqlite_lock import hold_write_lock

HELD_S = 3.0


def _insert(db: Path, value: int) -> float:
    """Insert ``value`` through a connection made with the stack's arguments; return the seconds it took."""
    started = time.monotonic()
    conn = sqlite3.connect(db, check_same_thread=False, **sqlite.CONNECT_ARGS)  # type: ignore[arg-type]
    try:
        conn.execute("INSERT INTO t VALUES (?)", (value,))
        conn.commit()
    finally:
        conn.close()
    return time.monotonic() - started


@pytest.fixture()
def db(tmp_path: Path) -> Path:
    path = tmp_path / "airflow.db"
    with sqlite3.connect(path) as conn:
        conn.execute("PRAGMA journal_mode=WAL")
        conn.execute("CREATE TABLE t (x INTEGER)")
    return path


def _while_held(db: Path, write: Callable[[], object]) -> object:
    """Run ``write`` while another connection holds the write lock for ``HELD_S``; return what it returned."""
    ready = threading.Event()
    holder = threading.Thread(target=hold_write_lock, args=(db, ready, HELD_S, 0))
    holder.start()
    try:
        assert ready.wait(10)
        return write()
    finally:
        holder.join()


def test_a_statement_on_an_event_loop_gives_up_on_the_lock_after_the_loops_short_wait(db: Path) -> None:
    async def on_the_loop() -> float:
        return _insert(db, 1)

    with pytest.raises(sqlite3.OperationalError, match="locked"):  # it waited for the holder before
        _while_held(db, lambda: asyncio.run(on_the_loop()))
    with sqlite3.connect(db) as conn:
        assert [x for (x,) in conn.execute("SELECT x FROM t")] == [0]
    assert sqlite.LOOP_BUSY_TIMEOUT_S * 2 < HELD_S < sqlite.BUSY_TIMEOUT_S


def test_a_statement_off_any_event_loop_waits_for_the_lock(db: Path) -> None:
    waited = _while_held(db, lambda: _insert(db, 2))
    assert isinstance(waited, float) and waited >= HELD_S - 1
    with sqlite3.connect(db) as conn:
        assert sorted(x for (x,) in conn.execute("SELECT x FROM t")) == [0, 2]


def test_one_connection_waits_by_the_thread_that_uses_it(db: Path) -> None:
    """A pooled connection moves between threads (``check_same_thread=False``): the wait follows the thread."""
    conn = sqlite3.connect(db, check_same_thread=False, **sqlite.CONNECT_ARGS)  # type: ignore[arg-type]

    async def on_the_loop() -> None:
        conn.execute("INSERT INTO t VALUES (3)")

    try:
        with pytest.raises(sqlite3.OperationalError, match="locked"):
            _while_held(db, lambda: asyncio.run(on_the_loop()))
        conn.rollback()
        assert _while_held(db, lambda: conn.execute("INSERT INTO t VALUES (4)")) is not None
        conn.commit()
    finally:
        conn.close()
    with sqlite3.connect(db) as check:
        assert sorted(x for (x,) in check.execute("SELECT x FROM t")) == [0, 0, 4]

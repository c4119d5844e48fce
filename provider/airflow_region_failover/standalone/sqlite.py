"""How the standalone stack's components connect to its SQLite metadata DB (``[database]
sql_alchemy_connect_args``, and ``..._async`` for the API server's async sessions, name :data:`CONNECT_ARGS`).

Rules:
- SQLite has one write lock per database file, and pysqlite gives up waiting for it after 5 s by default. On a
  loaded machine, the API server, scheduler, DAG processor and the task processes that scheduled DAGs start at once
  queue for that lock longer than that, and the loser's request fails (HTTP 500 "Database error": a trigger, a
  task's start). Every component waits up to :data:`BUSY_TIMEOUT_S` instead, as a server database would queue the
  writes.
- Except on a thread that runs an event loop: it gives up after :data:`LOOP_BUSY_TIMEOUT_S`. Airflow's API server
  commits a request's audit log on its event loop (``action_logging``), while a request its thread pool serves may
  hold the lock with its commit waiting for that same loop (the session closes in the route's dependency, which the
  loop runs): the wait is a deadlock that ends only when it gives up, and the whole API server answers nothing
  meanwhile (seen in ``./dev demo``: a trigger's audit log against a task's ``PUT .../rtif``, 60 s, then HTTP 500).
  The request that gave up fails with HTTP 500 and nothing written; the REST client sends a trigger again
  (``plugins/rest.py``), and the failover loop a clear whose tries show it did not clear (``plugins/clearing.py``).
"""

from __future__ import annotations

import asyncio
import sqlite3
from collections.abc import Iterable
from typing import Any

BUSY_TIMEOUT_S = 60.0
"""How long a component waits for SQLite's write lock before its statement fails."""

LOOP_BUSY_TIMEOUT_S = 0.5
"""How long a statement run on a thread that runs an event loop waits for the lock (module rule)."""


def _on_an_event_loop() -> bool:
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return False
    return True


class StackConnection(sqlite3.Connection):
    """A connection whose statements wait for the write lock by the thread that runs them (module rule): pooled
    connections move between threads, so the wait is set per statement, when the thread's kind changes."""

    _busy_ms = int(BUSY_TIMEOUT_S * 1000)

    def _wait_for_this_thread(self) -> None:
        wanted = int((LOOP_BUSY_TIMEOUT_S if _on_an_event_loop() else BUSY_TIMEOUT_S) * 1000)
        if wanted != self._busy_ms:
            sqlite3.Connection.execute(self, f"PRAGMA busy_timeout = {wanted}")
            self._busy_ms = wanted

    def cursor(self, *args: Any, **kwargs: Any) -> Any:  # SQLAlchemy runs every statement through a cursor
        self._wait_for_this_thread()
        return super().cursor(*args, **kwargs)

    def execute(self, sql: str, parameters: Any = (), /) -> sqlite3.Cursor:
        self._wait_for_this_thread()
        return super().execute(sql, parameters)

    def executemany(self, sql: str, parameters: Iterable[Any], /) -> sqlite3.Cursor:
        self._wait_for_this_thread()
        return super().executemany(sql, parameters)


CONNECT_ARGS: dict[str, object] = {"timeout": BUSY_TIMEOUT_S, "factory": StackConnection}
"""Keyword arguments of ``sqlite3.connect`` (and ``aiosqlite.connect``) for every component (Airflow adds
``check_same_thread=False`` to this dict in each process that imports it)."""

IMPORT_PATH = f"{__name__}.CONNECT_ARGS"
"""The value of ``[database] sql_alchemy_connect_args`` and ``sql_alchemy_connect_args_async``."""

"""How the standalone stack's components connect to its SQLite metadata DB (``[database]
sql_alchemy_connect_args``, and ``..._async`` for the API server's async sessions, name :data:`CONNECT_ARGS`).

Rule: SQLite has one write lock per database file, and pysqlite gives up waiting for it after 5 s by default. On a
loaded machine, the API server, scheduler, DAG processor and the task processes that scheduled DAGs start at once
queue for that lock longer than that, and the loser's request fails (HTTP 500 "Database error": a trigger, a task's
start). Every component waits up to :data:`BUSY_TIMEOUT_S` instead, as a server database would queue the writes. The
stack's own REST client waits for an answer as long, plus the request's work (:data:`ANSWER_TIMEOUT_S`): otherwise a
request the API server answers after waiting for the lock is reported lost (the demo's trigger, after 3 tries of
10 s each).
"""

from __future__ import annotations

BUSY_TIMEOUT_S = 60.0
"""How long a component waits for SQLite's write lock before its statement fails."""

ANSWER_TIMEOUT_S = BUSY_TIMEOUT_S + 30.0
"""How long the stack's REST client waits for one answer: the API server's wait for the lock plus the request's work."""

CONNECT_ARGS: dict[str, object] = {"timeout": BUSY_TIMEOUT_S}
"""Keyword arguments of ``sqlite3.connect`` (and ``aiosqlite.connect``) for every component (Airflow adds
``check_same_thread=False`` to this dict in each process that imports it)."""

IMPORT_PATH = f"{__name__}.CONNECT_ARGS"
"""The value of ``[database] sql_alchemy_connect_args`` and ``sql_alchemy_connect_args_async``."""

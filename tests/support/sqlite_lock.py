"""A writer that holds a SQLite database's write lock for a while (the standalone stack's lock tests)."""

from __future__ import annotations

import sqlite3
import threading
import time
from pathlib import Path


def hold_write_lock(db: Path, ready: threading.Event, seconds: float, value: int) -> None:
    """Take ``db``'s write lock (``BEGIN IMMEDIATE``), insert ``value`` into table ``t``, set ``ready``, keep the
    lock ``seconds``, then commit."""
    conn = sqlite3.connect(db, isolation_level=None)
    conn.execute("BEGIN IMMEDIATE")
    conn.execute("INSERT INTO t VALUES (?)", (value,))
    ready.set()
    time.sleep(seconds)
    conn.execute("COMMIT")
    conn.close()

"""The gate of the fault DAGs (``tests/e2e/dags/rf_faults.py``, ``rf_heal.py``, ``rf_heal_checkpointed.py``): a
consumer holds on its first try until the test opens its gate, so the test can break what it is about to read.

Rule: run conf ``gate`` is a directory (empty: no gate). On try 1 the subtask creates it, writes
``<gate>/<subtask>.started`` and waits until ``<gate>/go`` exists, polling every :data:`POLL` s, at most
:data:`TIMEOUT` s (then it goes on); a later try never waits. The DAG files import this in the Airflow processes
that parse and run them: the e2e stacks put the repository root on their ``PYTHONPATH``.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

TIMEOUT = 900.0
POLL = 0.1


def wait_at_gate(context: Any, subtask: str) -> None:
    """Hold ``subtask`` (``step#index``) at the run's gate on its first try (module rule)."""
    gate = str(context.params.get("gate") or "")
    if gate and context.try_number == 1:
        Path(gate).mkdir(parents=True, exist_ok=True)
        (Path(gate) / f"{subtask}.started").touch()
        deadline = time.time() + TIMEOUT
        while not (Path(gate) / "go").exists() and time.time() < deadline:
            time.sleep(POLL)

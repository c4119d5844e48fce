"""What the keyed e2e DAGs' step functions share (``tests/e2e/dags/rf_keyed.py``, ``rf_fused.py``): the slice of the
rows a generating subtask produces, and the injected failure of a subtask's first try.

Rule: subtask ``i`` of ``p`` generates rows ``rows * i // p`` up to ``rows * (i + 1) // p``; a subtask named in the
run's DAG param ``fail`` raises on its first try. The DAG files import this in the Airflow processes that parse and
run them: the local e2e stack puts the repository root on their ``PYTHONPATH``.
"""

from __future__ import annotations

from typing import Any


def row_slice(context: Any, rows: int) -> tuple[int, int]:
    """The rows subtask ``context.index`` of ``context.parallelism`` generates (module rule)."""
    return rows * context.index // context.parallelism, rows * (context.index + 1) // context.parallelism


def fail_first_try(context: Any) -> None:
    """Raise on the first try of a subtask the run's ``fail`` param names (module rule)."""
    if str(context.subtask) in (context.params.get("fail") or []) and context.try_number == 1:
        raise RuntimeError(f"injected failure of {context.subtask} on try 1")

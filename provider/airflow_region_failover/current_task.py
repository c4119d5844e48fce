"""Which Airflow task instance is running in this process right now.

Rule: the running task instance is the ``ti`` of the Task SDK's current context (set while a task runs, and while
the listener announces its START: an operator's ``get_openlineage_facets_on_start`` has no task instance argument
and reads it here); outside a task, or without the Task SDK, it is ``None`` — never an error. One lookup, here,
for every operator that needs it (the step operator's and the publishing operator's lineage).
"""

from __future__ import annotations

from typing import Any


def current_ti() -> Any:
    """The running task instance (Airflow's current context: set while the listener announces START), or
    ``None`` outside a task."""
    try:
        from airflow.sdk import get_current_context

        return get_current_context()["ti"]
    except Exception:
        return None

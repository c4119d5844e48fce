"""The deadline a DAG declares for its runs, as the planner reads it (:mod:`~airflow_region_failover.planning
.deadline`).

Rule: a DAG declares a deadline with Airflow 3's deadline alerts (``DAG(deadline=DeadlineAlert(reference=
DeadlineReference.DAGRUN_QUEUED_AT, interval=timedelta(minutes=30), callback=...))``). An alert measured from the
moment the run is queued with a fixed interval is a budget for the whole run — the interval, in seconds — and the
planner then minimises the probability of missing it. Other alerts (from the logical date, a fixed date or the
average runtime, or a variable interval) do not give a run a fixed budget ahead of its start and are not used; of
several usable alerts the tightest counts.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any


def planning_deadline(dag: Any) -> float | None:
    """The run budget in seconds ``dag``'s deadline alerts declare (module rule), or ``None``."""
    from airflow.sdk.definitions.deadline import DagRunQueuedAtDeadline

    budgets = [alert.interval.total_seconds() for alert in getattr(dag, "deadline", None) or ()
               if isinstance(getattr(alert, "reference", None), DagRunQueuedAtDeadline)
               and isinstance(getattr(alert, "interval", None), timedelta) and alert.interval.total_seconds() > 0]
    return min(budgets, default=None)

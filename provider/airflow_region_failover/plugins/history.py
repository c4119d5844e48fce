"""Failover history: every decision of a run — when, which task failed, why each region restarts, delay, budget.

Rules:
- The history *is* the run's decision log (:mod:`~airflow_region_failover.store.runlog`); nothing else is
  stored, so the UI view, the run note, ``region-failover history DAG_ID RUN_ID`` and the metrics can never
  disagree.
- Publishing (run note, metrics) is best effort: it never raises into a listener or the scheduler.
- Metrics through Airflow's Stats: ``region_failover.restarts`` (+1 per applied decision),
  ``region_failover.restarting_time`` (ms from the first failure to the clear),
  ``region_failover.tasks_restarted`` (+tasks cleared), ``region_failover.results_reused`` (+BLOCKING partitions
  the restarted tasks read without recomputing them).
"""

from __future__ import annotations

import json
import logging
from datetime import datetime, timezone
from typing import Any

from airflow_region_failover.store.runlog import default_run_logs

log = logging.getLogger(__name__)
NOTE_LIMIT = 900


def _stats() -> Any:
    try:
        from airflow.sdk.observability import stats

        return stats
    except ImportError:  # Airflow < 3.3
        from airflow.stats import Stats

        return Stats


def emit_metrics(dag_id: str, decision: dict[str, Any]) -> None:
    """Send the four ``region_failover.*`` metrics for one applied decision; never raises."""
    try:
        stats = _stats()
        tags = {"dag_id": dag_id, "strategy": str(decision.get("strategy"))}
        stats.incr("region_failover.restarts", tags=tags)
        stats.incr("region_failover.tasks_restarted", count=len(decision.get("restart", [])), tags=tags)
        stats.incr("region_failover.results_reused", count=len(decision.get("reused", [])), tags=tags)
        stats.timing("region_failover.restarting_time", 1000.0 * float(decision.get("restarting_time_s", 0.0)),
                     tags=tags)
    except Exception:
        log.warning("region failover: could not emit metrics", exc_info=True)


def _when(ts: float | None) -> str:
    if ts is None:
        return "-"
    return datetime.fromtimestamp(ts, tz=timezone.utc).strftime("%Y-%m-%d %H:%M:%S.%f")[:-3] + "Z"


def describe(decision: dict[str, Any]) -> list[str]:
    """Human-readable lines for one decision (used by the CLI, the note and the UI)."""
    fails = ", ".join(f"{f['task_id']} (try {f['try_number']}, via {f['path']}): {f['error'][:120]}"
                      for f in decision["failures"])
    head = f"#{decision['id']} {decision['status'].upper()} at {_when(decision['created'])} — failed: {fails}"
    lines = [head]
    if decision.get("reason"):
        lines.append(f"  reason: {decision['reason']}")
    for region in decision.get("regions", []):
        lines.append(f"  region {region['region']} [{', '.join(region['steps'])}] restarts: {region['reason']}"
                     f" ({region['cause']})")
    if decision["status"] not in ("exhausted", "cancelled"):
        lines.append(f"  strategy {decision.get('strategy')}, delay {decision.get('delay_s', 0):.3f} s, "
                     f"{len(decision.get('restart', []))} tasks cleared, "
                     f"{len(decision.get('reused', []))} committed partitions reused")
    if decision.get("applied_at"):
        lines.append(f"  applied at {_when(decision['applied_at'])} "
                     f"({decision.get('restarting_time_s', 0):.3f} s after the failure)")
    lines.append(f"  budget: {json.dumps(decision.get('budget', {}), sort_keys=True)}")
    return lines


def format_history(doc: dict[str, Any]) -> str:
    """The whole history of a run as text."""
    decisions = doc.get("decisions", [])
    if not decisions:
        return f"{doc['dag_id']} / {doc['run_id']}: no failover decision recorded"
    lines = [f"{doc['dag_id']} / {doc['run_id']}: {len(decisions)} failover decision(s)"]
    for decision in decisions:
        lines.extend(describe(decision))
    return "\n".join(lines)


def note_text(doc: dict[str, Any]) -> str:
    """A short Markdown run note: the latest decisions first, within the note's size limit."""
    parts = ["**Region failover**"]
    for decision in reversed(doc.get("decisions", [])):
        parts.append("\n".join(describe(decision)))
        if sum(len(p) for p in parts) > NOTE_LIMIT:
            parts[-1] = "… (see `region-failover history`)"
            break
    return "\n\n".join(parts)[: NOTE_LIMIT + 200]


def publish_note(api: Any, doc: dict[str, Any]) -> None:
    """Write the run note through the REST API; never raises."""
    try:
        api.set_run_note(doc["dag_id"], doc["run_id"], note_text(doc))
    except Exception:
        log.warning("region failover: could not set the run note", exc_info=True)


def load_history(dag_id: str, run_id: str) -> dict[str, Any]:
    """The run's decision log from the configured store (``[region_failover]`` + its aws connection)."""
    return default_run_logs().read(dag_id, run_id)

"""Failover history: every decision of a run — when, which task failed, why each region restarts, delay, budget.

Rules:
- The history *is* the run's decision log (:mod:`~airflow_region_failover.decisions.storage`); nothing else is
  stored, so the UI view, the run note, ``region-failover history DAG_ID RUN_ID`` and the metrics can never
  disagree.
- Publishing (run note, metrics) is best effort: it never raises into a listener or the scheduler.
- The run note keeps what people wrote: the provider owns only the part from the line starting with
  :data:`NOTE_HEADING` to the end, and rewrites only that part (Airflow limits a note to 1,000 characters).
- Nothing a person reads carries a secret: an error text is masked with Airflow's secrets maskers (:func:`masked`)
  before it is stored in a log, a note or the view.
- Metrics through Airflow's Stats (:mod:`~airflow_region_failover.observability.metrics`,
  docs/operator/observability.md): per applied decision ``region_failover.restarts``, ``.restarting_time``,
  ``.tasks_restarted``, ``.results_reused``; per decision that ends the run (``exhausted``, ``not-recoverable``)
  ``region_failover.runs_ended``, tagged with the failure's exception class.
- A failure shows its exception class (and message signature) where it was recorded.
"""

from __future__ import annotations

import importlib
import json
import logging
from datetime import datetime, timezone
from typing import Any

from airflow_region_failover.decisions.storage import default_run_logs
from airflow_region_failover.failover.run_log import Decision, DecisionStatus, FailureRecord, RunLog
from airflow_region_failover.observability import metrics

log = logging.getLogger(__name__)
NOTE_LIMIT = 1000
NOTE_HEADING = "**Region failover**"


def masked(text: str) -> str:
    """``text`` with every secret Airflow's secrets maskers know replaced by ``***`` (the Task SDK's in a worker,
    the core's in a scheduler; each process registers the secrets it read)."""
    for module in ("airflow.sdk._shared.secrets_masker", "airflow._shared.secrets_masker"):
        try:
            redact = importlib.import_module(module).redact
        except (ImportError, AttributeError):
            continue
        text = str(redact(text))
    return text


def emit_metrics(dag_id: str, decision: Decision) -> None:
    """Send the four decision metrics for one applied decision (:func:`~..observability.metrics.emit_decision`);
    never raises."""
    metrics.emit_decision(dag_id, decision)


def emit_ended(dag_id: str, decision: Decision) -> None:
    """Send ``runs_ended`` for a decision that ends the run (:func:`~..observability.metrics.emit_ended`); never
    raises."""
    metrics.emit_ended(dag_id, decision)


def _when(ts: float | None) -> str:
    if ts is None:
        return "-"
    return datetime.fromtimestamp(ts, tz=timezone.utc).strftime("%Y-%m-%d %H:%M:%S.%f")[:-3] + "Z"


def describe(decision: Decision) -> list[str]:
    """Human-readable lines for one decision (used by the CLI, the note and the UI)."""
    fails = ", ".join(f"{f.task_id} (try {f.try_number}, via {f.path}{_class_of(f)}): {f.error[:120]}"
                      for f in decision.failures)
    lines = [f"#{decision.id} {decision.status.value.upper()} at {_when(decision.created)} — failed: {fails}"]
    if decision.reason:
        lines.append(f"  reason: {decision.reason}")
    for region in decision.regions:
        lines.append(f"  region {region.region} [{', '.join(region.steps)}] restarts: {region.reason} ({region.cause})")
    if decision.status not in (DecisionStatus.EXHAUSTED, DecisionStatus.NOT_RECOVERABLE, DecisionStatus.CANCELLED,
                               DecisionStatus.ABANDONED):
        lines.append(f"  strategy {decision.strategy}, delay {decision.delay_s:.3f} s, {len(decision.restart)} tasks "
                     f"cleared, {len(decision.reused)} committed partitions reused")
    if decision.applied_at:
        lines.append(f"  applied at {_when(decision.applied_at)} ({decision.restarting_time_s or 0:.3f} s after the "
                     "failure)")
    lines.append(f"  budget: {json.dumps(dict(decision.budget), sort_keys=True)}")
    return lines


def _class_of(failure: FailureRecord) -> str:
    """``, <Class> #<signature>`` of a failure whose exception was recorded, else nothing."""
    found = failure.error_class
    return "" if found is None else f", {found.name} #{found.signature}"


def format_history(doc: RunLog) -> str:
    """The whole history of a run as text."""
    if not doc.decisions:
        return f"{doc.dag_id} / {doc.run_id}: no failover decision recorded"
    lines = [f"{doc.dag_id} / {doc.run_id}: {len(doc.decisions)} failover decision(s)"]
    for decision in doc.decisions:
        lines.extend(describe(decision))
    return "\n".join(lines)


def note_text(doc: RunLog, limit: int = NOTE_LIMIT) -> str:
    """The provider's part of the run note: the latest decisions first, within ``limit`` characters."""
    parts = [NOTE_HEADING]
    more = "… (see the run's Failover tab or `region-failover history`)"
    for decision in reversed(doc.decisions):
        text = "\n".join(describe(decision))
        if sum(len(p) + 2 for p in parts) + len(text) + len(more) > limit:
            parts.append(more)
            break
        parts.append(text)
    return "\n\n".join(parts)[:limit]


def merged_note(current: str | None, doc: RunLog) -> str:
    """The run note with the provider's part replaced and everything a person wrote before it kept."""
    mine = (current or "").split(NOTE_HEADING, 1)[0].rstrip()
    room = NOTE_LIMIT - len(mine) - 2
    return f"{mine}\n\n{note_text(doc, room)}" if mine else note_text(doc)


def publish_note(api: Any, doc: RunLog) -> None:
    """Write the provider's part of the run note through the REST API; never raises."""
    try:
        current = api.dag_run(doc.dag_id, doc.run_id).get("note")
        api.set_run_note(doc.dag_id, doc.run_id, merged_note(current, doc))
    except Exception:
        log.warning("region failover: could not set the run note", exc_info=True)


def load_history(dag_id: str, run_id: str) -> RunLog:
    """The run's decision log from the configured store (``[region_failover]`` + its aws connection)."""
    return default_run_logs().read(dag_id, run_id)

"""The ``region_failover.*`` metrics, sent through Airflow's Stats (``[metrics]``: StatsD, Datadog or OTel).

Rules — each value is sent where it is known (docs/operator/observability.md defines every name, type and tag):

* per applied decision, by the process that applied it (a scheduler's watcher, :func:`emit_decision`):
  ``restarts`` (+1), ``restarting_time`` (ms from the first failure to the clear), ``tasks_restarted`` (+task
  instances cleared), ``results_reused`` (+BLOCKING partitions the restarted tasks read without them being
  re-produced); tags ``dag_id``, ``strategy``;
* per decision that ends the run, by the process that recorded it (:func:`emit_ended`): ``runs_ended`` (+1);
  tags ``dag_id``, ``status`` (``exhausted`` or ``not-recoverable``), ``error_class`` (the simple name of the
  first failure's exception class, ``unknown`` when it was not recorded);
* per try started by one of our clears, by its worker when it succeeds (:func:`emit_task`, from the task's
  ledger, :mod:`~airflow_region_failover.spark.ledger`): ``results_kept`` (+BLOCKING partitions kept instead of
  recomputed, 0 included), ``recomputed_bytes`` (+bytes of the BLOCKING partitions it wrote),
  ``reused_bytes`` (+bytes of committed partitions it did not recompute: what it read of partitions the restart
  reused, plus the partitions it kept); tags ``dag_id``, ``strategy``, ``step``, ``reason`` (its region's).
  A first try, Airflow's retry and a person's clear send none of them;
* per try of a checkpointed subtask, by its worker as it happens (:func:`checkpoint_listener`, whatever started the
  try): when it starts, ``checkpoint_epochs_skipped`` (+epochs it did not recompute: 0 when it started over) and
  ``checkpoint_resumes`` (+1 when it resumed); per checkpoint completed, ``checkpoints`` (+1),
  ``checkpoint_duration`` (ms, timer) and ``checkpoint_uploaded_bytes`` (state bytes uploaded, timer-style
  histogram); tags ``dag_id``, ``step`` (the chain's tail);
* Stats a process never initialised (the Task SDK's in a scheduler or a stand-alone watcher) are initialised from
  ``[metrics]`` on first use; sending never raises into the caller (best effort, logged).
"""

from __future__ import annotations

import logging
from typing import Any

from airflow_region_failover.checkpoint.runner import Listener
from airflow_region_failover.failover.run_log import Decision
from airflow_region_failover.spark.ledger import TaskLedger
from airflow_region_failover.store.checkpoint_manifest import CheckpointManifest, TryRecord

log = logging.getLogger(__name__)
PREFIX = "region_failover"


def stats() -> Any:
    """Airflow's Stats module of this process, initialised from ``[metrics]`` if nobody did (module rule)."""
    try:
        from airflow.sdk._shared.observability.metrics import stats as shared
        from airflow.sdk.observability import stats as sdk_stats
    except ImportError:  # Airflow < 3.3
        from airflow.stats import Stats

        return Stats
    if getattr(shared, "_factory", "set") is None:
        from airflow.sdk.configuration import conf
        from airflow.sdk.observability.metrics.stats_utils import get_stats_factory

        sdk_stats.initialize(factory=get_stats_factory(),
                             export_legacy_names=conf.getboolean("metrics", "legacy_names_on", fallback=False))
    return sdk_stats


def emit_decision(dag_id: str, decision: Decision) -> None:
    """Send the four decision metrics of one applied decision; never raises."""
    try:
        client = stats()
        tags = {"dag_id": dag_id, "strategy": decision.strategy}
        client.incr(f"{PREFIX}.restarts", tags=tags)
        client.incr(f"{PREFIX}.tasks_restarted", count=len(decision.restart), tags=tags)
        client.incr(f"{PREFIX}.results_reused", count=len(decision.reused), tags=tags)
        client.timing(f"{PREFIX}.restarting_time", 1000.0 * float(decision.restarting_time_s or 0.0), tags=tags)
    except Exception:
        log.warning("region failover: could not emit metrics", exc_info=True)


def ended_tags(dag_id: str, decision: Decision) -> dict[str, str]:
    """The tags of ``runs_ended`` for ``decision`` (module rule)."""
    found = decision.failures[0].error_class if decision.failures else None
    return {"dag_id": dag_id, "status": decision.status.value,
            "error_class": found.name if found is not None else "unknown"}


def emit_ended(dag_id: str, decision: Decision) -> None:
    """Send ``runs_ended`` for a decision that ends the run; never raises."""
    try:
        stats().incr(f"{PREFIX}.runs_ended", tags=ended_tags(dag_id, decision))
    except Exception:
        log.warning("region failover: could not emit metrics", exc_info=True)


def task_values(ledger: TaskLedger) -> dict[str, int] | None:
    """``results_kept``, ``recomputed_bytes`` and ``reused_bytes`` of one task's ledger, or ``None`` when no
    clear of ours started the try (module rule)."""
    if ledger.restart is None:
        return None
    outputs = ledger.outputs.values()
    return {
        "results_kept": sum(1 for o in outputs if o.kept),
        "recomputed_bytes": sum(o.bytes or 0 for o in outputs if not o.kept),
        "reused_bytes": sum(o.bytes or 0 for o in outputs if o.kept)
        + sum(i.bytes for i in ledger.inputs.values() if i.reused),
    }


def emit_task(dag_id: str, step: str, ledger: TaskLedger) -> dict[str, int] | None:
    """Send the task metrics of a try started by one of our clears (none otherwise); returns what was sent."""
    try:
        values = task_values(ledger)
        if values is None or ledger.restart is None:
            return None
        tags = {"dag_id": dag_id, "strategy": ledger.restart.strategy, "step": step, "reason": ledger.restart.reason}
        client = stats()
        for name, value in values.items():
            client.incr(f"{PREFIX}.{name}", count=value, tags=tags)
        return values
    except Exception:
        log.warning("region failover: could not emit task metrics", exc_info=True)
        return None


def checkpoint_values(event: CheckpointManifest | TryRecord) -> dict[str, float]:
    """The checkpoint metrics of one event of a checkpointed try (module rule)."""
    if isinstance(event, TryRecord):
        return {"checkpoint_epochs_skipped": event.skipped, "checkpoint_resumes": int(event.resumed_seq > 0)}
    return {"checkpoints": 1, "checkpoint_duration": event.duration_ms,
            "checkpoint_uploaded_bytes": event.uploaded_bytes}


def checkpoint_listener(dag_id: str, step: str) -> Listener:
    """A listener of a checkpointed try that sends its metrics as they happen (never raises)."""

    def send(event: CheckpointManifest | TryRecord) -> None:
        try:
            client, tags = stats(), {"dag_id": dag_id, "step": step}
            for name, value in checkpoint_values(event).items():
                if name in ("checkpoint_duration", "checkpoint_uploaded_bytes"):
                    client.timing(f"{PREFIX}.{name}", value, tags=tags)
                else:
                    client.incr(f"{PREFIX}.{name}", count=int(value), tags=tags)
        except Exception:
            log.warning("region failover: could not emit checkpoint metrics", exc_info=True)

    return send

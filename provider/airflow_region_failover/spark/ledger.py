"""What one task read and wrote, and which restart started it — the facts its lineage
(:mod:`~airflow_region_failover.observability.lineage`) and its metrics
(:mod:`~airflow_region_failover.observability.metrics`) report, kept in the task's summary (its return value) so
both say the same.

Rules:

* ``inputs``: every BLOCKING partition the task read — or, when it kept its outputs, would have read — at the
  committed version its producer's current try published: ``attempt``, ``bytes`` and ``objects`` of what this
  subtask reads of it (over a keyed edge only its subpartitions), and ``reused``: this try was started by a
  restart that did not re-produce the partition (it is in that decision's ``reused`` set);
* ``outputs``: every BLOCKING partition the task published (a sink result too): its committed ``attempt``,
  ``rows``, ``bytes``, ``objects`` and ``checksum``, and ``kept``: committed by an earlier try and kept
  (:mod:`.reuse`), not recomputed. PIPELINED partitions are attempt-scoped scratch and appear in neither;
* ``restart``: the applied decision whose clear started this try (``decision`` id, ``strategy``, this task's
  region ``reason``), or absent when none did (a first try, Airflow's retry, a person's clear).
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from typing import Any

from airflow_region_failover.decisions.storage import RunLogs, default_run_logs
from airflow_region_failover.failover.handler import restarted_by
from airflow_region_failover.failover.run_log import Decision
from airflow_region_failover.graph.ids import SubtaskId
from airflow_region_failover.graph.model import Edge, Exchange, JobGraph
from airflow_region_failover.graph.subtasks import read_key_groups
from airflow_region_failover.spark.exchange import PartitionRef
from airflow_region_failover.spark.store_io import StoreIO
from airflow_region_failover.store.manifest import Manifest

log = logging.getLogger(__name__)
BLOCKING = Exchange.BLOCKING.value


def restart_of(ti: Any, logs: RunLogs | None = None) -> Decision | None:
    """The applied decision whose clear started this try of ``ti``, or ``None`` (also when the run's decision log
    cannot be read: then nothing is kept and the try is reported as not restarted)."""
    try_number = int(getattr(ti, "try_number", 1) or 1)
    if try_number <= 1:
        return None
    try:
        doc = (logs or default_run_logs()).read(ti.dag_id, ti.run_id)
    except Exception:
        log.warning("region failover: could not read the decision log; %s recomputes", ti.task_id, exc_info=True)
        return None
    return restarted_by(doc, ti.task_id, try_number)


def ledger(io: StoreIO, graph: JobGraph, head: SubtaskId, refs: Mapping[Edge, Sequence[PartitionRef]],
           published: Sequence[PartitionRef], task_id: str, restart: Decision | None,
           kept: bool = False) -> dict[str, Any]:
    """The summary entries ``inputs``, ``outputs`` and ``restart`` of a task whose chain head is ``head`` (module
    rule); ``published``: the refs it published, ``kept``: they were kept, not written by this try."""
    reused = set(restart.reused) if restart is not None else set()
    entry: dict[str, Any] = {"inputs": _inputs(io, graph, head, refs, reused),
                             "outputs": _outputs(io, published, kept)}
    if restart is not None:
        entry["restart"] = {"decision": restart.id, "strategy": restart.strategy,
                            "reason": restart.reasons.get(task_id, "")}
    return entry


def _inputs(io: StoreIO, graph: JobGraph, head: SubtaskId, refs: Mapping[Edge, Sequence[PartitionRef]],
            reused: set[str]) -> dict[str, dict[str, Any]]:
    inputs: dict[str, dict[str, Any]] = {}
    for edge, edge_refs in refs.items():
        groups = read_key_groups(graph, edge, head.index)
        for ref in edge_refs:
            manifest = io.seen.get(ref.partition)
            if ref.exchange != BLOCKING or manifest is None or manifest.attempt != ref.attempt:
                continue
            selection = manifest.select(groups, edge.partition_by, edge.max_parallelism)
            inputs[str(ref.partition)] = {"attempt": ref.attempt, "bytes": selection.bytes,
                                          "objects": len(selection.objects), "reused": str(ref.partition) in reused}
    return inputs


def _outputs(io: StoreIO, published: Sequence[PartitionRef], kept: bool) -> dict[str, dict[str, Any]]:
    outputs: dict[str, dict[str, Any]] = {}
    for ref in published:
        if ref.exchange != BLOCKING:
            continue
        manifest = _committed(io, ref)
        if manifest is None:
            log.warning("region failover: %s attempt %d has no readable manifest; its lineage has no sizes",
                        ref.partition, ref.attempt)
            outputs[str(ref.partition)] = {"attempt": ref.attempt, "rows": ref.rows, "kept": kept}
            continue
        outputs[str(ref.partition)] = {"attempt": manifest.attempt, "rows": manifest.row_count,
                                       "bytes": manifest.total_bytes, "objects": len(manifest.objects),
                                       "checksum": manifest.content_checksum, "kept": kept}
    return outputs


def _committed(io: StoreIO, ref: PartitionRef) -> Manifest | None:
    """The manifest of ``ref``'s attempt: the one this process wrote or looked up, else (a script step commits in
    its own application) the store's current one."""
    manifest = io.seen.get(ref.partition)
    if manifest is None or manifest.attempt != ref.attempt:
        manifest = io.committed(ref.dag_id, ref.run_id, ref.partition)
    return manifest if manifest is not None and manifest.attempt == ref.attempt else None

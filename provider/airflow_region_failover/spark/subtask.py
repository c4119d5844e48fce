"""Running one subtask, for function and script steps alike: resolve inputs, keep or compute, publish outputs.

Rule (see :mod:`.exchange` for the data contract): a subtask reads exactly the partitions its producers' current
tries published (XComs ``partition:<result>``), looks up each BLOCKING input's committed version once (which is
what its manifests record as the inputs it was computed from), and then either keeps its committed outputs
(:mod:`.reuse`) or computes them with :func:`~.compute.compute` — in this process for a function step, in a
spark-submitted application for a script step (:mod:`.submit`), the same function on both sides. Outputs are
written under this try's attempt number (``ti.try_number``) and published as XComs; BLOCKING outputs are
committed store versions, PIPELINED outputs attempt-scoped scratch versions of the same store.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from typing import Any

from airflow_region_failover.graph.ids import SubtaskId
from airflow_region_failover.graph.model import Edge, JobGraph
from airflow_region_failover.graph.subtasks import consumed_partitions
from airflow_region_failover.job import REUSE_PARAM, JobRuntime
from airflow_region_failover.naming import JOB_PARAM, task_id_of, xcom_key
from airflow_region_failover.spark.compute import Refs, compute, current_inputs, input_versions
from airflow_region_failover.spark.context import StepContext, input_name
from airflow_region_failover.spark.exchange import PartitionRef
from airflow_region_failover.spark.ledger import ledger, restart_of
from airflow_region_failover.spark.reuse import kept_outputs
from airflow_region_failover.spark.session import get_session, resolve_target
from airflow_region_failover.spark.store_io import StoreIO, open_store_io
from airflow_region_failover.spark.submit import submit_script

log = logging.getLogger(__name__)


def pull_refs(ti: Any, graph: JobGraph, subtask: SubtaskId,
              task_id: Callable[[SubtaskId], str] = task_id_of) -> dict[Edge, tuple[PartitionRef, ...]]:
    """For every input edge, the refs its producers' current tries published (:class:`InputUnavailable` if
    one is missing); ``task_id`` names the producer subtasks' tasks (a chain's task for a chained producer)."""
    refs: dict[Edge, tuple[PartitionRef, ...]] = {}
    for edge, partitions in consumed_partitions(graph, subtask).items():
        refs[edge] = tuple(
            PartitionRef.from_json(
                ti.xcom_pull(task_ids=task_id(SubtaskId(edge.source, p.index)), key=xcom_key(p.result)),
                partition=p,
            )
            for p in partitions
        )
    return refs


def step_context(graph: JobGraph, subtask: SubtaskId, refs: Refs, context: Mapping[str, Any]) -> StepContext:
    """The :class:`StepContext` handed to the step function."""
    ti = context.get("ti")
    step = graph.step(subtask.step)
    params = {k: v for k, v in dict(context.get("params") or {}).items() if k not in (JOB_PARAM, REUSE_PARAM)}
    return StepContext(
        subtask=subtask, parallelism=step.parallelism, deterministic=step.deterministic,
        partitions={input_name(e): tuple(r.partition for r in rs) for e, rs in refs.items()},
        dag_id=getattr(ti, "dag_id", ""), run_id=getattr(ti, "run_id", ""),
        try_number=int(getattr(ti, "try_number", 1) or 1), params=params, airflow=context,
    )


def publish(ti: Any, ref: PartitionRef) -> None:
    """Publish where this task's partition of ``ref.result`` lives (the XCom its consumers pull)."""
    ti.xcom_push(key=xcom_key(ref.result), value=ref.to_json())


def run_subtask(runtime: JobRuntime, subtask: SubtaskId, context: Mapping[str, Any]) -> dict[str, Any]:
    """Run ``subtask`` of ``runtime`` inside an Airflow task (``context`` is the task context); returns the
    task's summary (rows per result; ``kept`` when the committed outputs were kept)."""
    ti = context["ti"]
    graph, impl = runtime.graph, runtime.impl(subtask.step)
    refs = pull_refs(ti, graph, subtask, runtime.spec.names.task_id)
    sctx = step_context(graph, subtask, refs, context)
    io = open_store_io()
    current = current_inputs(io, refs)
    opted_out = not impl.reuse or (context.get("params") or {}).get(REUSE_PARAM) is False
    restart = restart_of(ti)
    reason = restart.reasons.get(ti.task_id) if restart is not None else None
    kept = kept_outputs(io, graph, subtask, refs, input_versions(current, graph, subtask, refs), sctx,
                        runtime.spec.config.failover_strategy, reason, impl.fingerprint, opted_out)
    if kept is not None:
        for ref in kept:
            publish(ti, ref)
            log.info("kept BLOCKING partition %s (attempt %d, %d rows): its inputs are byte-identical to the ones "
                     "it was computed from, so try %d does not recompute it", ref.partition, ref.attempt, ref.rows,
                     sctx.try_number)
        return {"subtask": str(subtask), "attempt": sctx.try_number, "rows": {r.result: r.rows for r in kept},
                "kept": {r.result: r.attempt for r in kept}, "read": reads_of(io),
                **ledger(io, graph, subtask, refs, kept, ti.task_id, restart, kept=True)}
    if impl.script is not None:
        written = submit_script(impl, graph, subtask, refs, sctx, io)
    else:
        assert impl.fn is not None
        written = compute(get_session(resolve_target(impl.spark_conn_id)), io, graph, subtask, refs, sctx, impl.fn,
                          impl.fingerprint, current)
    for ref in written:
        publish(ti, ref)
        log.info("wrote %s partition %s (attempt %d, %d rows)", ref.exchange, ref.partition, ref.attempt, ref.rows)
    return {"subtask": str(subtask), "attempt": sctx.try_number, "rows": {r.result: r.rows for r in written},
            "read": reads_of(io), **ledger(io, graph, subtask, refs, written, ti.task_id, restart)}


def reads_of(io: StoreIO) -> dict[str, int]:
    """What this task read from the store (the store's counters, :class:`~.store_io.ReadCounter`), logged."""
    reads = {"bytes": io.reads.bytes, "objects": io.reads.objects, "partition_bytes": io.reads.partition_bytes}
    if reads["partition_bytes"]:
        log.info("read %d of the %d bytes of its input partitions (%d objects)", reads["bytes"],
                 reads["partition_bytes"], reads["objects"])
    return reads

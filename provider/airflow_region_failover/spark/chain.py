"""Running one chain subtask: several chained steps' subtask ``i`` in one task and one Spark session.

Rule (:mod:`~airflow_region_failover.graph.chains` says which steps chain): the chain's head reads its inputs
from the store exactly as a single subtask does (the refs its producers' current tries published, BLOCKING ones
at their committed version); then each step function is called in order, in the same Spark session, and the
DataFrame a step returns is the next step's input ``inputs[input_name(edge)]`` — lazily, nothing of the
chain's interior is written or read through the store. Each step function gets a :class:`StepContext` of its own
step (its subtask, parallelism and partitions: an interior input names the partition it would have been). Only
the tail's outputs are written, under this try's attempt, recording the head's BLOCKING input versions and the
chain's code fingerprint (every member's), and published as the chain task's XComs.

A chain never keeps a committed result on a restart (:mod:`.reuse` rule 2: its interior is PIPELINED, so it is
not a BLOCKING-only step); a chain of one step is an ordinary subtask (:func:`~.subtask.run_subtask`). Before
running, the task logs once, for each PIPELINED input that is not chained, why not and that it reads the
producer's scratch partition from the store.
"""

from __future__ import annotations

import hashlib
import logging
from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from airflow_region_failover.exceptions import GraphError
from airflow_region_failover.graph.ids import SubtaskId
from airflow_region_failover.graph.model import JobGraph
from airflow_region_failover.graph.subtasks import consumed_partitions
from airflow_region_failover.job import JobRuntime, JobSpec, StepFunction, StepImpl
from airflow_region_failover.spark.compute import Refs, current_inputs, input_versions, read_inputs, write_outputs
from airflow_region_failover.spark.context import StepContext, input_name
from airflow_region_failover.spark.exchange import PartitionRef, match_outputs
from airflow_region_failover.spark.ledger import ledger, restart_of
from airflow_region_failover.spark.session import get_session, resolve_target
from airflow_region_failover.spark.store_io import StoreIO, open_store_io
from airflow_region_failover.spark.subtask import publish, pull_refs, reads_of, run_subtask, step_context
from airflow_region_failover.store.manifest import Manifest

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

log = logging.getLogger(__name__)


def run_chain(runtime: JobRuntime, members: Sequence[SubtaskId], context: Mapping[str, Any]) -> dict[str, Any]:
    """Run chain subtask ``members`` (head first) inside an Airflow task; returns the task's summary."""
    log_scratch_inputs(runtime.spec, members[0])
    if len(members) == 1:
        return run_subtask(runtime, members[0], context)
    ti = context["ti"]
    graph = runtime.graph
    impls = [runtime.impl(m.step) for m in members]
    fns = [_function(impl) for impl in impls]
    refs = pull_refs(ti, graph, members[0], runtime.spec.names.task_id)
    contexts = chain_contexts(graph, members, refs, context)
    io = open_store_io()
    spark = get_session(resolve_target(impls[0].spark_conn_id))
    written = compute_chain(spark, io, graph, members, refs, contexts, fns, chain_fingerprint(impls))
    for ref in written:
        publish(ti, ref)
        log.info("wrote %s partition %s (attempt %d, %d rows)", ref.exchange, ref.partition, ref.attempt, ref.rows)
    return {"subtask": str(members[-1]), "chain": [str(m) for m in members], "attempt": contexts[-1].try_number,
            "rows": {r.result: r.rows for r in written}, "read": reads_of(io),
            **ledger(io, graph, members[0], refs, written, ti.task_id, restart_of(ti))}


def log_scratch_inputs(spec: JobSpec, head: SubtaskId) -> None:
    """Log, once per edge, why each PIPELINED input of ``head`` is not chained (it is read from the store)."""
    for edge in spec.graph.inputs(head.step):
        reason = spec.chains.why_not(edge)
        if reason is not None:
            log.info("PIPELINED %s -> %s is not chained (%s): %s reads %s's scratch partitions of %r from the "
                     "store", edge.source, edge.target, reason, head, edge.source, edge.result)


def chain_contexts(graph: JobGraph, members: Sequence[SubtaskId], refs: Refs,
                   context: Mapping[str, Any]) -> list[StepContext]:
    """Each member's :class:`StepContext`: the head's from its refs, the others' from their interior input."""
    head = step_context(graph, members[0], refs, context)
    contexts = [head]
    for member in members[1:]:
        step = graph.step(member.step)
        partitions = {input_name(e): ps for e, ps in consumed_partitions(graph, member).items()}
        contexts.append(replace(head, subtask=member, parallelism=step.parallelism,
                                deterministic=step.deterministic, partitions=partitions))
    return contexts


def compute_chain(spark: SparkSession, io: StoreIO, graph: JobGraph, members: Sequence[SubtaskId], refs: Refs,
                  contexts: Sequence[StepContext], fns: Sequence[StepFunction], code: str,
                  current: Mapping[PartitionRef, Manifest] | None = None) -> tuple[PartitionRef, ...]:
    """Read the head's inputs, call every member's function in order passing each returned DataFrame on, and
    write the tail's outputs of this try (module rule); returns the refs written (rows filled in)."""
    current = current_inputs(io, refs) if current is None else current
    versions = input_versions(current, graph, members[0], refs)
    inputs = read_inputs(spark, io, refs, current, graph, members[0])
    for member, sctx, fn in zip(members[:-1], contexts, fns, strict=False):
        frames = match_outputs(graph, member.step, fn(spark, inputs, sctx))
        (result, frame), = frames.items()  # a chained step has exactly one result, read by the next member
        inputs = {input_name(graph.result(result).consumers[0]): frame}
    return write_outputs(io, graph, members[-1], fns[-1](spark, inputs, contexts[-1]), contexts[-1], versions, code)


def chain_fingerprint(impls: Sequence[StepImpl]) -> str:
    """The code fingerprint of a chain: SHA-256 over its members' fingerprints, in order."""
    return hashlib.sha256("\n".join(impl.fingerprint for impl in impls).encode()).hexdigest()


def _function(impl: StepImpl) -> StepFunction:
    if impl.fn is None:
        raise GraphError(f"step {impl.step_id!r} is a script step and cannot run in a chain; re-render the DAG "
                         "with this provider version (script steps are never chained)")
    return impl.fn

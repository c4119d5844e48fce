"""Running one subtask: pull input locations, read inputs into Spark, call the step, write and publish outputs.

Rule (see :mod:`.exchange` for the data contract): inputs are read from exactly the locations the producers'
current tries published; outputs are written under this try's attempt number (``ti.try_number``) and published
as XComs ``partition:<result>``; BLOCKING outputs are committed store versions, PIPELINED outputs are
attempt-scoped scratch versions of the same store. Script steps are spark-submitted (:mod:`.submit`).
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from airflow_region_failover.graph.ids import PartitionId, SubtaskId
from airflow_region_failover.graph.model import Edge, JobGraph
from airflow_region_failover.graph.subtasks import consumed_partitions
from airflow_region_failover.spark.context import StepContext, input_name
from airflow_region_failover.spark.exchange import InputUnavailable, PartitionRef, match_outputs, output_results

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

    from airflow_region_failover.authoring import JobRuntime

log = logging.getLogger(__name__)
_HIDDEN_PARAMS = ("region_failover_job",)


def pull_refs(ti: Any, graph: JobGraph, subtask: SubtaskId) -> dict[Edge, tuple[PartitionRef, ...]]:
    """For every input edge, the refs its producers' current tries published (:class:`InputUnavailable` if
    one is missing)."""
    from airflow_region_failover.airflow.operator import xcom_key
    from airflow_region_failover.airflow.render import task_id_of

    refs: dict[Edge, tuple[PartitionRef, ...]] = {}
    for edge, partitions in consumed_partitions(graph, subtask).items():
        refs[edge] = tuple(
            PartitionRef.from_json(
                ti.xcom_pull(task_ids=task_id_of(SubtaskId(edge.source, p.index)), key=xcom_key(p.result)),
                partition=p,
            )
            for p in partitions
        )
    return refs


def step_context(graph: JobGraph, subtask: SubtaskId, refs: Mapping[Edge, Sequence[PartitionRef]],
                 context: Mapping[str, Any]) -> StepContext:
    """The :class:`StepContext` handed to the step function."""
    ti = context.get("ti")
    step = graph.step(subtask.step)
    params = {k: v for k, v in dict(context.get("params") or {}).items() if k not in _HIDDEN_PARAMS}
    return StepContext(
        subtask=subtask, parallelism=step.parallelism, deterministic=step.deterministic,
        partitions={input_name(e): tuple(r.partition for r in rs) for e, rs in refs.items()},
        dag_id=getattr(ti, "dag_id", ""), run_id=getattr(ti, "run_id", ""),
        try_number=int(getattr(ti, "try_number", 1) or 1), params=params, airflow=context,
    )


def read_inputs(spark: SparkSession, io: Any, refs: Mapping[Edge, Sequence[PartitionRef]],
                current: Mapping[PartitionRef, Any] | None = None) -> dict[str, DataFrame]:
    """One DataFrame per input: the union (by column name) of the partitions read over that edge (``current``:
    manifests already looked up by :func:`current_inputs`, read without a second lookup)."""
    inputs: dict[str, DataFrame] = {}
    for edge, edge_refs in refs.items():
        frames = [_read(spark, io, ref, (current or {}).get(ref)) for ref in edge_refs]
        inputs[input_name(edge)] = functools.reduce(lambda a, b: a.unionByName(b), frames)
    return inputs


def current_inputs(io: Any, refs: Mapping[Edge, Sequence[PartitionRef]]) -> dict[PartitionRef, Any]:
    """The current manifest of every BLOCKING partition this try reads, checked to be the published attempt
    (:class:`InputUnavailable` naming a missing or superseded one)."""
    from airflow_region_failover.store.errors import NotAvailable

    current = {}
    for ref in (r for rs in refs.values() for r in rs if r.exchange == "BLOCKING"):
        try:
            current[ref] = io.current(ref)
        except NotAvailable as exc:
            raise InputUnavailable(ref.partition, str(exc)) from exc
    return current


def input_versions(current: Mapping[PartitionRef, Any]) -> tuple[Any, ...]:
    """The versions of the inputs in ``current`` as a manifest records them (sorted by partition)."""
    return tuple(sorted((m.version() for m in current.values()), key=lambda v: v.partition))


def _read(spark: SparkSession, io: Any, ref: PartitionRef, current: Any = None) -> DataFrame:
    from airflow_region_failover.store.errors import NotAvailable

    try:
        return io.read(spark, ref, current)
    except NotAvailable as exc:
        raise InputUnavailable(ref.partition, str(exc)) from exc


def write_outputs(io: Any, graph: JobGraph, subtask: SubtaskId, returned: object, sctx: StepContext,
                  ti: Any, inputs: tuple[Any, ...] = ()) -> dict[str, int]:
    """Write every output partition of this try (recording the BLOCKING ``inputs`` versions it was computed from)
    and publish its ref; returns rows written per result."""
    frames = match_outputs(graph, subtask.step, returned)
    exchanges = {r.id: r.exchange.value for r in output_results(graph, subtask.step)}
    rows: dict[str, int] = {}
    for result, frame in frames.items():
        ref = PartitionRef(result, subtask.index, exchanges[result], sctx.dag_id, sctx.run_id, sctx.try_number)
        written = io.write(frame, ref, inputs)
        publish(ti, written)
        rows[result] = written.rows
        log.info("wrote %s partition %s (attempt %d, %d rows)", written.exchange, written.partition,
                 written.attempt, written.rows)
    return rows


def publish(ti: Any, ref: PartitionRef) -> None:
    """Publish where this task's partition of ``ref.result`` lives (the XCom its consumers pull)."""
    from airflow_region_failover.airflow.operator import xcom_key

    ti.xcom_push(key=xcom_key(ref.result), value=ref.to_json())


def keep_outputs(io: Any, runtime: JobRuntime, subtask: SubtaskId, refs: Mapping[Edge, Sequence[PartitionRef]],
                 versions: tuple[Any, ...], sctx: StepContext, ti: Any) -> dict[str, Any] | None:
    """If this restarted try may keep its committed outputs (:mod:`.reuse`), publish them and return the
    task's summary; otherwise None (the subtask runs)."""
    from airflow_region_failover.failover.options import parse_options
    from airflow_region_failover.spark.reuse import kept_outputs

    strategy = parse_options(runtime.options, strict=False).failover_strategy
    kept = kept_outputs(io, runtime.graph, subtask, refs, versions, sctx, strategy)
    if kept is None:
        return None
    for ref in kept:
        publish(ti, ref)
        log.info("kept BLOCKING partition %s (attempt %d, %d rows): its inputs are byte-identical to the ones it "
                 "was computed from, so try %d does not recompute it", ref.partition, ref.attempt, ref.rows,
                 sctx.try_number)
    return {"subtask": str(subtask), "attempt": sctx.try_number, "rows": {r.result: r.rows for r in kept},
            "kept": {r.result: r.attempt for r in kept}}


def run_subtask(runtime: JobRuntime, subtask: SubtaskId, context: Mapping[str, Any]) -> dict[str, Any]:
    """Run ``subtask`` of ``runtime`` inside an Airflow task (``context`` is the task context)."""
    from airflow_region_failover.spark.io import open_store_io
    from airflow_region_failover.spark.session import get_session, resolve_target

    ti = context["ti"]
    graph = runtime.graph
    impl = runtime.impl(subtask.step)
    refs = pull_refs(ti, graph, subtask)
    sctx = step_context(graph, subtask, refs, context)
    io = open_store_io()
    current = current_inputs(io, refs)
    versions = input_versions(current)
    kept = keep_outputs(io, runtime, subtask, refs, versions, sctx, ti)
    if kept is not None:
        return kept
    if impl.script is not None:
        from airflow_region_failover.spark.submit import submit_script

        rows = submit_script(impl, graph, subtask, refs, sctx, io, ti)
        return {"subtask": str(subtask), "attempt": sctx.try_number, "rows": rows}
    spark = get_session(resolve_target(impl.spark_conn_id))
    inputs = read_inputs(spark, io, refs, current)
    assert impl.fn is not None
    returned = impl.fn(spark, inputs, sctx)
    rows = write_outputs(io, graph, subtask, returned, sctx, ti, versions)
    return {"subtask": str(subtask), "attempt": sctx.try_number, "rows": rows}


def partitions_of(refs: Mapping[Edge, Sequence[PartitionRef]]) -> list[PartitionId]:
    """Every partition in ``refs`` (for logs and error messages)."""
    return [r.partition for rs in refs.values() for r in rs]

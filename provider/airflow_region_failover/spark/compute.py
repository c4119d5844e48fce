"""Computing one subtask's outputs from its inputs — the same code for a function step (in the worker) and a
script step (in its spark-submitted application).

Rule: every BLOCKING input is read at the committed version its producer's current try published, looked up
once (:func:`current_inputs`); those versions are what the outputs' manifests record as the inputs they were
computed from (:func:`input_versions`: over a keyed edge, the checksum of exactly the subpartitions this
subtask reads). Over a keyed edge a subtask reads only its key groups of every producer partition. The step
function's return value is matched to the step's results and each is written under this try's attempt — cut into
subpartitions for a result with keyed consumers (:func:`compute`).
"""

from __future__ import annotations

import functools
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

from airflow_region_failover.exceptions import InputUnavailable, NotAvailable
from airflow_region_failover.graph.ids import SubtaskId
from airflow_region_failover.graph.model import Edge, JobGraph
from airflow_region_failover.graph.subtasks import read_key_groups
from airflow_region_failover.job import StepFunction
from airflow_region_failover.spark.context import StepContext, input_name
from airflow_region_failover.spark.exchange import (
    PartitionRef,
    clustering_of,
    cut_of,
    match_outputs,
    output_results,
)
from airflow_region_failover.spark.store_io import StoreIO
from airflow_region_failover.store.manifest import InputVersion, Manifest

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

Refs = Mapping[Edge, Sequence[PartitionRef]]


def current_inputs(io: StoreIO, refs: Refs) -> dict[PartitionRef, Manifest]:
    """The current manifest of every BLOCKING partition this try reads, checked to be the published attempt
    (:class:`InputUnavailable` naming a missing or superseded one)."""
    current = {}
    for ref in (r for rs in refs.values() for r in rs if r.exchange == "BLOCKING"):
        try:
            current[ref] = io.current(ref)
        except NotAvailable as exc:
            raise InputUnavailable(ref.partition, str(exc)) from exc
    return current


def input_versions(current: Mapping[PartitionRef, Manifest], graph: JobGraph, subtask: SubtaskId,
                   refs: Refs) -> tuple[InputVersion, ...]:
    """The versions of the inputs in ``current`` as ``subtask``'s manifests record them (sorted by partition):
    over a keyed edge, the checksum of the subpartitions it reads and their key groups."""
    versions = []
    for edge, edge_refs in refs.items():
        groups = read_key_groups(graph, edge, subtask.index)
        for ref in edge_refs:
            if ref in current:
                versions.append(current[ref].version(groups, edge.partition_by, edge.max_parallelism))
    return tuple(sorted(versions, key=lambda v: v.partition))


def read_inputs(spark: SparkSession, io: StoreIO, refs: Refs, current: Mapping[PartitionRef, Manifest],
                graph: JobGraph, subtask: SubtaskId) -> dict[str, DataFrame]:
    """One DataFrame per input: the union (by column name) of what ``subtask`` reads over that edge (BLOCKING
    partitions at the versions in ``current``; over a keyed edge only its key groups)."""
    inputs: dict[str, DataFrame] = {}
    for edge, edge_refs in refs.items():
        groups = read_key_groups(graph, edge, subtask.index)
        frames = [_read(spark, io, ref, current.get(ref), edge, groups) for ref in edge_refs]
        inputs[input_name(edge)] = functools.reduce(lambda a, b: a.unionByName(b), frames)
    return inputs


def _read(spark: SparkSession, io: StoreIO, ref: PartitionRef, current: Manifest | None, edge: Edge,
          groups: range | None) -> DataFrame:
    try:
        if groups is None:
            return io.read(spark, ref, current)
        return io.read_keys(spark, ref, edge, groups, current)
    except NotAvailable as exc:
        raise InputUnavailable(ref.partition, str(exc)) from exc


def compute(spark: SparkSession, io: StoreIO, graph: JobGraph, subtask: SubtaskId, refs: Refs, sctx: StepContext,
            fn: StepFunction, code: str, current: Mapping[PartitionRef, Manifest] | None = None
            ) -> tuple[PartitionRef, ...]:
    """Read the inputs, call ``fn(spark, inputs, context)`` and write every output partition of this try,
    recording the BLOCKING input versions it was computed from and the ``code`` fingerprint that computed it;
    returns the refs written (rows filled in).

    ``current``: the inputs' manifests when the caller already looked them up, else looked up here.
    """
    current = current_inputs(io, refs) if current is None else current
    versions = input_versions(current, graph, subtask, refs)
    returned = fn(spark, read_inputs(spark, io, refs, current, graph, subtask), sctx)
    return write_outputs(io, graph, subtask, returned, sctx, versions, code)


def write_outputs(io: StoreIO, graph: JobGraph, subtask: SubtaskId, returned: object, sctx: StepContext,
                  versions: tuple[InputVersion, ...], code: str) -> tuple[PartitionRef, ...]:
    """Match what ``subtask``'s step function returned to its results and write each under this try's attempt
    (cut into subpartitions for keyed consumers), recording ``versions`` and ``code``; the refs written."""
    frames = match_outputs(graph, subtask.step, returned)
    exchanges = {r.id: r.exchange.value for r in output_results(graph, subtask.step)}
    written = []
    for result, frame in frames.items():
        ref = PartitionRef(result, subtask.index, exchanges[result], sctx.dag_id, sctx.run_id, sctx.try_number)
        written.append(io.write(frame, ref, versions, code, cut_of(graph, result), clustering_of(graph, result)))
    return tuple(written)

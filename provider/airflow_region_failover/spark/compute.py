"""Computing a chain subtask's outputs from its inputs — the same code for a function step and a chain (in the
worker) and a script step (in its spark-submitted application).

Rule: the head reads every BLOCKING input at the committed version its producer's current try published, looked
up once when the run was built (:class:`~.run.SubtaskRun` ``current``); over a keyed edge it reads only its key
groups of every producer partition. Then each member's step function is called in order, in the same Spark
session, and the DataFrame a member returns is the next member's input ``inputs[input_name(edge)]`` — lazily,
nothing of a chain's interior is written or read through the store (a lone subtask is a chain of one: its function
is called once). What the tail returns is matched to its results and each is written under this try's attempt —
cut into subpartitions for a result with keyed consumers — recording the input versions and the run's code
fingerprint. An input that turns out unreadable only once Spark reads it (``executors`` mode reads lazily, in Spark's
Python workers, whose errors reach the driver as text) still fails the try with
:class:`~airflow_region_failover.exceptions.InputUnavailable` naming the partition (:func:`named_input`), so the
failover loop restarts its producer.
"""

from __future__ import annotations

import contextlib
import functools
from collections.abc import Iterator
from typing import TYPE_CHECKING

from airflow_region_failover.exceptions import InputUnavailable, NotAvailable, unreadable_in
from airflow_region_failover.graph.ids import SubtaskId
from airflow_region_failover.graph.model import Edge
from airflow_region_failover.graph.subtasks import read_key_groups
from airflow_region_failover.naming import FAILED_SUBTASK
from airflow_region_failover.spark.context import input_name
from airflow_region_failover.spark.exchange import PartitionRef, clustering_of, cut_of, match_outputs
from airflow_region_failover.spark.run import SubtaskRun
from airflow_region_failover.spark.store_io import StoreIO
from airflow_region_failover.store.manifest import Manifest
from airflow_region_failover.timeline import phase

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession


def compute(spark: SparkSession, run: SubtaskRun) -> tuple[PartitionRef, ...]:
    """Read the head's inputs, call every member's function in order passing each returned DataFrame on, and
    write the tail's outputs of this try (module rule); returns the refs written (rows filled in)."""
    with inputs_named(run):
        with phase("define"):
            with phase("read"):
                inputs = read_inputs(spark, run)
            returned = call_members(spark, run, inputs)
        return write_outputs(run, returned)


def call_members(spark: SparkSession, run: SubtaskRun, inputs: dict[str, DataFrame]) -> object:
    """Call every member's function in order on ``inputs``, passing each returned DataFrame on to the next; what
    the tail returned (module rule)."""
    for member, sctx, fn in zip(run.members[:-1], run.contexts, run.functions, strict=False):
        frames = match_outputs(run.graph, member.step, fn(spark, inputs, sctx))
        (result, frame), = frames.items()  # a chained step has exactly one result, read by the next member
        inputs = {input_name(run.graph.result(result).consumers[0]): frame}
    return run.functions[-1](spark, inputs, run.contexts[-1])


@contextlib.contextmanager
def inputs_named(run: SubtaskRun) -> Iterator[None]:
    """An error of the block that names one of ``run``'s inputs as unreadable (:func:`named_input`) becomes
    :class:`InputUnavailable` naming that partition (the failover cause), so its producer restarts."""
    try:
        yield
    except InputUnavailable:
        raise
    except Exception as exc:
        named = named_input(run, exc)
        if named is None:
            raise
        raise named from exc


def named_input(run: SubtaskRun, exc: BaseException) -> InputUnavailable | None:
    """The input partition of ``run`` an error names as unreadable anywhere in its text (a reader's error inside
    Spark's ``PythonException``), as :class:`InputUnavailable`; else, when the text names one of its inputs'
    shared objects (Spark's own reader failing on a file), that object is hashed and, if it is not what its manifest
    records, the partition is named (:func:`~airflow_region_failover.store.dataplane.reading.recheck_named`); ``None``
    otherwise."""
    text = str(exc)
    found = unreadable_in(text)
    if found is None:
        try:
            run.io.store.recheck_named(run.current.values(), text)
        except NotAvailable as unread:
            found = unreadable_in(str(unread))
    if found is None or found[0] not in {ref.partition for edge_refs in run.refs.values() for ref in edge_refs}:
        return None
    return InputUnavailable(*found)


def read_inputs(spark: SparkSession, run: SubtaskRun) -> dict[str, DataFrame]:
    """One DataFrame per input of the head: the union (by column name) of what it reads over that edge (BLOCKING
    partitions at their ``current`` versions; over a keyed edge only its key groups)."""
    inputs: dict[str, DataFrame] = {}
    for edge, edge_refs in run.refs.items():
        groups = read_key_groups(run.graph, edge, run.head.index)
        frames = [read_partition(spark, run.io, ref, run.current.get(ref), edge, groups) for ref in edge_refs]
        inputs[input_name(edge)] = functools.reduce(lambda a, b: a.unionByName(b), frames)
    return inputs


def read_partition(spark: SparkSession, io: StoreIO, ref: PartitionRef, current: Manifest | None, edge: Edge,
                   groups: range | None) -> DataFrame:
    """``ref``'s partition at ``current`` (over a keyed edge only ``groups``); :class:`InputUnavailable` naming it
    when the store cannot serve it."""
    try:
        if groups is None:
            return io.read(spark, ref, current)
        return io.read_keys(spark, ref, edge, groups, current)
    except NotAvailable as exc:
        raise InputUnavailable(ref.partition, str(exc)) from exc


def write_outputs(run: SubtaskRun, returned: object) -> tuple[PartitionRef, ...]:
    """Match what the tail's step function returned to its results and write each under this try's attempt (cut
    into subpartitions for keyed consumers), recording the run's input versions and code; the refs written."""
    frames = match_outputs(run.graph, run.tail.step, returned)
    results = {r.id: r for r in run.outputs}
    written = []
    for result, frame in frames.items():
        with phase("write"):
            written.append(run.io.write(frame, run.output_ref(results[result]), run.versions, run.code,
                                        cut_of(run.graph, result), clustering_of(run.graph, result)))
    return tuple(written)


@contextlib.contextmanager
def naming_member(member: SubtaskId) -> Iterator[None]:
    """An exception raised while ``member`` runs carries its id (:data:`~airflow_region_failover.naming
    .FAILED_SUBTASK`): the failure handler restarts from the member that failed, and the reason names it."""
    try:
        yield
    except Exception as exc:
        with contextlib.suppress(AttributeError, TypeError):  # an exception that takes no attribute stays unnamed
            setattr(exc, FAILED_SUBTASK, str(member))
        raise

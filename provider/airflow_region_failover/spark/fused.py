"""Running a fused region's task: every subtask of one failover region in one Spark session, one Spark job per
output (Flink's pipelined region; :mod:`~airflow_region_failover.graph.fusion` says which regions fuse).

Rules:

* the task looks its inputs up once, as a chain does (:mod:`.run`): for every member, the refs its producers'
  current tries published over the exchanges that come from outside the task (XComs; BLOCKING ones at their
  committed version, :func:`~.run.current_inputs`);
* members run region by region of the run's plan (:func:`~.fused_resume.region_order`), each function called
  with its own :class:`~.context.StepContext` — the same subtask, index, parallelism and partitions as when it runs
  in its own task, so a fused run computes what an unfused one does; except a step declared ``rescalable``, which
  runs as one subtask where :mod:`~airflow_region_failover.graph.rescaling` allows (the task runs its graph);
* a PIPELINED exchange between two members never leaves Spark: the consumer's input is the union of the producers'
  DataFrames it reads (over a keyed edge only its key groups, Spark's ``pmod(hash(key), max_parallelism)``, exactly
  the rows a subpartition would hold; of a fused AUTO result only the ``columns`` its edges declared, as its commit
  would have kept); :mod:`.fused_reads` says which DataFrames are persisted in Spark's block manager (unpersisted
  when the task ends) and which keyed edges are shuffled once for all their consumers (a consumer that alone reads
  every key group — a rescaled step — reads the producers' union: Spark's own shuffle serves it);
* every BLOCKING result a member produces (a sink result too) is committed under this try's attempt, recording the
  member's lineage (:mod:`.fused_resume`: the versions of every BLOCKING partition it read, from outside or from a
  member's commit, and those the members it read in Spark were computed from) and the code fingerprint of all the
  task's steps; a BLOCKING exchange between two members (a region merged by a BLOCKING cycle, or an AUTO result the
  run's plan persists) is read back from its commit;
* **the run's plan** (a job rendered ``PER_RUN``): the task fixes the run's plan
  (:meth:`~airflow_region_failover.decisions.plans.Plans.fix`) and runs the graph of that plan: an interior AUTO
  result the plan says BLOCKING is committed and read back, a FUSED one stays in memory;
* **resuming** (a later try): a failover region of the run's plan that an earlier try of this run committed from
  the inputs it would read now, byte-identical, with this task's code, is kept whole — none of its members runs, its
  commits are published again (:func:`~.fused_resume.kept_region`, which says when a region may resume);
* the task records no failure evidence; it publishes each partition under ``partition:<result>:<i>``
  (:meth:`~airflow_region_failover.naming.TaskNames.xcom_key`) and returns one summary for all its members
  (:func:`~.ledger.fused_summary`, the resumed members' outputs marked kept). A try that fails keeps the summary of
  the members its commits ran (:func:`~.fused_reads.measured`), with the timeline as of its last commit, for the
  planner's history (:mod:`~airflow_region_failover.decisions.failed_tries`).
"""

from __future__ import annotations

import contextlib
import functools
import logging
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from airflow_region_failover.decisions.failed_tries import FailedTries
from airflow_region_failover.decisions.plans import Plans
from airflow_region_failover.decisions.try_log import TryLog
from airflow_region_failover.exceptions import InputUnavailable
from airflow_region_failover.failover.error_class import TryInputs
from airflow_region_failover.failover.run_log import Decision
from airflow_region_failover.graph.ids import PartitionId, SubtaskId
from airflow_region_failover.graph.keygroups import key_group_range
from airflow_region_failover.graph.model import Edge, Exchange
from airflow_region_failover.graph.rescaling import Rescaled
from airflow_region_failover.graph.subtasks import consumed_partitions, read_key_groups
from airflow_region_failover.job import JobRuntime
from airflow_region_failover.spark.compute import named_input, naming_member, read_partition
from airflow_region_failover.spark.context import input_name
from airflow_region_failover.spark.exchange import PartitionRef, clustering_of, cut_of, match_outputs, output_results
from airflow_region_failover.spark.fused_reads import (
    jobs_of,
    measured,
    persisted,
    readers_of,
    shared,
    shared_partitions,
)
from airflow_region_failover.spark.fused_resume import (
    kept_region,
    lineage,
    merged,
    region_order,
    resumable,
    task_regions,
)
from airflow_region_failover.spark.ledger import TaskSummary, fused_summary
from airflow_region_failover.spark.reuse import unchanged_commits
from airflow_region_failover.spark.run import (
    SubtaskRun,
    chain_fingerprint,
    current_inputs,
    input_versions,
    pull_refs,
    restart_of,
    step_context,
)
from airflow_region_failover.spark.session import get_session, resolve_target
from airflow_region_failover.spark.store_io import StoreIO, open_store_io
from airflow_region_failover.store.dataplane.types import column, key_group_column
from airflow_region_failover.store.manifest import InputVersion, Manifest
from airflow_region_failover.timeline import Timeline, current, phase

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

log = logging.getLogger(__name__)
BARRIER = "__region_failover_spark_partition"
"""The column :meth:`Fused._shuffled` adds between a shared exchange and its consumers' filters (then dropped)."""


def run_fused(runtime: JobRuntime, members: Sequence[SubtaskId], context: Mapping[str, Any],
              run_log: TryLog | None = None,
              looked_up: Callable[[TryInputs | None], None] | None = None) -> TaskSummary:
    """Run fused region task ``members`` (in the order they run) inside an Airflow task (module rule); returns
    the task's summary."""
    ti = context["ti"]
    with phase("store_open"):
        io = open_store_io()
    if runtime.spec.auto.per_run:
        with phase("plan"):
            fixed = Plans(io.store.objects).fix(str(ti.dag_id), str(ti.run_id))
        runtime = JobRuntime(runtime.spec.for_run(fixed.plan), runtime.impls)
        log.info("the run's plan fuses %s (%s)", ", ".join(runtime.spec.run_plan.fused) if runtime.spec.run_plan
                 and runtime.spec.run_plan.fused else "no AUTO result", fixed.reason)
    spec, whole = runtime.spec, runtime.graph
    rescaled = Rescaled.of(whole, members, task_regions(spec.topology.regions, members))
    graph, members, regions, expand = rescaled.graph, rescaled.members, rescaled.regions, rescaled.expanded
    inside = frozenset(members)
    if rescaled.steps:
        log.info("runs %s as one subtask each (declared rescalable)", ", ".join(sorted(rescaled.steps)))
    with phase("lookup"):
        refs = {m: pull_refs(ti, graph, m, spec.names, functools.partial(_outside, graph, member=m, inside=inside))
                for m in members}
        manifests: dict[PartitionRef, Manifest] = {}
        for member_refs in refs.values():
            manifests.update(current_inputs(io, member_refs))
        versions = merged(*(input_versions(manifests, graph, m, r) for m, r in refs.items()))
        restart = restart_of(ti, known=run_log)
    if looked_up is not None:
        looked_up(None)  # a fused task's interior is PIPELINED: no byte-identical evidence of what it computes
    impls = {m.step: runtime.impl(m.step) for m in members}
    code = chain_fingerprint(list(impls.values()))
    with phase("session"):
        spark = get_session(resolve_target(impls[members[0].step].spark_conn_id))
    run = Fused(graph, region_order(graph, members, regions), refs, io, manifests, versions, code, context,
                spec.auto.columns, resumable(runtime, members, context, restart), regions)
    try:
        with phase("compute"):
            published = run.compute(spark, runtime)
    except Exception:
        _keep_failed(run, ti, restart, expand)
        raise
    finally:
        run.release()
    with phase("publish"):
        for producer, ref in published:
            ti.xcom_push(key=spec.names.xcom_key(producer, ref.result), value=ref.to_json())
            log.info("wrote %s partition %s (attempt %d, %d rows)", ref.exchange.value, ref.partition,
                     ref.attempt, ref.rows)
    with phase("ledger"):
        done = fused_summary(graph, expand(members), int(getattr(ti, "try_number", 1) or 1), io, refs, manifests,
                             [ref for _, ref in published], restart, str(ti.task_id), frozenset(run.kept_outputs),
                             expand(run.resumed))
    clock = current()
    return done if clock is None else replace(done, timeline=clock.timeline())


def _keep_failed(run: Fused, ti: Any, restart: Decision | None,
                 expand: Callable[[Sequence[SubtaskId]], tuple[SubtaskId, ...]]) -> None:
    """Keep what a failed try measured: the members its commits ran (module rule; a rescaled step's subtask 0 as
    all of its subtasks, ``expand``); never raises."""
    try:
        members = measured(run.graph, run.members, run.jobs, set(run.written))
        if not members:
            return
        try_number = int(getattr(ti, "try_number", 1) or 1)
        partial = fused_summary(run.graph, expand(members), try_number, run.io, {m: run.refs[m] for m in members},
                                run.current, run.progress, restart, str(ti.task_id), frozenset(run.kept_outputs),
                                expand([m for m in run.resumed if m in members]))
        FailedTries(run.io.store.objects).keep(str(ti.dag_id), str(ti.run_id), str(ti.task_id), try_number,
                                               replace(partial, timeline=run.snapshot).to_json())
    except Exception:  # the try's own error is what its task reports
        log.warning("region failover: could not summarise what the failed try measured", exc_info=True)


def _every_group(edge: Edge, groups: range | None) -> bool:
    """Whether ``groups`` are all key groups of keyed ``edge``: a lone such reader needs no shared exchange."""
    return groups is not None and groups == key_group_range(edge.max_parallelism, 1, 0)


def _outside(graph: Any, edge: Edge, *, member: SubtaskId, inside: frozenset[SubtaskId]) -> bool:
    """True if ``member`` reads ``edge`` from outside the task (module rule: then its refs are pulled)."""
    partitions = consumed_partitions(graph, member)[edge]
    return not all(SubtaskId(edge.source, p.index) in inside for p in partitions)


class Fused:
    """One try of a fused region's members (module rules); :meth:`compute` runs them, :meth:`release` frees what
    it persisted in Spark."""

    def __init__(self, graph: Any, members: tuple[SubtaskId, ...],
                 refs: Mapping[SubtaskId, Mapping[Edge, Sequence[PartitionRef]]], io: StoreIO,
                 current: dict[PartitionRef, Manifest], versions: tuple[InputVersion, ...], code: str,
                 context: Mapping[str, Any], kept: Mapping[str, tuple[str, ...]] | None = None,
                 resumable: frozenset[SubtaskId] = frozenset(),
                 regions: Mapping[SubtaskId, tuple[SubtaskId, ...]] | None = None) -> None:
        self.graph, self.members, self.refs, self.io = graph, members, refs, io
        self.kept = dict(kept or {})
        self.resumable, self.regions = resumable, dict(regions or {})
        self.decided: dict[tuple[SubtaskId, ...], dict[SubtaskId, tuple[PartitionRef, ...]] | None] = {}
        self.lineage: dict[SubtaskId, tuple[InputVersion, ...]] = {}
        self.kept_outputs: list[PartitionId] = []
        self.resumed: list[SubtaskId] = []
        self.progress: list[PartitionRef] = []  # the refs published up to the last commit, and the timeline then
        self.snapshot: Timeline | None = None
        self.current, self.versions, self.code, self.context = current, versions, code, context
        self.inside = frozenset(members)
        self.frames: dict[PartitionId, DataFrame] = {}
        self.written: dict[PartitionId, PartitionRef] = {}
        self.persisted: list[DataFrame] = []
        self.shuffled: dict[tuple[Edge, tuple[PartitionId, ...]], DataFrame] = {}
        self.readers = readers_of(graph, members, self.inside)
        self.jobs = jobs_of(graph, members, self.readers)
        self.reuse = True

    def compute(self, spark: SparkSession, runtime: JobRuntime) -> tuple[tuple[SubtaskId, PartitionRef], ...]:
        """Run every member in order (module rules); each committed ref with the member that wrote it."""
        ti = self.context.get("ti")
        try_number = int(getattr(ti, "try_number", 1) or 1)
        published: list[tuple[SubtaskId, PartitionRef]] = []
        self.reuse = str(spark.conf.get("spark.sql.exchange.reuse") or "true").strip().lower() == "true"
        for member in self.members:
            with naming_member(member):
                done = self._run(spark, runtime, member, ti, try_number)
            published.extend(done)
            if done:  # a commit: what a failed try measured (module rule)
                clock = current()
                self.snapshot, self.progress = clock.timeline() if clock else None, [r for _, r in published]
        return tuple(published)

    def _run(self, spark: SparkSession, runtime: JobRuntime, member: SubtaskId, ti: Any,
             try_number: int) -> list[tuple[SubtaskId, PartitionRef]]:
        """Run one member: call its function, keep what members read in memory, commit its BLOCKING results."""
        published: list[tuple[SubtaskId, PartitionRef]] = []
        fn = runtime.impl(member.step).fn
        assert fn is not None  # a script step never fuses (graph.fusion rule 4)
        kept = self._resumed(member, ti)
        if kept is not None:
            self.resumed.append(member)
            for ref in kept:
                self.written[ref.partition] = ref
                self.kept_outputs.append(ref.partition)
                log.info("kept BLOCKING partition %s (attempt %d, %d rows): try %d of this run computed it from "
                         "byte-identical inputs with this code", ref.partition, ref.attempt, ref.rows, try_number)
            return [(member, ref) for ref in kept]
        read = self._blocking_reads(member, self.written)
        assert read is not None  # members run in topological order: every one read is written
        own = input_versions(self.current, self.graph, member, read)
        versions = self.lineage[member] = lineage(self.graph, member, own, self.lineage) or own
        with phase("define"):
            inputs, partitions = self._inputs(spark, member)
            sctx = replace(step_context(self.graph, member, {}, self.context), partitions=partitions)
            with self._named():
                frames = match_outputs(self.graph, member.step, fn(spark, inputs, sctx))
        results = {r.id: r for r in output_results(self.graph, member.step)}
        for result, frame in frames.items():
            partition = PartitionId(result, member.index)
            frame = self._keep(partition, frame)
            if results[result].exchange is Exchange.BLOCKING:
                ref = PartitionRef(result, member.index, Exchange.BLOCKING, str(getattr(ti, "dag_id", "")),
                                   str(getattr(ti, "run_id", "")), try_number)
                with phase("write"), self._named():
                    written = self.io.write(frame, ref, versions, self.code, cut_of(self.graph, result),
                                            clustering_of(self.graph, result))
                self.written[partition] = written
                published.append((member, written))
        return published

    def _blocking_reads(self, member: SubtaskId, written: Mapping[PartitionId, PartitionRef]) -> \
            dict[Edge, tuple[PartitionRef, ...]] | None:
        """The BLOCKING partitions ``member`` reads, from outside or from a member's commit in ``written`` (each
        one's current manifest looked up once); ``None`` if one is not written yet."""
        read: dict[Edge, tuple[PartitionRef, ...]] = {}
        outside = self.refs[member]
        for edge, parts in consumed_partitions(self.graph, member).items():
            if edge.exchange is not Exchange.BLOCKING:
                continue
            if edge not in outside and not all(p in written for p in parts):
                return None
            refs = tuple(outside[edge]) if edge in outside else tuple(written[p] for p in parts)
            for ref in refs:
                if ref not in self.current:
                    self.current[ref] = self.io.current(ref)
            read[edge] = refs
        return read

    def _resumed(self, member: SubtaskId, ti: Any) -> tuple[PartitionRef, ...] | None:
        """The commits ``member`` keeps instead of running (module rule: resuming, decided once for its region),
        else ``None``."""
        region = self.regions.get(member, (member,))
        if region not in self.decided:
            dag_id, run_id = str(getattr(ti, "dag_id", "")), str(getattr(ti, "run_id", ""))
            self.decided[region] = kept_region(
                self.graph, region, self.resumable, self.readers, self.written, self._blocking_reads,
                functools.partial(input_versions, self.current, self.graph),
                lambda parts, versions: unchanged_commits(self.io, dag_id, run_id, parts, self.code, versions))
        found = self.decided[region]
        return None if found is None else found[member]

    def release(self) -> None:
        """Unpersist every DataFrame this try persisted."""
        for frame in self.persisted:
            try:
                frame.unpersist()
            except Exception:  # the session may be gone: nothing left to free
                log.debug("could not unpersist a fused region's frame", exc_info=True)
        self.persisted.clear()

    def _keep(self, partition: PartitionId, frame: DataFrame) -> DataFrame:
        """Keep ``frame`` for the members that read it in memory, persisted when :func:`~.fused_reads.persisted`
        says so (module rule)."""
        reads = len(self.readers.get(partition, ()))
        columns = self.kept.get(partition.result)
        if reads and columns:  # a fused AUTO result keeps what its edges declared: only that is held in memory
            frame = frame.select(*[column(c) for c in columns])
        if persisted(self.graph, partition, self.readers, self.jobs, self.reuse):
            from pyspark import StorageLevel

            frame = frame.persist(StorageLevel.MEMORY_AND_DISK)
            self.persisted.append(frame)
        if reads:
            self.frames[partition] = frame
        return frame

    def _inputs(self, spark: SparkSession, member: SubtaskId) -> tuple[dict[str, DataFrame],
                                                                      dict[str, tuple[PartitionId, ...]]]:
        """``member``'s inputs: in memory from members, else read from the store (module rules)."""
        inputs: dict[str, DataFrame] = {}
        partitions: dict[str, tuple[PartitionId, ...]] = {}
        outside = self.refs[member]
        for edge, parts in consumed_partitions(self.graph, member).items():
            groups = read_key_groups(self.graph, edge, member.index)
            alone = _every_group(edge, groups) and all(set(self.readers.get(p, ())) == {member} for p in parts)
            if edge in outside:
                frames = [self._read(spark, ref, edge, groups) for ref in outside[edge]]
            elif groups is not None and shared(self.graph, edge, self.jobs, self.reuse) and not alone:
                frames = [self._shuffled(spark, edge, parts, groups)]
            else:
                frames = [self._interior(spark, p, edge, groups) for p in parts]
            inputs[input_name(edge)] = functools.reduce(lambda a, b: a.unionByName(b), frames)
            partitions[input_name(edge)] = parts
        return inputs, partitions

    def _interior(self, spark: SparkSession, partition: PartitionId, edge: Edge, groups: range | None) -> DataFrame:
        """A member's partition, as the consumer over ``edge`` reads it: in memory, or (BLOCKING) its commit."""
        if edge.exchange is Exchange.BLOCKING:
            ref = self.written[partition]
            if ref not in self.current:
                self.current[ref] = self.io.current(ref)
            return self._read(spark, ref, edge, groups)
        frame = self.frames[partition]
        if groups is None or _every_group(edge, groups):  # every key group: all rows
            return frame
        group = key_group_column(edge.partition_by, edge.max_parallelism)
        return frame.where(group.between(groups.start, groups.stop - 1))

    def _shuffled(self, spark: SparkSession, edge: Edge, parts: tuple[PartitionId, ...], groups: range) -> DataFrame:
        """``groups`` of the union of ``parts`` repartitioned by ``edge``'s key, one exchange for every consumer
        (:func:`~.fused_reads.shared`). A nondeterministic column (the Spark partition id) sits between the exchange
        and the consumer's filter: Spark pushes no filter through it, so every consumer's plan holds the same
        exchange of the same plan (the filter pushed below would make one exchange per consumer)."""
        from pyspark.sql import functions as F

        if (edge, parts) not in self.shuffled:
            union = functools.reduce(lambda a, b: a.unionByName(b), [self.frames[p] for p in parts])
            count = shared_partitions(int(spark.conf.get("spark.sql.shuffle.partitions") or 200))
            keys = [column(c) for c in edge.partition_by]
            self.shuffled[(edge, parts)] = union.repartition(count, *keys).withColumn(BARRIER, F.spark_partition_id())
        if _every_group(edge, groups):  # every key group: the same exchange, whole
            return self.shuffled[(edge, parts)].drop(BARRIER)
        group = key_group_column(edge.partition_by, edge.max_parallelism)
        kept = group.between(groups.start, groups.stop - 1) & (F.col(BARRIER) >= 0)
        return self.shuffled[(edge, parts)].where(kept).drop(BARRIER)

    def _read(self, spark: SparkSession, ref: PartitionRef, edge: Edge, groups: range | None) -> DataFrame:
        return read_partition(spark, self.io, ref, self.current.get(ref), edge, groups)

    @contextlib.contextmanager
    def _named(self) -> Iterator[None]:
        """An error of the block naming an unreadable input partition becomes :class:`InputUnavailable`."""
        try:
            yield
        except InputUnavailable:
            raise
        except Exception as exc:
            named = named_input(_as_run(self), exc)
            if named is None:
                raise
            raise named from exc


def _as_run(fused: Fused) -> SubtaskRun:
    """A view of ``fused`` as a :class:`~.run.SubtaskRun` for :func:`~.compute.named_input` (its refs and
    manifests)."""
    refs: dict[Edge, tuple[PartitionRef, ...]] = {}
    for member_refs in fused.refs.values():
        for edge, edge_refs in member_refs.items():
            refs[edge] = tuple(dict.fromkeys((*refs.get(edge, ()), *edge_refs)))
    return SubtaskRun(fused.graph, fused.members, (), (), refs, fused.io, fused.current, fused.versions, fused.code)

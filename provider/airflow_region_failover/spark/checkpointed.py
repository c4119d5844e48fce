"""A checkpointed chain subtask on Spark: the epochs of :mod:`~..checkpoint.runner` with Spark as the engine.

Rules (:mod:`~..checkpoint.declared` says which chains are checkpointed):

* the epoch plan is cut from the head's sliced input at the committed versions this try reads
  (:class:`~.run.SubtaskRun` ``current``): its objects (over a keyed edge, the subpartitions the subtask reads) or
  its key-group range (:mod:`~..checkpoint.plan`);
* per epoch, the head reads its slice — exactly the epoch's objects, or the rows of the epoch's key groups — and
  its other inputs whole; every member is called with ``context.epoch`` set, a stateful one as
  ``fn(spark, inputs, state, context) -> (output, new_state)`` with its state as a DataFrame of its declared
  schema; the tail's outputs of the epoch are stored as objects at once (:meth:`~..store.result_store.ResultStore.
  write_objects`), cut into subpartitions for keyed consumers. A returned state is cast to the declared schema and
  tagged with each row's key group (Spark's own hash, :func:`~..store.dataplane.types.key_group_column`) before it
  goes to the loop as Arrow;
* what an epoch's job read through Spark's own reader is confirmed unchanged after it
  (:func:`~..store.dataplane.reading.confirm_unchanged`), once per job that read it: the epoch's slice after its
  epoch only, the inputs read whole after every epoch (each epoch's job scans them again) — HEADs linear in the
  epochs;
* a chain declared ``Checkpoint(epochs="AUTO")`` runs the epochs its run's plan fixed
  (:func:`run_epochs_of`: :meth:`~..decisions.plans.Plans.fix`, the plan the scheduler decided for the run, or
  the no-history default when none was decided): every try of the run the same number, so a retry resumes its
  checkpoint (the epoch plan's fingerprint holds the number). A plan that cannot be read or fixed fails the try
  with :class:`~..exceptions.RunPlanUnavailable` — never another number;
* the initial state is empty, or — with ``execution.state-recovery.path`` in the job's options or the run's conf
  — taken from an earlier run's final checkpoints (:func:`~..checkpoint.resume.recover`, rescaled by key-group
  range);
* at the end, every result's objects of all epochs are committed as the partition's ordinary result
  (:meth:`~..store.result_store.ResultStore.commit_written`), recording the inputs and code like any write: consumers,
  reuse, lineage and publication see an ordinary result.
"""

from __future__ import annotations

import functools
import logging
import secrets
from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

from airflow_region_failover.checkpoint import lsm
from airflow_region_failover.checkpoint.declared import ChainCheckpoint
from airflow_region_failover.checkpoint.plan import Epoch, EpochPlan, Piece, plan_key_groups, plan_objects
from airflow_region_failover.checkpoint.resume import Identity, recover
from airflow_region_failover.checkpoint.runner import EpochResult, Listener, Outcome, Settings, run_epochs
from airflow_region_failover.checkpoint.storage import CheckpointStorage
from airflow_region_failover.decisions.plans import Plans
from airflow_region_failover.exceptions import InputUnavailable, RunPlanUnavailable, StepOutputError
from airflow_region_failover.failover.checkpointing import STATE_RECOVERY_KEY, EpochCut, parse_recovery
from airflow_region_failover.graph.ids import PartitionId
from airflow_region_failover.graph.subtasks import read_key_groups
from airflow_region_failover.planning.stored import RunPlan
from airflow_region_failover.spark.compute import read_inputs
from airflow_region_failover.spark.context import input_name
from airflow_region_failover.spark.exchange import PartitionRef, cut_of, match_outputs
from airflow_region_failover.spark.run import SubtaskRun
from airflow_region_failover.store.dataplane.reading import JvmRead
from airflow_region_failover.store.dataplane.types import Target, Written, key_group_column
from airflow_region_failover.store.keys import AttemptId
from airflow_region_failover.timeline import phase

if TYPE_CHECKING:
    import pyarrow as pa
    from pyspark.sql import DataFrame, SparkSession

log = logging.getLogger(__name__)


def run_checkpointed(spark: SparkSession, run: SubtaskRun, chain: ChainCheckpoint,
                     listener: Listener | None = None) -> tuple[PartitionRef, ...]:
    """Run the chain subtask ``run`` in epochs with checkpoints and commit its outputs (module rules)."""
    store = run.io.store
    sctx = run.contexts[-1]
    if chain.auto:
        chain = run_epochs_of(Plans(store.objects), sctx.dag_id, sctx.run_id, chain)
    targets, storage = epoch_outputs(run)
    engine = SparkEngine(spark, run, chain, targets)
    groups = {step: chain.key_groups(run.graph, step, run.head.index) for step in chain.stateful}
    initial, source = {step: engine.empty_state(step) for step in chain.stateful}, ""
    path = parse_recovery(sctx.params.get(STATE_RECOVERY_KEY)) or run.checkpointing.state_recovery
    if path is not None:
        recovered = recover(store.objects, storage, path, chain, run.tail.index, groups, engine.empty_state)
        initial, source = dict(recovered.states), recovered.source
    settings = Settings(storage, tuple(targets.values()), tuple(m.step for m in run.members),
                        {step: c.state_key for step, c in chain.stateful.items()}, groups, sctx.try_number,
                        Identity(run.versions, run.code, "", source), run.checkpointing, chain.declaration.enabled,
                        run.opted_out, initial)
    outcome = run_epochs(settings, engine.plan(), engine, listener)
    return commit_epochs(run, targets, outcome)


def epoch_outputs(run: SubtaskRun) -> tuple[dict[str, Target], CheckpointStorage]:
    """Where the epochs of this try of ``run`` store their outputs (one target per result, one writer) and its
    checkpoints (the tail's partition's): a checkpointed chain's and a sliced chain's (:mod:`.sliced`) alike."""
    store, sctx = run.io.store, run.contexts[-1]
    writer = secrets.token_hex(8)
    targets = {r.id: store.target(AttemptId(sctx.dag_id, sctx.run_id, PartitionId(r.id, run.tail.index),
                                            sctx.try_number), writer) for r in run.outputs}
    storage = CheckpointStorage(store.objects, store.run_keys(sctx.dag_id, sctx.run_id),
                                PartitionId(run.tail.step, run.tail.index), store.config.min_grace_seconds)
    return targets, storage


def write_tail(run: SubtaskRun, targets: Mapping[str, Target], returned: object) -> EpochResult:
    """The tail's outputs of one epoch (``returned``), stored as objects at once, cut into subpartitions for keyed
    consumers (module rule), with their schemas and no state."""
    outputs, schemas = {}, {}
    for result, frame in match_outputs(run.graph, run.tail.step, returned).items():
        outputs[result] = run.io.store.write_objects(frame, targets[result], cut_of(run.graph, result))
        schemas[result] = frame.schema.json()
    return EpochResult(outputs, schemas, {})


def commit_epochs(run: SubtaskRun, targets: Mapping[str, Target], outcome: Outcome) -> tuple[PartitionRef, ...]:
    """Commit every result's objects of all epochs of ``outcome`` as the partition's ordinary result, recording the
    inputs and code like any write (module rule; a sliced chain's too, :mod:`.sliced`)."""
    store = run.io.store
    produced = {o.result: o for o in outcome.outputs}
    refs = []
    for result in run.outputs:
        done = produced[result.id]
        written = Written(done.objects, done.rows, dict(done.subpartition_rows))
        manifest, _ = store.commit_written(targets[result.id], written, done.schema, run.versions, run.code,
                                           cut_of(run.graph, result.id))
        run.io.seen[manifest.partition] = manifest
        refs.append(replace(run.output_ref(result), rows=manifest.row_count))
    return tuple(refs)


def run_epochs_of(plans: Plans, dag_id: str, run_id: str, chain: ChainCheckpoint) -> ChainCheckpoint:
    """``chain`` (declared ``epochs="AUTO"``) with the epochs its run's plan fixed (module rule)."""
    step = next(iter(chain.stateful))
    fixed = fixed_plan(plans, dag_id, run_id, f"step {step!r} declares Checkpoint(epochs='AUTO'): it runs the "
                                              "epochs its run's plan fixed")
    chosen = fixed.epochs_of(step, chain.declaration.max_epochs)
    log.info("%s runs %d epochs, as its run's plan fixed them: %s", step, chosen.epochs, chosen.reason)
    return chain.with_epochs(chosen.epochs)


def fixed_plan(plans: Plans, dag_id: str, run_id: str, why: str) -> RunPlan:
    """The plan of run ``run_id``, fixed now if no task fixed it before; :class:`RunPlanUnavailable` (``why`` the
    try needs it) when it cannot be read or fixed — a try never runs another number of epochs than its run's."""
    try:
        with phase("plan"):
            return plans.fix(dag_id, run_id)
    except (ValueError, OSError) as exc:  # the store's errors (RegionFailoverError is a ValueError), bad JSON
        raise RunPlanUnavailable(f"{why}, and the plan of run {run_id!r} of {dag_id!r} could not be read or fixed "
                                 f"({exc}); not running another number of epochs") from exc


@dataclass
class SparkEngine:
    """Runs a checkpointed chain's members on one epoch in ``spark`` (module rules)."""

    spark: SparkSession
    run: SubtaskRun
    chain: ChainCheckpoint
    targets: Mapping[str, Target]
    whole: dict[str, DataFrame] | None = None
    """The head's inputs other than the sliced one, once read (:meth:`_whole`)."""
    whole_reads: tuple[JvmRead, ...] = ()
    """What of :attr:`whole` Spark's own reader reads: every epoch's job scans it again."""

    def plan(self) -> EpochPlan:
        """The epoch plan of this try (module rule)."""
        decl, edge = self.chain.declaration, self.chain.sliced
        groups = read_key_groups(self.run.graph, edge, self.run.head.index)
        if EpochCut(decl.cut) is EpochCut.KEY_GROUPS:
            return plan_key_groups(groups or range(0, edge.max_parallelism), decl.count, self.chain.declarations())
        pieces = []
        for ref in self.run.refs[edge]:
            manifest = self._manifest(ref)
            selection = manifest.select(groups, edge.partition_by, edge.max_parallelism)
            pieces.append(Piece(ref.partition, selection.objects, selection.filtered))
            self.run.io.reads.add(0, 0, manifest.total_bytes)  # the pieces' bytes are counted as they are read
        return plan_objects(pieces, decl.count, self.chain.declarations())

    @property
    def _whole(self) -> dict[str, DataFrame]:
        """The head's inputs other than the sliced one (and the sliced one for the key-group cut, which filters
        it per epoch), read whole once per try."""
        if self.whole is None:
            keep = EpochCut(self.chain.declaration.cut) is EpochCut.KEY_GROUPS
            others = {e: refs for e, refs in self.run.refs.items() if keep or e != self.chain.sliced}
            before = len(self.run.io.jvm_reads)
            self.whole = read_inputs(self.spark, replace(self.run, refs=others)) if others else {}
            self.whole_reads = tuple(self.run.io.jvm_reads[before:])
        return self.whole

    def _manifest(self, ref: PartitionRef) -> Any:
        manifest = self.run.current.get(ref)
        if manifest is None:
            raise InputUnavailable(ref.partition, "the sliced input of a checkpointed step must be BLOCKING")
        return manifest

    def _slice(self, epoch: Epoch) -> DataFrame:
        """The head's sliced input of ``epoch`` (module rule)."""
        edge = self.chain.sliced
        if epoch.key_groups is not None:
            group = key_group_column(edge.partition_by, edge.max_parallelism)
            return self._whole[input_name(edge)].filter(group.between(epoch.key_groups.start,
                                                                      epoch.key_groups.stop - 1))
        store, frames = self.run.io.store, []
        for piece in epoch.pieces:
            ref = next(r for r in self.run.refs[edge] if r.partition == piece.partition)
            manifest = self._manifest(ref)
            self.run.io.reads.add(sum(o.size for o in piece.objects), len(piece.objects), 0)
            frame = store.read_version(self.spark, manifest, piece.objects, self.run.io.jvm_reads)
            if piece.filtered:
                groups = read_key_groups(self.run.graph, edge, self.run.head.index) or range(0)
                frame = frame.filter(key_group_column(edge.partition_by, edge.max_parallelism).between(
                    groups.start, groups.stop - 1))
            frames.append(frame)
        if not frames:
            first = self._manifest(self.run.refs[edge][0])
            return store.read_version(self.spark, first, ())
        return functools.reduce(lambda a, b: a.unionByName(b), frames)

    def run_epoch(self, epoch: Epoch, states: Mapping[str, pa.Table]) -> EpochResult:
        """Every member on ``epoch``'s slice, stateful ones with their state (module rule)."""
        whole = self._whole
        before = len(self.run.io.jvm_reads)
        inputs = {**whole, input_name(self.chain.sliced): self._slice(epoch)}
        new_states: dict[str, pa.Table] = {}
        returned: object = None
        for member, sctx, fn in zip(self.run.members, self.run.contexts, self.run.functions, strict=True):
            context = replace(sctx, epoch=epoch)
            if member.step in self.chain.stateful:
                returned, state = _pair(member.step, fn(self.spark, inputs, self._frame(member.step, states[
                    member.step]), context))
                new_states[member.step] = self._arrow(member.step, state)
            else:
                returned = fn(self.spark, inputs, context)
            if member != self.run.tail:
                (result, frame), = match_outputs(self.run.graph, member.step, returned).items()
                inputs = {input_name(self.run.graph.result(result).consumers[0]): frame}
        written = write_tail(self.run, self.targets, returned)
        # what this epoch's job read through Spark's own reader is what was checked (module rule)
        self.run.io.store.confirm_unchanged((*self.whole_reads, *self.run.io.jvm_reads[before:]))
        return replace(written, states=new_states)

    def _schema(self, step: str) -> Any:
        return _struct(self.chain.stateful[step].state_schema)

    def empty_state(self, step: str) -> pa.Table:
        """An empty state of ``step``'s declared schema, with its key-group column."""
        import pyarrow as pa
        from pyspark.sql.pandas.types import to_arrow_schema

        schema = to_arrow_schema(self._schema(step)).append(pa.field(lsm.KEY_GROUP, pa.int32()))
        return schema.empty_table()

    def _frame(self, step: str, state: pa.Table) -> DataFrame:
        """``step``'s state as a DataFrame of its declared schema."""
        schema = self._schema(step)
        if state.num_rows == 0:
            return self.spark.createDataFrame([], schema)
        return self.spark.createDataFrame(state.drop_columns([lsm.KEY_GROUP]), schema=schema)

    def _arrow(self, step: str, frame: object) -> pa.Table:
        """A returned state cast to the declared schema, each row tagged with its key group (module rule)."""
        import pyarrow as pa
        from pyspark.sql import DataFrame
        from pyspark.sql import functions as F

        schema = self._schema(step)
        if not isinstance(frame, DataFrame):
            raise StepOutputError(f"step {step!r} returned a state of type {type(frame).__name__}; return "
                                  "(output, state) with the state as a DataFrame")
        missing = [f.name for f in schema.fields if f.name not in frame.columns]
        if missing:
            raise StepOutputError(f"step {step!r} returned a state without column {missing[0]!r}; return the "
                                  "columns of its state_schema")
        group = key_group_column(self.chain.key_columns(step), self.chain.max_parallelism(step))
        typed = frame.select(*[F.col(f"`{f.name}`").cast(f.dataType).alias(f.name) for f in schema.fields])
        table = typed.withColumn(lsm.KEY_GROUP, group.cast("int")).toArrow()
        return table.cast(pa.schema([*self.empty_state(step).schema]))


def _struct(ddl: str) -> Any:
    """The :class:`StructType` of a DDL schema string."""
    from pyspark.sql.types import StructType

    return StructType.fromDDL(ddl)


def _pair(step: str, returned: object) -> tuple[object, object]:
    """``(output, state)`` of a stateful step function, or :class:`StepOutputError` naming it."""
    if not isinstance(returned, tuple) or len(returned) != 2:
        raise StepOutputError(f"step {step!r} is checkpointed: return (output, new_state), got "
                              f"{type(returned).__name__}")
    return returned[0], returned[1]

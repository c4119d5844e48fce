"""The epoch loop of a checkpointed chain subtask: resume, run the epochs, checkpoint at their boundaries.

The loop is the same for every engine (:class:`Engine`: the Spark one is :mod:`~..spark.checkpointed`; states
travel between the loop and the engine as Arrow tables). Rules:

* **Start**: the try resumes the best checkpoint :func:`~.resume.choose` offers that is still *complete* — every
  output object it lists is there as the store checks an object (:class:`~..store.availability.ObjectCheck`:
  present, of its recorded size, of its SHA-256 where the server keeps one) and its state can be read back — as
  Flink restores "the latest completed checkpoint" (seed 002): one with a lost piece (an object a consumer found
  corrupt and moved aside) is skipped for an older one, saying why, and the epochs after the one resumed are run
  again, writing the lost objects anew. It restores every stateful member's state and the output objects of the
  epochs it covers; without a complete checkpoint it starts from the first epoch with the initial state. Either
  way it logs why and records it (:class:`~..store.checkpoint_manifest.TryRecord`) before the first epoch runs.
* **Epoch**: the engine runs every member of the chain on the epoch's slice (a member's state as of the previous
  epoch in, its new state out) and stores the tail's outputs of the epoch as objects at once; they are never
  recomputed by this try.
* **Checkpoint** — the checkpoint barrier inside one task: "operators snapshot their state at the point in time
  when they have received all snapshot barriers from their input streams ... all updates to the state from records
  before the barriers will have been made, and no updates that depend on records from after the barriers". At an
  epoch boundary that is due (:func:`~.policy.due`; always after the last epoch) every stateful member's state is
  stored as of the same boundary, incrementally (:mod:`.lsm`: only the changed keys; :mod:`.policy`: compaction
  now and then), and one manifest covering all members and the outputs so far is committed last
  (:mod:`.storage`). Then retention drops the checkpoints beyond ``state.checkpoints.num-retained`` and this
  writer's announcements go (the manifest holds the references now). The task's timeline times each checkpoint
  as phase ``checkpoint`` (:data:`CHECKPOINT_PHASE`): what a checkpoint costs, ``C`` of the epochs' choice.
* **Live writer**: from the start to the last checkpoint the try renews every output writer's heartbeat
  (:class:`~..store.gc.lifecycle.Heartbeat`, every quarter of the grace floor), so the sweeper keeps the objects it
  announced — an epoch's outputs and a checkpoint's state runs, which no manifest lists until the next
  checkpoint — however long an epoch or a checkpoint takes (the live-writer rule of :mod:`~..store.gc.lifecycle`).
* **End**: the loop returns the outputs of every epoch; the caller commits them as the partition's result
  (:meth:`~..store.result_store.ResultStore.commit_written`, which renews the same heartbeat while it commits).
"""

from __future__ import annotations

import contextlib
import logging
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Protocol

from airflow_region_failover.checkpoint import lsm
from airflow_region_failover.checkpoint.plan import Epoch, EpochPlan
from airflow_region_failover.checkpoint.policy import due, plan_compaction, retained
from airflow_region_failover.checkpoint.resume import Identity, choose
from airflow_region_failover.checkpoint.storage import CheckpointStorage
from airflow_region_failover.exceptions import ManifestError, NotAvailable, StepOutputError
from airflow_region_failover.failover.checkpointing import CheckpointConfig
from airflow_region_failover.store.availability import ObjectCheck
from airflow_region_failover.store.checkpoint_manifest import (
    CheckpointManifest,
    MemberState,
    ResultObjects,
    StateRun,
    TryRecord,
)
from airflow_region_failover.store.commit import now_iso
from airflow_region_failover.store.dataplane.types import Target, Written
from airflow_region_failover.store.gc.lifecycle import Heartbeat
from airflow_region_failover.timeline import phase

if TYPE_CHECKING:
    import pyarrow as pa

log = logging.getLogger(__name__)
CHECKPOINT_PHASE = "checkpoint"
"""The timeline phase of one checkpoint (its state runs, manifest and retention): what a checkpoint costs, which
the run history records per step (:mod:`~..plugins.run_history`)."""
Listener = Callable[[CheckpointManifest | TryRecord], None]


@dataclass(frozen=True)
class EpochResult:
    """What one epoch produced: the tail's output objects and Spark schema per result, and each stateful member's
    new state (with :data:`~.lsm.KEY_GROUP`)."""

    outputs: Mapping[str, Written]
    schemas: Mapping[str, str]
    states: Mapping[str, pa.Table]


class Engine(Protocol):
    """Runs the members of a chain on one epoch (module rule)."""

    def run_epoch(self, epoch: Epoch, states: Mapping[str, pa.Table]) -> EpochResult:
        """Run every member on ``epoch`` with ``states`` (stateful member -> state as of the previous epoch)."""


@dataclass(frozen=True)
class Settings:
    """What the loop of one try needs: where checkpoints go (``storage``; ``targets``: this try's writer of each
    output result — the first also announces the state runs), the
    stateful members' keys and key groups, the try, what it may resume under, the options, whether it checkpoints
    at all (``enabled``), whether the run opted out of reuse, and the initial states."""

    storage: CheckpointStorage
    targets: tuple[Target, ...]
    members: tuple[str, ...]
    state_keys: Mapping[str, tuple[str, ...]]
    key_groups: Mapping[str, range]
    try_number: int
    identity: Identity
    config: CheckpointConfig = field(default_factory=CheckpointConfig)
    enabled: bool = True
    opted_out: bool = False
    initial: Mapping[str, pa.Table] = field(default_factory=dict)


@dataclass(frozen=True)
class Outcome:
    """What the loop did: the outputs of every epoch, where the try started, the checkpoints it committed."""

    outputs: tuple[ResultObjects, ...]
    started: TryRecord
    checkpoints: tuple[CheckpointManifest, ...]


@dataclass
class _Member:
    """A stateful member's state and runs as the loop goes (mutable, private to the loop)."""

    key: tuple[str, ...]
    state: pa.Table
    saved: pa.Table | None = None
    runs: list[StateRun] = field(default_factory=list)
    tables: dict[str, pa.Table] = field(default_factory=dict)


def run_epochs(settings: Settings, plan: EpochPlan, engine: Engine, listener: Listener | None = None) -> Outcome:
    """Run the epochs of ``plan`` from the best checkpoint (module rules) and return what they wrote."""
    with _alive(settings):
        return _run(settings, plan, engine, listener)


@contextlib.contextmanager
def _alive(settings: Settings) -> Iterator[None]:
    """Every output writer's heartbeat (:class:`~..store.gc.lifecycle.Heartbeat`), renewed while the loop runs (module
    rule), as an ordinary write's is while it writes and commits."""
    storage = settings.storage
    with contextlib.ExitStack() as stack:
        for target in settings.targets:
            key = target.keys.heartbeat(target.partition, target.attempt, target.writer)
            stack.enter_context(Heartbeat(storage.objects, key, storage.min_grace_seconds))
        yield


def _run(settings: Settings, plan: EpochPlan, engine: Engine, listener: Listener | None) -> Outcome:
    identity = replace(settings.identity, plan=plan.fingerprint)
    members, outputs, started = _start(settings, identity, len(plan))
    settings.storage.record_try(started)
    if listener is not None:
        listener(started)
    committed: list[CheckpointManifest] = []
    last_ms = time.time() * 1000
    for epoch in plan.epochs[started.resumed_epoch + 1:]:
        result = engine.run_epoch(epoch, {step: m.state for step, m in members.items()})
        outputs = _accumulate(outputs, result)
        for step, member in members.items():
            member.state = lsm.normalise(result.states[step], member.key, f"step {step!r}, epoch {epoch.index}")
        if settings.enabled and due(int(time.time() * 1000), int(last_ms), settings.config.interval_ms, epoch.last):
            with phase(CHECKPOINT_PHASE):
                manifest = _checkpoint(settings, identity, epoch, members, outputs)
            committed.append(manifest)
            last_ms = time.time() * 1000
            if listener is not None:
                listener(manifest)
    return Outcome(tuple(outputs.values()), started, tuple(committed))


def _start(settings: Settings, identity: Identity,
           epochs: int) -> tuple[dict[str, _Member], dict[str, ResultObjects], TryRecord]:
    """The members' states, the outputs so far and the try record: from the best complete checkpoint (its outputs
    there, its state readable), or the initial ones (module rule)."""
    candidates, why = choose(settings.storage.completed(), identity, settings.opted_out)
    storage = settings.storage
    check = ObjectCheck(storage.objects, storage.keys, verify_checksums=False, threads=settings.targets[0].threads)
    for manifest in candidates:
        lost = check.problems([o for r in manifest.outputs for o in r.objects])
        if lost:
            log.warning("checkpoint %d of %s is not complete (%s); trying an older one", manifest.seq,
                        storage.subtask, lost[0])
            why = f"checkpoint {manifest.seq} is not complete: {lost[0]}"
            continue
        try:
            members = {step: _restored(settings, manifest, step) for step in settings.state_keys}
        except (NotAvailable, ManifestError) as exc:
            log.warning("checkpoint %d of %s cannot be restored (%s); trying an older one", manifest.seq,
                        storage.subtask, exc)
            why = f"checkpoint {manifest.seq} could not be restored ({exc})"
            continue
        reason = (f"resumed from checkpoint {manifest.seq} (after epoch {manifest.epoch} of {epochs}, taken by try "
                  f"{manifest.try_number}): epochs 0..{manifest.epoch} are not recomputed")
        log.info("%s: %s", storage.subtask, reason)
        record = TryRecord(settings.try_number, now_iso(), epochs, manifest.seq, manifest.epoch, reason)
        return members, {o.result: o for o in manifest.outputs}, record
    reason = f"starts from the first epoch of {epochs}: {why}"
    log.info("%s: %s", storage.subtask, reason)
    members = {step: _Member(key, settings.initial[step]) for step, key in settings.state_keys.items()}
    return members, {}, TryRecord(settings.try_number, now_iso(), epochs, 0, -1, reason)


def _restored(settings: Settings, manifest: CheckpointManifest, step: str) -> _Member:
    """Member ``step``'s state as ``manifest`` recorded it: its runs merged (Flink's stream fault-tolerance docs: "the
    operators start with the state of the latest full snapshot and then apply a series of incremental snapshot updates
    to that state")."""
    key = settings.state_keys[step]
    saved = manifest.state_of(step)
    if saved is None:
        raise ManifestError(f"checkpoint {manifest.seq} holds no state of step {step!r}")
    member = _Member(key, settings.initial[step].slice(0, 0), runs=list(saved.runs))
    tables = [settings.storage.load_run(run) for run in saved.runs]
    member.tables = {_name(run): table for run, table in zip(saved.runs, tables, strict=True)}
    if tables:
        member.state = lsm.restore(tables, key)
    member.saved = member.state
    return member


def _accumulate(outputs: dict[str, ResultObjects], result: EpochResult) -> dict[str, ResultObjects]:
    """The outputs so far with one more epoch's objects appended (per result, in epoch order)."""
    merged = dict(outputs)
    for name, written in result.outputs.items():
        schema = result.schemas[name]
        before = merged.get(name) or ResultObjects(name, schema, (), 0, {})
        if before.objects and before.schema != schema:
            raise StepOutputError(f"result {name!r}: an epoch returned another schema than the epochs before it; "
                                  "return the same columns and types in every epoch")
        rows = dict(before.subpartition_rows)
        for sub, count in written.subpartition_rows.items():
            rows[sub] = rows.get(sub, 0) + count
        merged[name] = ResultObjects(name, before.schema if before.objects else schema,
                                     before.objects + written.objects, before.rows + written.rows, rows)
    return merged


def _checkpoint(settings: Settings, identity: Identity, epoch: Epoch, members: Mapping[str, _Member],
                outputs: Mapping[str, ResultObjects]) -> CheckpointManifest:
    """Store every member's state at this boundary and commit one manifest (module rule)."""
    began = time.monotonic()
    uploaded, states = 0, []
    for step, member in members.items():
        sent = _store_state(settings, step, member)
        uploaded += sent
        states.append(MemberState(step, tuple(member.runs), member.state.num_rows))
    storage = settings.storage
    manifest = storage.commit(CheckpointManifest(
        storage.keys.dag_id, storage.keys.run_id, storage.subtask, settings.members, 1, epoch.index, epoch.count,
        settings.try_number, identity.inputs, identity.code, identity.plan, identity.initial, tuple(states),
        tuple(outputs.values()), uploaded, int((time.monotonic() - began) * 1000), now_iso()))
    kept, dropped = retained(storage.sequence_numbers(), settings.config.num_retained)
    storage.drop(dropped)
    _discard(settings.targets, storage)
    log.info("%s: checkpoint %d after epoch %d of %d: %d state bytes uploaded of %d (%d runs), %d ms; retained %s",
             storage.subtask, manifest.seq, epoch.index, epoch.count, uploaded, manifest.state_bytes,
             sum(len(s.runs) for s in states), manifest.duration_ms, list(kept))
    return manifest


def _store_state(settings: Settings, step: str, member: _Member) -> int:
    """Store ``member``'s state incrementally (:mod:`.lsm`, :mod:`.policy`); updates its runs; returns the bytes
    uploaded."""
    config, state, previous = settings.config, member.state, member.saved
    member.saved = state
    if not config.incremental or previous is None or not member.runs:
        return _replace_runs(settings, step, member, [] if state.num_rows == 0 else [lsm.base_run(state)], 0)
    delta = lsm.diff(previous, state, member.key)
    if delta.num_rows == 0:
        return 0  # nothing changed: every run is re-referenced
    compaction = plan_compaction([r.rows for r in member.runs] + [delta.num_rows], config.max_sorted_runs,
                                 config.max_size_amplification)
    if compaction is None:
        return _replace_runs(settings, step, member, [delta], len(member.runs))
    log.info("step %r: compaction: %s", step, compaction.reason)
    if compaction.full:
        return _replace_runs(settings, step, member, [lsm.base_run(state)] if state.num_rows else [], 0)
    merged = lsm.merge([member.tables[_name(r)] for r in member.runs[compaction.start:]] + [delta], member.key,
                       drop_tombstones=False)
    return _replace_runs(settings, step, member, [merged], compaction.start)


def _replace_runs(settings: Settings, step: str, member: _Member, tables: Sequence[pa.Table], keep: int) -> int:
    """Keep ``member``'s first ``keep`` runs, store ``tables`` after them; returns the bytes uploaded."""
    uploaded, runs = 0, member.runs[:keep]
    for table in tables:
        run, sent = settings.storage.put_run(table, settings.targets[0], base=keep == 0 and not runs,
                                             deletes=lsm.deletes(table), key_groups=settings.key_groups[step])
        member.tables[_name(run)] = table
        runs.append(run)
        uploaded += sent
    member.runs = runs
    return uploaded


def _name(run: StateRun) -> str:
    """A run's identity in the loop's table cache: the hash of its first object."""
    return run.objects[0].sha256


def _discard(targets: Sequence[Target], storage: CheckpointStorage) -> None:
    """Delete this writer's announcements: the committed manifest holds its references now (best effort)."""
    for target in targets:
        prefix = target.keys.attempt_data(target.partition, target.attempt, target.writer)
        try:
            storage.objects.delete([item.key for item in storage.objects.listing(prefix)])
        except Exception:
            log.warning("could not discard %s; the sweeper will", prefix)

"""Which checkpoint a try resumes from, and the state it starts with.

Rules:

* **Resume** (Flink's stream fault-tolerance docs: "Upon a failure, Flink selects the latest completed checkpoint k
  ... and gives each operator the state that was snapshotted as part of checkpoint k"): a try resumes the completed
  checkpoint of its subtask in this run with the highest sequence number whose *identity* equals its own — the
  BLOCKING inputs it reads (content checksums, key groups), the code fingerprint, the epoch plan and the initial state
  (:class:`Identity`). A checkpoint taken under another identity is never resumed (its state was computed from other
  data or code); when none matches the try starts from the first epoch and says why (:func:`choose`: the first
  difference of the newest checkpoint). Only complete checkpoints exist as manifests, so a checkpoint half-written by
  a killed try is never seen; one whose state cannot be read back is skipped for the next (:mod:`.runner`). A run that
  turned reuse off (``region_failover_reuse: false``) resumes nothing.
* **Initial state** (VLDB'17: "For π parallel instances, each instance receives a range of key-groups
  ... by assigning contiguous key-groups we eliminate unnecessary seeks"): by default empty. With
  ``execution.state-recovery.path`` (a run id of the DAG, or ``latest``), it is the state of that run's final
  checkpoints (the checkpoint after its last epoch) of the same step, like Flink's restore from a retained
  checkpoint: subtask ``i`` takes the rows of its own key-group range from every old subtask's runs that overlap
  it (:func:`rescaled`), so the step's parallelism may differ between the runs. That needs state rows whose key
  groups are those of the step's keyed input; without a keyed input, old subtask ``i`` feeds new subtask ``i`` and
  the parallelism must be equal.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from airflow_region_failover.checkpoint import lsm
from airflow_region_failover.checkpoint.declared import ChainCheckpoint
from airflow_region_failover.checkpoint.storage import CheckpointStorage, Listed, final_checkpoints
from airflow_region_failover.exceptions import GraphError
from airflow_region_failover.failover.checkpointing import LATEST, STATE_RECOVERY_KEY
from airflow_region_failover.store.checkpoint_manifest import CheckpointManifest, StateRun
from airflow_region_failover.store.gc.lifecycle import list_runs
from airflow_region_failover.store.manifest import InputVersion
from airflow_region_failover.store.s3.objects import Objects

if TYPE_CHECKING:
    import pyarrow as pa

log = logging.getLogger(__name__)
REUSE_OFF = "the run turned reuse off (region_failover_reuse: false), so no checkpoint is resumed"


@dataclass(frozen=True)
class Identity:
    """What a checkpoint may be resumed under (module rule)."""

    inputs: tuple[InputVersion, ...]
    code: str
    plan: str
    initial: str = ""

    def mismatch(self, manifest: CheckpointManifest) -> str | None:
        """The first way ``manifest`` differs from this identity, as a sentence, or ``None``."""
        where = f"checkpoint {manifest.seq} (after epoch {manifest.epoch}, try {manifest.try_number})"
        then = {v.partition: v for v in manifest.inputs}
        now = {v.partition: v for v in self.inputs}
        for partition in sorted(set(then) | set(now), key=str):
            old, new = then.get(partition), now.get(partition)
            if old is None or new is None:
                reads = ("did not read", "reads") if old is None else ("read", "does not read")
                return f"{where} {reads[0]} input {partition}; this try {reads[1]} it"
            if (old.content_checksum, old.key_groups) != (new.content_checksum, new.key_groups):
                return (f"{where} was taken from other input data: {partition} had checksum "
                        f"{old.content_checksum[:12]} (attempt {old.attempt}), now {new.content_checksum[:12]} "
                        f"(attempt {new.attempt})")
        if manifest.code != self.code:
            return f"{where} was computed by other code (fingerprint {manifest.code[:12]}, now {self.code[:12]})"
        if manifest.plan != self.plan:
            return f"{where} was taken under another epoch plan (the input's objects or the declaration changed)"
        if manifest.initial != self.initial:
            return f"{where} started from another initial state ({manifest.initial or 'empty'})"
        return None


def choose(listed: Sequence[Listed], identity: Identity, opted_out: bool) -> tuple[list[CheckpointManifest], str]:
    """The checkpoints a try may resume, best first, and — when there is none — why (module rule)."""
    if opted_out:
        return [], REUSE_OFF
    if not listed:
        return [], "no completed checkpoint of this subtask in this run"
    matching = [item.manifest for item in listed if item.manifest is not None and identity.mismatch(item.manifest)
                is None]
    if matching:
        return matching, ""
    newest = listed[0]
    if newest.manifest is None:
        return [], f"checkpoint {newest.seq} cannot be read ({newest.error})"
    return [], identity.mismatch(newest.manifest) or ""


def rescaled(runs_by_old_subtask: Sequence[Sequence[tuple[StateRun, pa.Table]]], groups: range,
             key: Sequence[str]) -> pa.Table | None:
    """The state of a subtask owning key groups ``groups``, from every old subtask's runs (oldest first, each with
    its rows): runs that do not overlap ``groups`` are not read; the rows of other key groups are dropped; each old
    subtask's runs are merged, and the old subtasks' disjoint states concatenated (module rule); ``None`` when no
    old run overlaps ``groups``."""
    import pyarrow as pa
    import pyarrow.compute as pc

    states = []
    for runs in runs_by_old_subtask:
        tables = [table for run, table in runs if _overlaps(run.key_groups, groups)]
        if not tables:
            continue
        state = lsm.restore(tables, key)
        column = state.column(lsm.KEY_GROUP)
        mask = pc.and_(pc.greater_equal(column, groups.start), pc.less(column, groups.stop))
        states.append(state.filter(mask))
    if not states:
        return None  # no old subtask held state of these key groups
    merged = pa.concat_tables(states)
    return merged.sort_by([(lsm.KEY_GROUP, "ascending"), *((c, "ascending") for c in key)])


def _overlaps(a: range, b: range) -> bool:
    return a.start < b.stop and b.start < a.stop


@dataclass(frozen=True)
class Recovered:
    """The initial states of a subtask's stateful members and what they came from (its identity's ``initial``)."""

    source: str
    states: Mapping[str, pa.Table]


def recover(objects: Objects, storage: CheckpointStorage, path: str, chain: ChainCheckpoint, index: int,
            groups: Mapping[str, range], empty: Callable[[str], pa.Table]) -> Recovered:
    """The initial states of subtask ``index`` from the final checkpoints of run ``path`` (or the newest other
    run with some, for ``latest``) of the same step (module rule); :class:`GraphError` naming the run, the step
    and the fix when they cannot serve."""
    keys, step = storage.keys, storage.subtask.result
    run_id, finals = _source(objects, storage, path, step)
    old = len(finals)
    if sorted(finals) != list(range(old)):
        raise GraphError(f"{STATE_RECOVERY_KEY}: run {run_id!r} has final checkpoints of {step}#{sorted(finals)} "
                         f"only; restore from a run whose every subtask of {step!r} finished")
    states = {}
    source = CheckpointStorage(objects, objects.layout.run(keys.dag_id, run_id), storage.subtask,
                               storage.min_grace_seconds)
    for member in chain.stateful:
        states[member] = _member_state(source, finals, member, chain, index, groups[member], empty(member))
    label = f"{run_id}:" + ",".join(f"{i}/{finals[i].seq}" for i in range(old))
    log.info("%s: initial state from run %r's final checkpoints of %d subtask(s) (%s)", storage.subtask, run_id, old,
             "by key-group range" if all(chain.rescalable(m) for m in chain.stateful) else "subtask by subtask")
    return Recovered(label, states)


def _source(objects: Objects, storage: CheckpointStorage, path: str,
            step: str) -> tuple[str, dict[int, CheckpointManifest]]:
    keys = storage.keys
    candidates = [path] if path != LATEST else [r.run_id for r in list_runs(objects, objects.layout, keys.dag_id)
                                                if r.run_id != keys.run_id]
    for run_id in candidates:
        finals = final_checkpoints(objects, objects.layout.run(keys.dag_id, run_id), step,
                                   storage.min_grace_seconds)
        if finals:
            return run_id, finals
    raise GraphError(f"{STATE_RECOVERY_KEY}={path!r}: no retained final checkpoint of step {step!r} in "
                     f"{'any other run' if path == LATEST else f'run {path!r}'} of {keys.dag_id!r}; name a run whose "
                     "checkpointed step finished (its checkpoints are kept with the run)")


def _member_state(source: CheckpointStorage, finals: Mapping[int, CheckpointManifest], member: str,
                  chain: ChainCheckpoint, index: int, groups: range, empty: pa.Table) -> pa.Table:
    """One member's initial state: rescaled by key-group range, or old subtask ``index``'s whole state."""
    key = chain.stateful[member].state_key
    if not chain.rescalable(member):
        if len(finals) <= index or index not in finals:
            raise GraphError(f"{STATE_RECOVERY_KEY}: step {member!r} cannot take subtask {index}'s state from "
                             f"{len(finals)} old subtask(s): its state is not keyed like its input, so the "
                             "parallelism must stay equal (key the sliced input by a state_key column to rescale)")
        wanted = [finals[index]]
    else:
        wanted = [finals[i] for i in sorted(finals)]
    per_old = []
    for manifest in wanted:
        saved = manifest.state_of(member)
        runs = [] if saved is None else [(run, source.load_run(run)) for run in saved.runs]
        per_old.append(runs)
    state = rescaled(per_old, groups if chain.rescalable(member) else range(0, 2**31 - 1), key)
    return empty if state is None else state.cast(empty.schema)

"""Which checkpoint a try resumes from, and the state it starts with.

Rules:

* **Resume** (seed 002: "Upon a failure, Flink selects the latest completed checkpoint k ... and gives each operator
  the state that was snapshotted as part of checkpoint k"): a try resumes the completed checkpoint of its subtask
  in this run with the highest sequence number whose *identity* equals its own — the BLOCKING inputs it reads
  (content checksums, key groups), the code fingerprint, the epoch plan and the initial state (:class:`Identity`).
  A checkpoint taken under another identity is never resumed (its state was computed from other data or code);
  when none matches the try starts from the first epoch and says why (:func:`choose`: the first difference of the
  newest checkpoint). Only complete checkpoints exist as manifests, so a checkpoint half-written by a killed try is
  never seen; one whose state cannot be read back is skipped for the next (:mod:`.runner`). A run that turned reuse
  off (``region_failover_reuse: false``) resumes nothing.
* **Initial state** (VLDB'17, seed 001: "For π parallel instances, each instance receives a range of key-groups
  ... by assigning contiguous key-groups we eliminate unnecessary seeks"): by default empty. With
  ``execution.state-recovery.path`` (a run id of the DAG, or ``latest``), it is the state of that run's final
  checkpoints (the checkpoint after its last epoch) of the same step, like Flink's restore from a retained
  checkpoint: subtask ``i`` takes the rows of its own key-group range from every old subtask's runs that overlap
  it (:func:`rescaled`), so the step's parallelism may differ between the runs. That needs state rows whose key
  groups are those of the step's keyed input; without a keyed input, old subtask ``i`` feeds new subtask ``i`` and
  the parallelism must be equal.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from airflow_region_failover.checkpoint import lsm
from airflow_region_failover.checkpoint.storage import Listed
from airflow_region_failover.store.checkpoints import CheckpointManifest, StateRun
from airflow_region_failover.store.manifest import InputVersion

if TYPE_CHECKING:
    import pyarrow as pa

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

"""Where a checkpointed subtask's checkpoints live in the result store, on the store's own primitives.

Rules:

* A state run is encoded like any result object (:func:`~.store.dataplane.parquet.write_arrow`: deterministic Parquet,
  bounded objects) but with its own :func:`run_codec` — zstd, and the sorted key columns delta-encoded (measured
  by ``benchmarks/bench_state_bytes.py``: a run of 50k changed keys of 1M took 6.6 bytes per key with Snappy and
  plain keys, 3.4 so) — and stored content-addressed (:func:`~.store.content.put_content`): a run already stored
  is not uploaded again, and each object is announced under this try's writer prefix first, so the sweeper never
  takes a live writer's files for garbage (:mod:`~.store.gc.registry`).
* A checkpoint is committed by its manifest (:class:`~.store.checkpoint_manifest.CheckpointManifest`), written last with
  ``If-None-Match: *`` under the next sequence number, after every shared object it lists was confirmed present and
  fresh within the grace floor's bound, as a result commit does (:mod:`~.store.content`): never half-visible. Two
  writers racing for one number (a zombie try) both keep their checkpoints: the loser takes the next number.
* Sequence numbers are checkpoint ids, unique per subtask across its tries, as Flink's checkpoint id counter
  survives restarts (seed 002: "Each barrier carries the ID of the snapshot whose records it pushed in front of
  it"; the id names one snapshot): the next one is 1 + the highest id any try recorded, its manifests *and* its
  completion notes (:meth:`CheckpointStorage.next_seq`), so a manifest dropped or deleted behind the store's back
  never lends its id to a later try's checkpoint, and the history credits each id to the try that took it.
* Dropping a checkpoint deletes its manifest only; the files it listed go when no retained manifest lists them
  (the derived registry's sweep). Try records (:class:`~.store.checkpoint_manifest.TryRecord`) say where each try
started.
"""

from __future__ import annotations

import contextlib
import re
import time
from collections.abc import Iterator
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

from airflow_region_failover.exceptions import AlreadyCommitted, IncompleteCommit, ManifestError
from airflow_region_failover.graph.ids import PartitionId
from airflow_region_failover.store.checkpoint_manifest import CheckpointManifest, CompletedNote, StateRun, TryRecord
from airflow_region_failover.store.content import COMMIT_SHARE, LAND_SHARE, confirm_shared
from airflow_region_failover.store.dataplane.encoding import Codec
from airflow_region_failover.store.dataplane.parquet import write_arrow
from airflow_region_failover.store.dataplane.reading import load_table
from airflow_region_failover.store.dataplane.types import Target
from airflow_region_failover.store.keys import CHECKPOINTS, RunKeys
from airflow_region_failover.store.s3.objects import Objects

if TYPE_CHECKING:
    import pyarrow as pa

_NAME = re.compile(r"([ctn])(\d{6})\.json\Z")
_HISTORY = re.compile(rf"{re.escape(CHECKPOINTS)}/([^/]+)/p(\d{{5,6}})/([tn])\d{{6}}\.json\Z")
COMMIT_TRIES = 5
SMALL_RUN_ROWS = 256 * 1024
"""Rows up to which a run is compressed harder (:func:`run_codec`; rows, not Arrow bytes, which depend on how the
table's buffers happen to be laid out)."""


def run_codec(table: pa.Table) -> Codec:
    """How a state run's pages are written: zstd, integer columns not dictionary-encoded (the sorted keys)
    ``DELTA_BINARY_PACKED``; level 9 for a run of at most :data:`SMALL_RUN_ROWS` rows (an incremental one: measured
    3 % smaller than level 3, a few ms more), level 3 above (a whole state of 1M rows: level 9 took 1.3x the time
    and saved nothing); no statistics (a run is always read whole, so min/max prune nothing: ~270 bytes of a small
    run's ~1.4 kB). A function of the rows, so the same state gives the same bytes."""
    return Codec("zstd", 9 if table.num_rows <= SMALL_RUN_ROWS else 3, delta_integers=True, statistics=False)


@dataclass(frozen=True)
class Listed:
    """One completed checkpoint's key and sequence number, and its manifest or why it cannot be read."""

    seq: int
    key: str
    manifest: CheckpointManifest | None
    error: str = ""


@dataclass(frozen=True)
class CheckpointStorage:
    """The checkpoints of the chain subtask whose tail is ``subtask`` (a step id and index) in one run."""

    objects: Objects
    keys: RunKeys
    subtask: PartitionId
    min_grace_seconds: float

    @property
    def prefix(self) -> str:
        """``R/_checkpoints.v1/<step>/P/``."""
        return self.keys.checkpoints_prefix(self.subtask)

    def _names(self) -> Iterator[tuple[str, int, str]]:
        for item in self.objects.listing(self.prefix):
            match = _NAME.match(item.key[len(self.prefix):])
            if match and item.size > 0:
                yield match.group(1), int(match.group(2)), item.key

    def completed(self) -> list[Listed]:
        """Every completed checkpoint, newest (highest sequence number) first, each read and checked."""
        found = sorted(((seq, key) for kind, seq, key in self._names() if kind == "c"), reverse=True)
        return [self._load(seq, key) for seq, key in found]

    def sequence_numbers(self) -> list[int]:
        """The sequence numbers of the completed checkpoints (one LIST, nothing read)."""
        return sorted(seq for kind, seq, _ in self._names() if kind == "c")

    def next_seq(self) -> int:
        """The id the next checkpoint takes: 1 + the highest any try of the subtask recorded — its manifests and
        its completion notes, which outlive a manifest dropped by retention or deleted behind the store's back
        (module rule; one LIST)."""
        return 1 + max((s for kind, s, _ in self._names() if kind in "cn"), default=0)

    def _load(self, seq: int, key: str) -> Listed:
        body = self.objects.get(key)
        if body is None:
            return Listed(seq, key, None, "dropped while it was read")
        try:
            manifest = CheckpointManifest.from_json(body, where=key)
        except ManifestError as exc:
            return Listed(seq, key, None, str(exc))
        if (manifest.dag_id, manifest.run_id, manifest.subtask, manifest.seq) != (
                self.keys.dag_id, self.keys.run_id, self.subtask, seq):
            return Listed(seq, key, None, f"{key} describes checkpoint {manifest.seq} of {manifest.subtask}")
        return Listed(seq, key, manifest)

    def _still_there(self, manifest: CheckpointManifest) -> bool:
        """After a late landing (:mod:`..store.commit`'s rule): every object confirmed again, else the checkpoint
        is deleted (no resume may take it) and ``False``."""
        try:
            confirm_shared(self.objects, self.objects.layout, manifest.objects(), "late checkpoint",
                           self.min_grace_seconds)
        except IncompleteCommit:
            self.objects.delete([self.keys.checkpoint(self.subtask, manifest.seq)])
            return False
        return True

    def commit(self, manifest: CheckpointManifest) -> CheckpointManifest:
        """Commit ``manifest`` under the next free sequence number (module rule); returns it as committed.
        :class:`IncompleteCommit` when an object it lists is missing or the store is too slow."""
        where = f"checkpoint of {self.subtask} in {self.keys.dag_id}/{self.keys.run_id}"
        for _ in range(COMMIT_TRIES):
            seq = self.next_seq()
            candidate, key = replace(manifest, seq=seq), self.keys.checkpoint(self.subtask, seq)
            began = time.monotonic()
            confirm_shared(self.objects, self.objects.layout, candidate.objects(), where, self.min_grace_seconds)
            if time.monotonic() - began > COMMIT_SHARE * self.min_grace_seconds:
                continue  # the sweeper's bound: the PUT is issued soon after the confirmation, or confirm again
            try:
                self.objects.put_if_absent(key, candidate.to_json())
            except AlreadyCommitted:
                continue  # another writer took this number: take the next one
            if time.monotonic() - began > LAND_SHARE * self.min_grace_seconds and not self._still_there(candidate):
                continue  # landed later than the sweeper allows and an object went meanwhile: withdrawn
            with contextlib.suppress(Exception):  # the history's note: best effort, the checkpoint stands
                self.objects.put_if_absent(self.keys.checkpoint_note(self.subtask, seq),
                                           CompletedNote.of(candidate).to_json())
            return candidate
        raise IncompleteCommit(f"{where}: no checkpoint number could be taken in {COMMIT_TRIES} tries; retry the task")

    def drop(self, seqs: tuple[int, ...]) -> int:
        """Delete the manifests of checkpoints ``seqs`` (module rule); returns how many were deleted."""
        if not seqs:
            return 0
        return self.objects.delete([self.keys.checkpoint(self.subtask, seq) for seq in seqs])

    def record_try(self, record: TryRecord) -> None:
        """Record where a try started (the first record of a try stands)."""
        with contextlib.suppress(AlreadyCommitted):
            self.objects.put_if_absent(self.keys.checkpoint_try(self.subtask, record.try_number), record.to_json())

    def tries(self) -> list[TryRecord]:
        """The try records, oldest first (unreadable ones are skipped)."""
        records = []
        for _, _, key in sorted(n for n in self._names() if n[0] == "t"):
            body = self.objects.get(key)
            with contextlib.suppress(ManifestError):
                records.append(TryRecord.from_json(body or b"", where=key))
        return records

    def put_run(self, table: pa.Table, target: Target, base: bool, deletes: int,
                key_groups: range) -> tuple[StateRun, int]:
        """Store ``table`` (a sorted run) content-addressed through ``target`` (this try's writer, which
        announces it); returns its :class:`StateRun` and the bytes uploaded now."""
        written = write_arrow(table, target, run_codec(table))
        return StateRun(written.objects, table.num_rows, deletes, base, key_groups), written.tally.new_bytes

    def load_run(self, run: StateRun, verify: bool = True) -> pa.Table:
        """The rows of ``run`` (its objects fetched and checked: sizes always, SHA-256s when ``verify``)."""
        import pyarrow as pa

        tables = [load_table(self.objects, self.keys, entry, verify, self.subtask) for entry in run.objects]
        if not tables:
            raise ManifestError(f"a state run of {self.subtask} lists no object")
        return pa.concat_tables(tables) if len(tables) > 1 else tables[0]


def history(objects: Objects, keys: RunKeys) -> list[tuple[PartitionId, TryRecord | CompletedNote]]:
    """Every try record and completion note of the run's checkpointed subtasks (one LIST, then a GET each),
    as ``(tail subtask, record)``; unreadable ones are skipped."""
    prefix = keys.run_prefix
    found: list[tuple[PartitionId, TryRecord | CompletedNote]] = []
    for item in objects.listing(prefix + CHECKPOINTS + "/"):
        match = _HISTORY.match(item.key[len(prefix):])
        body = objects.get(item.key) if match else None
        if match is None or body is None:
            continue
        kind = TryRecord if match.group(3) == "t" else CompletedNote
        with contextlib.suppress(ManifestError):
            found.append((PartitionId(match.group(1), int(match.group(2))), kind.from_json(body, where=item.key)))
    return found


_FINAL = re.compile(r"p(\d{5,6})/c\d{6}\.json\Z")


def final_checkpoints(objects: Objects, keys: RunKeys, step: str,
                      min_grace_seconds: float) -> dict[int, CheckpointManifest]:
    """Per subtask index, the newest completed checkpoint after the last epoch of the checkpoints of step
    ``step`` (a chain's tail) in the run of ``keys``: what a later run may start from."""
    prefix = keys.run_prefix + f"{CHECKPOINTS}/{step}/"
    indices = sorted({int(m.group(1)) for item in objects.listing(prefix)
                      if (m := _FINAL.match(item.key[len(prefix):]))})
    found = {}
    for index in indices:
        storage = CheckpointStorage(objects, keys, PartitionId(step, index), min_grace_seconds)
        final = next((i.manifest for i in storage.completed()
                      if i.manifest is not None and i.manifest.epoch == i.manifest.epochs - 1), None)
        if final is not None:
            found[index] = final
    return found

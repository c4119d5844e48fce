"""What a checkpoint of a checkpointed step records: :class:`CheckpointManifest`; where a try started:
:class:`TryRecord`; that a checkpoint completed: :class:`CompletedNote` (keys: :meth:`.keys.RunKeys.checkpoint`,
:meth:`.keys.RunKeys.checkpoint_try`, :meth:`.keys.RunKeys.checkpoint_note`).

Rules:

* A checkpoint manifest is the commit record of one consistent cut of a chain subtask after epoch ``epoch`` —
  Flink's snapshot: "for each parallel stream data source, the offset/position in the stream when the snapshot
  was started; for each operator, a pointer to the state that was stored as part of the snapshot". The position
  is ``epoch`` of the epoch plan ``plan``; the pointers are each member's sorted state files (:class:`StateRun`,
  oldest first: a base run, then deltas of upserts and deletions, RocksDB's sstables). It also lists what the
  epochs up to ``epoch`` wrote to each output result (:class:`ResultObjects`), so a resumed try commits those
  objects without recomputing them.
* It is written last, with ``If-None-Match: *``, after every object it lists is stored (content-addressed,
  :mod:`.content`): a checkpoint is complete exactly when its manifest exists, and never half-visible. It records
  what it may be resumed under — the BLOCKING ``inputs`` (content checksums), the ``code`` fingerprint, the epoch
  ``plan`` fingerprint and the ``initial`` state it started from — and a try resumes only a checkpoint whose four
  match its own.
* Every object it lists is a shared object, so the derived shared registry (:mod:`.gc.registry`) counts one reference
  per retained checkpoint manifest, as Flink's SharedStateRegistry "increases the counts for all files that are
  referenced in the new checkpoint by 1" and, when a checkpoint is dropped, decreases them: dropping a
  checkpoint here deletes its manifest, and the sweep deletes a file no retained manifest lists.
* Decoding rejects unknown formats and versions and every malformed field, naming the key.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from airflow_region_failover.exceptions import ManifestError
from airflow_region_failover.graph.errors import RegionFailoverError
from airflow_region_failover.graph.ids import PartitionId
from airflow_region_failover.store.manifest import InputVersion, ObjectEntry, json_document

FORMAT = "airflow-region-failover/checkpoint"
TRY_FORMAT = "airflow-region-failover/checkpoint-try"
NOTE_FORMAT = "airflow-region-failover/checkpoint-note"
VERSION = 1


@dataclass(frozen=True)
class StateRun:
    """One sorted state file of a member (its ``objects``): ``rows`` including ``deletes`` tombstones; ``base``:
    a full run (nothing older is needed under it); ``key_groups``: the key groups its rows belong to."""

    objects: tuple[ObjectEntry, ...]
    rows: int
    deletes: int
    base: bool
    key_groups: range

    @property
    def bytes(self) -> int:
        """The run's stored bytes."""
        return sum(o.size for o in self.objects)

    def to_dict(self) -> dict[str, Any]:
        """JSON form."""
        return {"objects": [o.to_dict() for o in self.objects], "rows": self.rows, "deletes": self.deletes,
                "base": self.base, "key_groups": [self.key_groups.start, self.key_groups.stop]}

    @classmethod
    def from_dict(cls, body: Mapping[str, Any]) -> StateRun:
        """Parse the JSON form."""
        start, stop = (_int(v) for v in body["key_groups"])
        return cls(_entries(body["objects"]), _int(body["rows"]), _int(body["deletes"]), _bool(body["base"]),
                   range(start, stop))


@dataclass(frozen=True)
class MemberState:
    """A chain member's state at the checkpoint: its ``runs`` (oldest first) and its live ``rows``."""

    step: str
    runs: tuple[StateRun, ...]
    rows: int

    def to_dict(self) -> dict[str, Any]:
        """JSON form."""
        return {"step": self.step, "runs": [r.to_dict() for r in self.runs], "rows": self.rows}

    @classmethod
    def from_dict(cls, body: Mapping[str, Any]) -> MemberState:
        """Parse the JSON form."""
        return cls(_str(body["step"]), tuple(StateRun.from_dict(r) for r in body["runs"]), _int(body["rows"]))


@dataclass(frozen=True)
class ResultObjects:
    """What the epochs so far wrote to one output ``result``: its objects in epoch order, the Spark ``schema``
    (JSON), the rows, and the rows per subpartition of a keyed result."""

    result: str
    schema: str
    objects: tuple[ObjectEntry, ...]
    rows: int
    subpartition_rows: Mapping[int, int] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        """JSON form."""
        return {"result": self.result, "schema": self.schema, "objects": [o.to_dict() for o in self.objects],
                "rows": self.rows, "subpartition_rows": {str(k): v for k, v in sorted(self.subpartition_rows.items())}}

    @classmethod
    def from_dict(cls, body: Mapping[str, Any]) -> ResultObjects:
        """Parse the JSON form."""
        return cls(_str(body["result"]), _str(body["schema"]), _entries(body["objects"]), _int(body["rows"]),
                   {int(k): _int(v) for k, v in body.get("subpartition_rows", {}).items()})


@dataclass(frozen=True)
class CheckpointManifest:
    """A completed checkpoint of the chain subtask ``members`` (tail ``subtask``) after ``epoch`` of ``epochs``
    (module rules); ``seq`` orders the subtask's checkpoints in the run, ``try_number`` took it."""

    dag_id: str
    run_id: str
    subtask: PartitionId
    members: tuple[str, ...]
    seq: int
    epoch: int
    epochs: int
    try_number: int
    inputs: tuple[InputVersion, ...]
    code: str
    plan: str
    initial: str
    states: tuple[MemberState, ...]
    outputs: tuple[ResultObjects, ...]
    uploaded_bytes: int = 0
    duration_ms: int = 0
    committed_at: str = ""

    def objects(self) -> tuple[ObjectEntry, ...]:
        """Every object it references (outputs, then state runs): what the shared registry counts."""
        listed = [o for r in self.outputs for o in r.objects]
        listed.extend(o for s in self.states for run in s.runs for o in run.objects)
        return tuple(listed)

    @property
    def state_bytes(self) -> int:
        """The bytes of every state run it references (the full state as stored)."""
        return sum(run.bytes for s in self.states for run in s.runs)

    def state_of(self, step: str) -> MemberState | None:
        """The state of member ``step``, if it has one."""
        return next((s for s in self.states if s.step == step), None)

    def to_json(self) -> bytes:
        """Canonical JSON bytes."""
        body = {"format": FORMAT, "version": VERSION, "dag_id": self.dag_id, "run_id": self.run_id,
                "subtask": str(self.subtask), "members": list(self.members), "seq": self.seq, "epoch": self.epoch,
                "epochs": self.epochs, "try": self.try_number, "inputs": [i.to_dict() for i in self.inputs],
                "code": self.code, "plan": self.plan, "initial": self.initial,
                "states": [s.to_dict() for s in self.states], "outputs": [o.to_dict() for o in self.outputs],
                "uploaded_bytes": self.uploaded_bytes, "duration_ms": self.duration_ms,
                "committed_at": self.committed_at}
        return json.dumps(body, sort_keys=True, separators=(",", ":")).encode()

    @classmethod
    def from_json(cls, data: bytes, *, where: str) -> CheckpointManifest:
        """Decode and validate; :class:`ManifestError` naming ``where`` on any problem."""
        body = _document(data, where, FORMAT)
        try:
            return cls(_str(body["dag_id"]), _str(body["run_id"]), PartitionId.parse(_str(body["subtask"])),
                       tuple(_str(m) for m in body["members"]), _int(body["seq"]), _int(body["epoch"]),
                       _int(body["epochs"]), _int(body["try"]),
                       tuple(InputVersion.from_dict(i) for i in body["inputs"]), _str(body["code"]),
                       _str(body["plan"]), _str(body["initial"]),
                       tuple(MemberState.from_dict(s) for s in body["states"]),
                       tuple(ResultObjects.from_dict(o) for o in body["outputs"]), _int(body["uploaded_bytes"]),
                       _int(body["duration_ms"]), _str(body["committed_at"]))
        except (KeyError, TypeError, ValueError, RegionFailoverError) as exc:
            raise ManifestError(f"checkpoint {where} is malformed: {exc!r}") from None


@dataclass(frozen=True)
class TryRecord:
    """Where try ``try_number`` of a checkpointed subtask started: from checkpoint ``resumed_seq`` after epoch
    ``resumed_epoch`` (skipping ``skipped`` epochs), or (``resumed_seq == 0``) from the first epoch, and why."""

    try_number: int
    started_at: str
    epochs: int
    resumed_seq: int = 0
    resumed_epoch: int = -1
    reason: str = ""

    @property
    def skipped(self) -> int:
        """The epochs this try did not recompute."""
        return self.resumed_epoch + 1

    def to_json(self) -> bytes:
        """Canonical JSON bytes."""
        body = {"format": TRY_FORMAT, "version": VERSION, "try": self.try_number, "started_at": self.started_at,
                "epochs": self.epochs, "resumed_seq": self.resumed_seq, "resumed_epoch": self.resumed_epoch,
                "reason": self.reason}
        return json.dumps(body, sort_keys=True, separators=(",", ":")).encode()

    @classmethod
    def from_json(cls, data: bytes, *, where: str) -> TryRecord:
        """Decode and validate; :class:`ManifestError` naming ``where``."""
        body = _document(data, where, TRY_FORMAT)
        try:
            return cls(_int(body["try"]), _str(body["started_at"]), _int(body["epochs"]), _int(body["resumed_seq"]),
                       _int(body["resumed_epoch"]), _str(body["reason"]))
        except (KeyError, TypeError, ValueError) as exc:
            raise ManifestError(f"checkpoint try record {where} is malformed: {exc!r}") from None


@dataclass(frozen=True)
class CompletedNote:
    """That checkpoint ``seq`` (after ``epoch`` of ``epochs``) was completed by try ``try_number`` at
    ``committed_at``, uploading ``uploaded_bytes`` of its ``state_bytes`` in ``duration_ms`` — the failover view's
    history, kept when retention drops the checkpoint itself."""

    seq: int
    epoch: int
    epochs: int
    try_number: int
    committed_at: str
    uploaded_bytes: int
    state_bytes: int
    duration_ms: int

    @classmethod
    def of(cls, manifest: CheckpointManifest) -> CompletedNote:
        """The note of a committed checkpoint."""
        return cls(manifest.seq, manifest.epoch, manifest.epochs, manifest.try_number, manifest.committed_at,
                   manifest.uploaded_bytes, manifest.state_bytes, manifest.duration_ms)

    def to_json(self) -> bytes:
        """Canonical JSON bytes."""
        body = {"format": NOTE_FORMAT, "version": VERSION, "seq": self.seq, "epoch": self.epoch,
                "epochs": self.epochs, "try": self.try_number, "committed_at": self.committed_at,
                "uploaded_bytes": self.uploaded_bytes, "state_bytes": self.state_bytes,
                "duration_ms": self.duration_ms}
        return json.dumps(body, sort_keys=True, separators=(",", ":")).encode()

    @classmethod
    def from_json(cls, data: bytes, *, where: str) -> CompletedNote:
        """Decode and validate; :class:`ManifestError` naming ``where``."""
        body = _document(data, where, NOTE_FORMAT)
        try:
            return cls(_int(body["seq"]), _int(body["epoch"]), _int(body["epochs"]), _int(body["try"]),
                       _str(body["committed_at"]), _int(body["uploaded_bytes"]), _int(body["state_bytes"]),
                       _int(body["duration_ms"]))
        except (KeyError, TypeError, ValueError) as exc:
            raise ManifestError(f"checkpoint note {where} is malformed: {exc!r}") from None


def _document(data: bytes, where: str, kind: str) -> dict[str, Any]:
    return json_document(data, f"checkpoint {where}", kind, frozenset({VERSION}))


def _entries(items: object) -> tuple[ObjectEntry, ...]:
    if not isinstance(items, list):
        raise TypeError(f"expected a list of objects, got {items!r}")
    entries = tuple(ObjectEntry.from_dict(o, 2) for o in items)
    if not all(e.shared for e in entries):
        raise ValueError("a checkpoint lists shared (content-addressed) objects only")
    return entries


def _int(value: object) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"expected an integer, got {value!r}")
    return value


def _str(value: object) -> str:
    if not isinstance(value, str):
        raise TypeError(f"expected a string, got {value!r}")
    return value


def _bool(value: object) -> bool:
    if not isinstance(value, bool):
        raise TypeError(f"expected a boolean, got {value!r}")
    return value

"""What one task read and wrote, and which restart started it — the facts its lineage
(:mod:`~airflow_region_failover.observability.lineage`) and its metrics
(:mod:`~airflow_region_failover.observability.metrics`) report, kept in the task's summary (its return value) so
both say the same. This module is the only one that knows the summary's JSON keys.

Rules:

* ``inputs``: every BLOCKING partition the task read — or, when it kept its outputs, would have read — at the
  committed version its producer's current try published: ``attempt``, ``bytes`` and ``objects`` of what this
  subtask reads of it (over a keyed edge only its subpartitions), and ``reused``: this try was started by a
  restart that did not re-produce the partition (it is in that decision's ``reused`` set);
* ``outputs``: every BLOCKING partition the task published (a sink result too): its committed ``attempt``,
  ``rows``, ``bytes``, ``objects`` and ``checksum``, and ``kept``: committed by an earlier try and kept
  (:mod:`.reuse`), not recomputed. PIPELINED partitions are attempt-scoped scratch and appear in neither;
* ``restart``: the applied decision whose clear started this try (``decision`` id, ``strategy``, this task's
  region ``reason``), or absent when none did (a first try, Airflow's retry, a person's clear).

The summary (:class:`TaskSummary`, the step task's XCom ``return_value``) is the ledger plus the task's
``subtask`` (a chain's tail, with ``chain`` its members when there are several), ``attempt``, ``rows`` per result
published, ``kept`` (result -> attempt, only when the outputs were kept), ``read`` (what it read from the
store: bytes and objects fetched, and the bytes of the partitions they belong to), ``timeline`` (where its
time went, :class:`~airflow_region_failover.timeline.Timeline`; absent where no clock ran) and, for a checkpointed
chain, ``checkpoint`` (:class:`CheckpointEntry`: the epochs, the checkpoint the try resumed from and the epochs it
skipped, the checkpoints it completed and the state bytes they uploaded).
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from airflow_region_failover.failover.run_log import Decision, frozen
from airflow_region_failover.graph.ids import PartitionId, SubtaskId
from airflow_region_failover.graph.model import Edge, Exchange, JobGraph
from airflow_region_failover.graph.subtasks import read_key_groups
from airflow_region_failover.timeline import Timeline

if TYPE_CHECKING:
    from airflow_region_failover.spark.exchange import PartitionRef
    from airflow_region_failover.spark.run import SubtaskRun
    from airflow_region_failover.spark.store_io import ReadCounter, StoreIO
    from airflow_region_failover.store.manifest import Manifest

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class InputEntry:
    """One BLOCKING partition the task read (module rule)."""

    attempt: int
    bytes: int
    objects: int
    reused: bool

    def to_json(self) -> dict[str, Any]:
        """JSON form."""
        return {"attempt": self.attempt, "bytes": self.bytes, "objects": self.objects, "reused": self.reused}

    @classmethod
    def from_json(cls, body: Mapping[str, Any]) -> InputEntry:
        """Parse the JSON form."""
        return cls(int(body["attempt"]), int(body["bytes"]), int(body["objects"]), bool(body["reused"]))


@dataclass(frozen=True)
class OutputEntry:
    """One BLOCKING partition the task published (module rule); ``bytes``, ``objects`` and ``checksum`` are
    ``None`` when its manifest could not be read."""

    attempt: int
    rows: int
    kept: bool
    bytes: int | None = None
    objects: int | None = None
    checksum: str | None = None

    def to_json(self) -> dict[str, Any]:
        """JSON form (the sizes only when known)."""
        body: dict[str, Any] = {"attempt": self.attempt, "rows": self.rows}
        sizes = {"bytes": self.bytes, "objects": self.objects, "checksum": self.checksum}
        body.update({k: v for k, v in sizes.items() if v is not None})
        return {**body, "kept": self.kept}

    @classmethod
    def from_json(cls, body: Mapping[str, Any]) -> OutputEntry:
        """Parse the JSON form."""
        size, objects, checksum = body.get("bytes"), body.get("objects"), body.get("checksum")
        return cls(int(body["attempt"]), int(body["rows"]), bool(body["kept"]),
                   None if size is None else int(size), None if objects is None else int(objects),
                   None if checksum is None else str(checksum))


@dataclass(frozen=True)
class RestartEntry:
    """The applied decision whose clear started the try: its id, strategy and this task's region reason."""

    decision: int
    strategy: str
    reason: str

    @classmethod
    def of(cls, decision: Decision, task_id: str) -> RestartEntry:
        """The entry of ``decision`` for the task ``task_id``."""
        return cls(decision.id, decision.strategy, decision.reasons.get(task_id, ""))

    def to_json(self) -> dict[str, Any]:
        """JSON form."""
        return {"decision": self.decision, "strategy": self.strategy, "reason": self.reason}

    @classmethod
    def from_json(cls, body: Mapping[str, Any]) -> RestartEntry:
        """Parse the JSON form."""
        return cls(int(body["decision"]), str(body["strategy"]), str(body["reason"]))


@dataclass(frozen=True)
class TaskLedger:
    """What the task read and published, by partition (``result#index``), and the restart that started it."""

    inputs: Mapping[str, InputEntry] = field(default_factory=frozen)
    outputs: Mapping[str, OutputEntry] = field(default_factory=frozen)
    restart: RestartEntry | None = None

    @property
    def kept(self) -> bool:
        """Whether the task kept its outputs (it published some, all kept)."""
        return bool(self.outputs) and all(o.kept for o in self.outputs.values())

    def to_json(self) -> dict[str, Any]:
        """JSON form: ``inputs``, ``outputs`` and, when a clear of ours started the try, ``restart``."""
        body: dict[str, Any] = {"inputs": {p: e.to_json() for p, e in self.inputs.items()},
                                "outputs": {p: e.to_json() for p, e in self.outputs.items()}}
        if self.restart is not None:
            body["restart"] = self.restart.to_json()
        return body

    @classmethod
    def from_json(cls, body: Mapping[str, Any]) -> TaskLedger:
        """Parse the JSON form (the keys of a summary other than the ledger's are ignored)."""
        restart = body.get("restart")
        return cls(frozen({p: InputEntry.from_json(e) for p, e in body.get("inputs", {}).items()}),
                   frozen({p: OutputEntry.from_json(e) for p, e in body.get("outputs", {}).items()}),
                   RestartEntry.from_json(restart) if restart else None)


@dataclass(frozen=True)
class ReadTotals:
    """What the task read from the store: bytes and objects fetched, and the bytes of their partitions."""

    bytes: int
    objects: int
    partition_bytes: int

    @classmethod
    def of(cls, counter: ReadCounter) -> ReadTotals:
        """The totals counted so far by ``counter``."""
        return cls(counter.bytes, counter.objects, counter.partition_bytes)

    def to_json(self) -> dict[str, Any]:
        """JSON form."""
        return {"bytes": self.bytes, "objects": self.objects, "partition_bytes": self.partition_bytes}

    @classmethod
    def from_json(cls, body: Mapping[str, Any]) -> ReadTotals:
        """Parse the JSON form."""
        return cls(int(body["bytes"]), int(body["objects"]), int(body["partition_bytes"]))


@dataclass(frozen=True)
class CheckpointEntry:
    """What a checkpointed try did: ``epochs`` in its plan, ``resumed_from`` (checkpoint number, 0: it started
    from the first epoch), ``skipped`` epochs, ``checkpoints`` completed and their ``uploaded_bytes``; ``sliced``:
    a sliced chain's try, whose every epoch read the subtask's inputs again (:mod:`.sliced`)."""

    epochs: int
    resumed_from: int
    skipped: int
    checkpoints: int
    uploaded_bytes: int
    sliced: bool = False

    def to_json(self) -> dict[str, Any]:
        """JSON form (``"sliced": true`` only for a sliced try: the form of summaries before slicing otherwise)."""
        body = {"epochs": self.epochs, "resumed_from": self.resumed_from, "skipped": self.skipped,
                "checkpoints": self.checkpoints, "uploaded_bytes": self.uploaded_bytes}
        return {**body, "sliced": True} if self.sliced else body

    @classmethod
    def from_json(cls, body: Mapping[str, Any]) -> CheckpointEntry:
        """Parse the JSON form."""
        return cls(int(body["epochs"]), int(body["resumed_from"]), int(body["skipped"]), int(body["checkpoints"]),
                   int(body["uploaded_bytes"]), "sliced" in body and body["sliced"] is True)


@dataclass(frozen=True)
class TaskSummary:
    """A step task's return value (module rule): ``members`` is the chain, head first (one for a lone subtask)."""

    members: tuple[SubtaskId, ...]
    attempt: int
    rows: Mapping[str, int]
    read: ReadTotals
    ledger: TaskLedger
    kept: Mapping[str, int] = field(default_factory=frozen)
    timeline: Timeline | None = None
    checkpoint: CheckpointEntry | None = None
    resumed: tuple[SubtaskId, ...] = ()

    @property
    def subtask(self) -> SubtaskId:
        """The subtask whose outputs the task published (a chain's tail)."""
        return self.members[-1]

    def to_json(self) -> dict[str, Any]:
        """JSON form (``chain`` only for a chain of several, ``kept`` only when the outputs were kept,
        ``resumed`` only when a fused try ran some members and kept the others' commits, ``timeline`` only when
        measured)."""
        body: dict[str, Any] = {"subtask": str(self.subtask)}
        if len(self.members) > 1:
            body["chain"] = [str(m) for m in self.members]
        body.update({"attempt": self.attempt, "rows": dict(self.rows)})
        if self.kept:
            body["kept"] = dict(self.kept)
        if self.checkpoint is not None:
            body["checkpoint"] = self.checkpoint.to_json()
        if self.resumed:
            body["resumed"] = [str(m) for m in self.resumed]
        body = {**body, "read": self.read.to_json(), **self.ledger.to_json()}
        if self.timeline is not None:
            body["timeline"] = self.timeline.to_json()
        return body

    @classmethod
    def from_json(cls, body: Mapping[str, Any]) -> TaskSummary:
        """Parse the JSON form."""
        members = tuple(SubtaskId.parse(m) for m in body.get("chain", [body["subtask"]]))
        timeline, checkpoint = body.get("timeline"), body.get("checkpoint")
        return cls(members, int(body["attempt"]), frozen({str(r): int(n) for r, n in body["rows"].items()}),
                   ReadTotals.from_json(body["read"]), TaskLedger.from_json(body),
                   frozen({str(r): int(a) for r, a in body.get("kept", {}).items()}),
                   Timeline.from_json(timeline) if timeline else None,
                   CheckpointEntry.from_json(checkpoint) if checkpoint else None,
                   tuple(SubtaskId.parse(m) for m in body.get("resumed", [])))


def summary(run: SubtaskRun, published: Sequence[PartitionRef], kept: bool = False,
            timeline: Timeline | None = None, checkpoint: CheckpointEntry | None = None) -> TaskSummary:
    """The summary of ``run`` after it published ``published`` (``kept``: kept, not written by this try;
    ``timeline``: where its time went, when measured; ``checkpoint``: what a checkpointed try did)."""
    return TaskSummary(run.members, run.try_number, frozen({r.result: r.rows for r in published}),
                       ReadTotals.of(run.io.reads), ledger(run, published, kept),
                       frozen({r.result: r.attempt for r in published} if kept else {}), timeline, checkpoint)


def ledger(run: SubtaskRun, published: Sequence[PartitionRef], kept: bool = False) -> TaskLedger:
    """The ledger of ``run`` (module rule); ``published``: the refs it published, ``kept``: they were kept."""
    restart = run.restart
    return TaskLedger(_inputs(run, set(restart.reused) if restart is not None else set()),
                      _outputs(run.io, published, kept),
                      RestartEntry.of(restart, run.task_id) if restart is not None else None)


def fused_summary(graph: JobGraph, members: tuple[SubtaskId, ...], attempt: int, io: StoreIO,
                  refs: Mapping[SubtaskId, Mapping[Edge, Sequence[PartitionRef]]],
                  current: Mapping[PartitionRef, Manifest], published: Sequence[PartitionRef],
                  restart: Decision | None, task_id: str,
                  kept: frozenset[PartitionId] = frozenset(), resumed: tuple[SubtaskId, ...] = ()) -> TaskSummary:
    """The summary of a fused region's task (:mod:`.fused`): ``members`` all its subtasks, ``inputs`` every
    BLOCKING partition its members read from outside (bytes and objects summed over the members reading it),
    ``rows`` per result summed over its partitions; the outputs of ``kept`` are those the ``resumed`` members (of
    the regions the try kept) kept."""
    reused = set(restart.reused) if restart is not None else set()
    inputs: dict[str, InputEntry] = {}
    for member, member_refs in refs.items():
        for edge, edge_refs in member_refs.items():
            groups = read_key_groups(graph, edge, member.index)
            for ref in edge_refs:
                manifest = current.get(ref)
                if manifest is None:
                    continue
                selection = manifest.select(groups, edge.partition_by, edge.max_parallelism)
                seen = inputs.get(str(ref.partition))
                inputs[str(ref.partition)] = InputEntry(
                    ref.attempt, selection.bytes + (seen.bytes if seen else 0),
                    len(selection.objects) + (seen.objects if seen else 0), str(ref.partition) in reused)
    rows: dict[str, int] = {}
    for ref in published:
        rows[ref.result] = rows.get(ref.result, 0) + max(ref.rows, 0)
    return TaskSummary(members, attempt, frozen(rows), ReadTotals.of(io.reads),
                       TaskLedger(frozen(inputs),
                                  frozen({**_outputs(io, [r for r in published if r.partition not in kept], False),
                                          **_outputs(io, [r for r in published if r.partition in kept], True)}),
                                  RestartEntry.of(restart, task_id) if restart is not None else None),
                       resumed=resumed)


def _inputs(run: SubtaskRun, reused: set[str]) -> Mapping[str, InputEntry]:
    inputs: dict[str, InputEntry] = {}
    for edge, edge_refs in run.refs.items():
        groups = read_key_groups(run.graph, edge, run.head.index)
        for ref in edge_refs:
            manifest = run.current.get(ref)
            if manifest is None:
                continue
            selection = manifest.select(groups, edge.partition_by, edge.max_parallelism)
            inputs[str(ref.partition)] = InputEntry(ref.attempt, selection.bytes, len(selection.objects),
                                                    str(ref.partition) in reused)
    return frozen(inputs)


def _outputs(io: StoreIO, published: Sequence[PartitionRef], kept: bool) -> Mapping[str, OutputEntry]:
    outputs: dict[str, OutputEntry] = {}
    for ref in (r for r in published if r.exchange is Exchange.BLOCKING):
        manifest = _committed(io, ref)
        if manifest is None:
            log.warning("region failover: %s attempt %d has no readable manifest; its lineage has no sizes",
                        ref.partition, ref.attempt)
            outputs[str(ref.partition)] = OutputEntry(ref.attempt, ref.rows, kept)
            continue
        outputs[str(ref.partition)] = OutputEntry(manifest.attempt, manifest.row_count, kept, manifest.total_bytes,
                                                  len(manifest.objects), manifest.content_checksum)
    return frozen(outputs)


def _committed(io: StoreIO, ref: PartitionRef) -> Manifest | None:
    """The manifest of ``ref``'s attempt: the one this process wrote or looked up, else (a script step commits in
    its own application) the store's current one."""
    manifest = io.seen.get(ref.partition)
    if manifest is None or manifest.attempt != ref.attempt:
        manifest = io.committed(ref.dag_id, ref.run_id, ref.partition)
    return manifest if manifest is not None and manifest.attempt == ref.attempt else None

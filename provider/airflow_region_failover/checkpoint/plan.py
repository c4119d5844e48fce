"""Epoch plans: the deterministic cut of a checkpointed subtask's sliced input into ordered epochs. Pure.

Flink's stream fault-tolerance docs: "barriers cut the stream into epochs ... A barrier separates the records in the
data stream into the set of records that goes into the current snapshot, and the records that go into the next
snapshot." A bounded, committed input needs no barriers in flight: the cut is computed from the input's manifests
before the first epoch, the same way by every try, so their "position S_n" is simply "after epoch n".

Rules:

* ``objects`` cut: the sliced input's objects — every producer partition it reads, in partition order, each in
  manifest order (over a keyed edge only the subpartitions the subtask reads), which for a clustered result are its
  content-defined chunks — are grouped into ``min(epochs, objects)`` consecutive epochs of about equal bytes: epoch
  ``k`` ends at the first object where the running total reaches ``(k+1)/E`` of all bytes, each epoch holding at
  least one object. An input without objects is one epoch with nothing in it (the function still runs once).
* ``key-groups`` cut: the subtask's key-group range of the (keyed) sliced input is split into ``min(epochs,
  len(range))`` contiguous sub-ranges, ``[start + k*n//E, start + (k+1)*n//E)``; epoch ``k`` reads the rows of its
  sub-range (VLDB'17: "a key-group [is] the atomic unit for re-allocation").
* ``subtasks`` cut (a sliced chain, :mod:`~..graph.slicing`, never declared): epoch ``k`` of ``E`` of subtask ``i``
  is virtual subtask ``i·E+k`` (:attr:`Epoch.subtask`), which reads its own key groups of every keyed input.
* The plan's :attr:`EpochPlan.fingerprint` (SHA-256 of its canonical JSON: the cut, every epoch's objects by hash
  or range, and the members' declarations) is what a checkpoint records: a try resumes only a checkpoint taken
  under an equal plan.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

from airflow_region_failover.failover.checkpointing import EpochCut
from airflow_region_failover.graph.ids import PartitionId
from airflow_region_failover.store.manifest import ObjectEntry


@dataclass(frozen=True)
class Piece:
    """The objects of one input partition that an epoch reads; ``filtered``: they hold rows of key groups the
    subtask does not own, which the reader drops."""

    partition: PartitionId
    objects: tuple[ObjectEntry, ...]
    filtered: bool = False


@dataclass(frozen=True)
class Epoch:
    """Epoch ``index`` of ``count``: the ``pieces`` it reads (``objects`` cut), its ``key_groups``, or the virtual
    ``subtask`` it runs (``subtasks`` cut)."""

    index: int
    count: int
    pieces: tuple[Piece, ...] = ()
    key_groups: range | None = None
    subtask: int | None = None

    @property
    def last(self) -> bool:
        """Whether this is the plan's last epoch (a step function may flush what its state still holds)."""
        return self.index == self.count - 1

    @property
    def bytes(self) -> int:
        """The bytes of the objects it reads (``objects`` cut)."""
        return sum(o.size for p in self.pieces for o in p.objects)

    def to_dict(self) -> dict[str, Any]:
        """Canonical JSON form (objects by hash)."""
        body: dict[str, Any] = {"index": self.index,
                                "pieces": [{"partition": str(p.partition), "filtered": p.filtered,
                                            "objects": [o.sha256 for o in p.objects]} for p in self.pieces]}
        if self.key_groups is not None:
            body["key_groups"] = [self.key_groups.start, self.key_groups.stop]
        if self.subtask is not None:
            body["subtask"] = self.subtask
        return body


@dataclass(frozen=True)
class EpochPlan:
    """The ordered epochs of one try, their ``cut`` and the members' ``declarations`` (JSON of each
    :class:`~..failover.checkpointing.Checkpoint`)."""

    cut: EpochCut
    epochs: tuple[Epoch, ...]
    declarations: Mapping[str, Any] = field(default_factory=dict)

    @cached_property
    def fingerprint(self) -> str:
        """SHA-256 of the canonical JSON of the plan (module rule)."""
        body = {"cut": self.cut.value, "epochs": [e.to_dict() for e in self.epochs],
                "declarations": dict(sorted(self.declarations.items()))}
        return hashlib.sha256(json.dumps(body, sort_keys=True, separators=(",", ":")).encode()).hexdigest()

    def __len__(self) -> int:
        return len(self.epochs)


def plan_objects(pieces: Sequence[Piece], epochs: int, declarations: Mapping[str, Any] | None = None) -> EpochPlan:
    """The ``objects`` cut of ``pieces`` (each input partition's objects, in order) into at most ``epochs``
    epochs of about equal bytes (module rule)."""
    items = [(p.partition, p.filtered, o) for p in pieces for o in p.objects]
    count = max(1, min(epochs, len(items)))
    ends = cut_points([o.size for _, _, o in items], count)
    result, start = [], 0
    for index, end in enumerate(ends):
        result.append(Epoch(index, count, _group(items[start:end])))
        start = end
    return EpochPlan(EpochCut.OBJECTS, tuple(result), dict(declarations or {}))


def cut_points(sizes: Sequence[int], count: int) -> list[int]:
    """The end index of each of ``count`` consecutive groups of ``sizes``: group ``k`` ends at the first item where
    the running total reaches ``(k+1)/count`` of the total, each group non-empty (``[0]`` when there are none)."""
    if not sizes:
        return [0]
    total, ends, running, position = sum(sizes), [], 0, 0
    for k in range(1, count):
        lowest, highest = position + 1, len(sizes) - (count - k)
        end = lowest
        running_here = running + sum(sizes[position:end])
        while end < highest and running_here * count < k * total:
            running_here += sizes[end]
            end += 1
        ends.append(end)
        running, position = running_here, end
    ends.append(len(sizes))
    return ends


def _group(items: Sequence[tuple[PartitionId, bool, ObjectEntry]]) -> tuple[Piece, ...]:
    """Consecutive objects of the same partition as one :class:`Piece` each."""
    pieces: list[Piece] = []
    for partition, filtered, entry in items:
        if pieces and pieces[-1].partition == partition:
            pieces[-1] = Piece(partition, (*pieces[-1].objects, entry), filtered)
        else:
            pieces.append(Piece(partition, (entry,), filtered))
    return tuple(pieces)


def plan_key_groups(groups: range, epochs: int, declarations: Mapping[str, Any] | None = None) -> EpochPlan:
    """The ``key-groups`` cut of the subtask's key-group range ``groups`` into at most ``epochs`` contiguous
    sub-ranges (module rule)."""
    n = len(groups)
    count = max(1, min(epochs, n))
    result = tuple(Epoch(k, count, (), range(groups.start + k * n // count, groups.start + (k + 1) * n // count))
                   for k in range(count))
    return EpochPlan(EpochCut.KEY_GROUPS, result, dict(declarations or {}))


def plan_subtasks(index: int, epochs: int) -> EpochPlan:
    """The ``subtasks`` cut of subtask ``index`` into ``epochs`` virtual subtasks ``index·epochs + k`` (module
    rule)."""
    count = max(1, epochs)
    return EpochPlan(EpochCut.SUBTASKS, tuple(Epoch(k, count, subtask=index * count + k) for k in range(count)))

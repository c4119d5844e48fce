"""A DAG run's failover decision log as typed, immutable values, and its JSON form.

The log is the durable memory of the failover loop for one run: every failure seen (``events``), every decision
taken (``decisions``), the restart strategy's and the FLIP-1 budget's state, the tries our clears stopped, and the
*epoch* — the execution of the run the budget belongs to (a person re-running the run starts a new one, as a
resubmitted Flink job starts with a fresh restart strategy). This module is the only one that knows the JSON
keys. Format 2; a format-1 log (no epochs, no re-clears) reads as epoch 0.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from enum import Enum
from types import MappingProxyType
from typing import Any, TypeVar

from airflow_region_failover.failover.error_class import ErrorClass, TryInputs
from airflow_region_failover.failover.restart_plan import RegionRestart

_K = TypeVar("_K")
_V = TypeVar("_V")

LOG_FORMAT = 2
MERGE_WINDOW_S = 1.0
"""A pending decision is cleared no earlier than this after it was created (or its delay, if shorter): failures
arriving meanwhile are merged into it. The backoff delay itself is enforced when the restarted tasks start."""


def frozen(mapping: Mapping[_K, _V] | None = None) -> Mapping[_K, _V]:
    """A read-only copy of ``mapping`` (empty for ``None``)."""
    return MappingProxyType(dict(mapping or {}))


class DecisionStatus(str, Enum):
    """Where a decision stands. ``pending`` and ``applying`` are *open*: at most one per run."""

    PENDING = "pending"
    APPLYING = "applying"
    APPLIED = "applied"
    EXHAUSTED = "exhausted"
    NOT_RECOVERABLE = "not-recoverable"
    CANCELLED = "cancelled"
    ABANDONED = "abandoned"

    @property
    def open(self) -> bool:
        """Decided but not applied yet."""
        return self in (DecisionStatus.PENDING, DecisionStatus.APPLYING)


@dataclass(frozen=True)
class FailureRecord:
    """One failed try of a task instance, as a listener or a watcher saw it.

    ``cause`` is the partition the failure names as unavailable (an input it could not read), ``clear_number``
    the run's clear count when the failed try started (``None`` if unknown), ``error_class`` its exception's
    class names and message signature, ``inputs`` what the try computed from (:mod:`.error_class`; ``None``
    when unknown, e.g. a failure the watcher found without its exception), ``subtask`` the subtask whose function
    raised in a task that runs several (a fused region's; ``None`` otherwise or when unknown).
    """

    task_id: str
    map_index: int
    try_number: int
    error: str
    path: str
    at: float
    cause: str | None = None
    clear_number: int | None = None
    error_class: ErrorClass | None = None
    inputs: TryInputs | None = None
    subtask: str | None = None

    @property
    def key(self) -> str:
        """Idempotency key: the same try of the same task instance is one failure."""
        return f"{self.task_id}:{self.map_index}:{self.try_number}"

    def to_json(self) -> dict[str, Any]:
        """JSON form."""
        body = {"task_id": self.task_id, "map_index": self.map_index, "try_number": self.try_number,
                "error": self.error[:500], "path": self.path, "at": self.at}
        if self.cause is not None:
            body["cause"] = self.cause
        if self.clear_number is not None:
            body["clear_number"] = self.clear_number
        if self.error_class is not None:
            body["error_class"] = self.error_class.to_json()
        if self.inputs is not None:
            body["inputs"] = self.inputs.to_json()
        if self.subtask is not None:
            body["subtask"] = self.subtask
        return body

    @classmethod
    def from_json(cls, body: Mapping[str, Any]) -> FailureRecord:
        """Parse the JSON form."""
        error_class, inputs = body.get("error_class"), body.get("inputs")
        return cls(str(body["task_id"]), int(body.get("map_index", -1)), int(body["try_number"]),
                   str(body.get("error", "")), str(body.get("path", "")), float(body["at"]),
                   body.get("cause"), body.get("clear_number"),
                   ErrorClass.from_json(error_class) if error_class is not None else None,
                   TryInputs.from_json(inputs) if inputs is not None else None,
                   str(body["subtask"]) if body.get("subtask") is not None else None)


@dataclass(frozen=True)
class TaskSnapshot:
    """One task instance as the REST API listed it: its state (``None``: no state yet) and try number."""

    state: str | None
    try_number: int

    def to_json(self) -> dict[str, Any]:
        """JSON form."""
        return {"state": self.state, "try_number": self.try_number}

    @classmethod
    def from_json(cls, body: Mapping[str, Any]) -> TaskSnapshot:
        """Parse the JSON form."""
        state = body.get("state")
        return cls(None if state in (None, "none", "None") else str(state), int(body.get("try_number") or 0))


@dataclass(frozen=True)
class RegionRecord:
    """One region of a decision: its subtasks and why it restarts."""

    region: str
    steps: tuple[str, ...]
    subtasks: tuple[str, ...]
    reason: str
    cause: str

    @classmethod
    def of(cls, restart: RegionRestart) -> RegionRecord:
        """The record of a region of the planner's restart plan."""
        return cls(restart.region.id, restart.region.steps, tuple(str(s) for s in restart.region.subtasks),
                   restart.reason.value, restart.cause)

    def to_json(self) -> dict[str, Any]:
        """JSON form."""
        return {"region": self.region, "steps": list(self.steps), "subtasks": list(self.subtasks),
                "reason": self.reason, "cause": self.cause}

    @classmethod
    def from_json(cls, body: Mapping[str, Any]) -> RegionRecord:
        """Parse the JSON form."""
        return cls(str(body["region"]), tuple(body.get("steps", ())), tuple(body.get("subtasks", ())),
                   str(body["reason"]), str(body.get("cause", "")))


@dataclass(frozen=True)
class Decision:
    """One restart decision: the failures it answers, what it restarts and why, and how far it got.

    ``restart`` lists task ids to clear; ``reasons`` gives each of them the reason of its region (``failed``,
    ``producer-unavailable``, ``consumer``, ``full``), which decides whether its restarted try may keep a
    committed result. ``before`` holds the restart set's states and tries the first claimer read before its
    clear, and ``claims`` how often the decision was claimed: a second claim (the first claimer died mid-apply)
    asks ``before`` whether the first clear took effect before clearing again.
    """

    id: int
    status: DecisionStatus
    created: float
    failures: tuple[FailureRecord, ...]
    epoch: int = 0
    strategy: str = ""
    delay_s: float = 0.0
    apply_at: float = 0.0
    budget: Mapping[str, Any] = field(default_factory=frozen)
    regions: tuple[RegionRecord, ...] = ()
    restart: tuple[str, ...] = ()
    reasons: Mapping[str, str] = field(default_factory=frozen)
    reused: tuple[str, ...] = ()
    reason: str = ""
    claimed_at: float | None = None
    claimed_by: str = ""
    applied_at: float | None = None
    cleared: int = 0
    restarting_time_s: float | None = None
    before: Mapping[str, TaskSnapshot] = field(default_factory=frozen)
    claims: int = 0

    @property
    def clear_at(self) -> float:
        """When a pending decision may be cleared: after the merge window, never later than its restart time."""
        return min(self.apply_at, self.created + MERGE_WINDOW_S)

    def to_json(self) -> dict[str, Any]:
        """JSON form (format-1 keys kept; fields never set are left out)."""
        body: dict[str, Any] = {
            "id": self.id, "status": self.status.value, "created": self.created, "epoch": self.epoch,
            "failures": [f.to_json() for f in self.failures], "strategy": self.strategy, "delay_s": self.delay_s,
            "apply_at": self.apply_at, "budget": dict(self.budget), "regions": [r.to_json() for r in self.regions],
            "restart": list(self.restart), "reasons": dict(self.reasons), "reused": list(self.reused),
        }
        optional: dict[str, Any] = {"reason": self.reason, "claimed_at": self.claimed_at,
                                    "claimed_by": self.claimed_by, "applied_at": self.applied_at,
                                    "cleared": self.cleared, "restarting_time_s": self.restarting_time_s,
                                    "claims": self.claims}
        body.update({k: v for k, v in optional.items() if v not in (None, "", 0)})
        if self.before:
            body["before"] = {t: s.to_json() for t, s in self.before.items()}
        if len(self.failures) > 1:
            body["merged"] = len(self.failures)
        return body

    @classmethod
    def from_json(cls, body: Mapping[str, Any]) -> Decision:
        """Parse the JSON form."""
        return cls(
            id=int(body["id"]), status=DecisionStatus(body["status"]), created=float(body["created"]),
            failures=tuple(FailureRecord.from_json(f) for f in body.get("failures", ())),
            epoch=int(body.get("epoch", 0)), strategy=str(body.get("strategy", "")),
            delay_s=float(body.get("delay_s", 0.0)), apply_at=float(body.get("apply_at", body["created"])),
            budget=frozen(body.get("budget")),
            regions=tuple(RegionRecord.from_json(r) for r in body.get("regions", ())),
            restart=tuple(body.get("restart", ())), reasons=frozen(body.get("reasons")),
            reused=tuple(body.get("reused", ())), reason=str(body.get("reason", "")),
            claimed_at=body.get("claimed_at"), claimed_by=str(body.get("claimed_by", "")),
            applied_at=body.get("applied_at"), cleared=int(body.get("cleared", 0)),
            restarting_time_s=body.get("restarting_time_s"),
            before=frozen({t: TaskSnapshot.from_json(s) for t, s in body.get("before", {}).items()}),
            claims=int(body.get("claims", 0)),
        )


@dataclass(frozen=True)
class EventRecord:
    """What became of one failure: the decision it joined (if any), and whether it was stale."""

    at: float
    decision: int | None = None
    stale: bool = False
    merged: bool = False

    def to_json(self) -> dict[str, Any]:
        """JSON form."""
        body: dict[str, Any] = {"at": self.at}
        if self.decision is not None:
            body["decision"] = self.decision
        if self.stale:
            body["stale"] = True
        if self.merged:
            body["merged"] = True
        return body

    @classmethod
    def from_json(cls, body: Mapping[str, Any]) -> EventRecord:
        """Parse the JSON form."""
        return cls(float(body["at"]), body.get("decision"), bool(body.get("stale")), bool(body.get("merged")))


@dataclass(frozen=True)
class Reclear:
    """A second clear of a task our clear did not restart: the try it was for, when, and by whom."""

    try_number: int
    at: float
    by: str


@dataclass(frozen=True)
class RunLog:
    """The decision log of one DAG run (see the module rule).

    ``cleared_tries``: task id -> the try our last clear of it stopped (its next try is ours).
    ``our_clears``: the run's clear counts our clears produced. ``epoch``/``epoch_clear``: which execution of
    the run the budget belongs to, and the clear count it started at.
    """

    dag_id: str
    run_id: str
    events: Mapping[str, EventRecord] = field(default_factory=frozen)
    decisions: tuple[Decision, ...] = ()
    strategy_state: Mapping[str, Any] | None = None
    budget_state: Mapping[str, Any] | None = None
    cleared_tries: Mapping[str, int] = field(default_factory=frozen)
    reclears: Mapping[str, Reclear] = field(default_factory=frozen)
    our_clears: tuple[int, ...] = ()
    epoch: int = 0
    epoch_clear: int = 0

    @property
    def open_decision(self) -> Decision | None:
        """The decision that is decided but not applied yet (at most one), or ``None``."""
        return next((d for d in self.decisions if d.status.open), None)

    def decision(self, decision_id: int) -> Decision:
        """The decision numbered ``decision_id``."""
        return self.decisions[decision_id - 1]

    def with_decision(self, decision: Decision) -> RunLog:
        """This log with ``decision`` replacing the one of its id (or appended as the next one)."""
        if decision.id == len(self.decisions) + 1:
            return replace(self, decisions=(*self.decisions, decision))
        return replace(self, decisions=tuple(decision if d.id == decision.id else d for d in self.decisions))

    def with_events(self, **events: EventRecord) -> RunLog:
        """This log with more events (keyed by failure key)."""
        return replace(self, events=frozen({**self.events, **events}))

    def to_json(self) -> dict[str, Any]:
        """JSON form."""
        return {
            "format": LOG_FORMAT, "dag_id": self.dag_id, "run_id": self.run_id,
            "events": {k: e.to_json() for k, e in self.events.items()},
            "decisions": [d.to_json() for d in self.decisions],
            "strategy_state": _plain(self.strategy_state), "budget_state": _plain(self.budget_state),
            "cleared_tries": dict(self.cleared_tries),
            "reclears": {t: {"try_number": r.try_number, "at": r.at, "by": r.by} for t, r in self.reclears.items()},
            "our_clears": list(self.our_clears), "epoch": self.epoch, "epoch_clear": self.epoch_clear,
        }

    @classmethod
    def from_json(cls, body: Mapping[str, Any]) -> RunLog:
        """Parse the JSON form (format 1 or 2)."""
        if body.get("format") not in (1, LOG_FORMAT):
            raise ValueError(f"decision log of {body.get('dag_id')}/{body.get('run_id')} has format "
                             f"{body.get('format')!r}; this provider reads 1 and {LOG_FORMAT}")
        return cls(
            dag_id=str(body["dag_id"]), run_id=str(body["run_id"]),
            events=frozen({k: EventRecord.from_json(e) for k, e in body.get("events", {}).items()}),
            decisions=tuple(Decision.from_json(d) for d in body.get("decisions", ())),
            strategy_state=_frozen_or_none(body.get("strategy_state")),
            budget_state=_frozen_or_none(body.get("budget_state")),
            cleared_tries=frozen({k: int(v) for k, v in body.get("cleared_tries", {}).items()}),
            reclears=frozen({t: Reclear(int(r["try_number"]), float(r["at"]), str(r.get("by", "")))
                             for t, r in body.get("reclears", {}).items()}),
            our_clears=tuple(int(n) for n in body.get("our_clears", ())), epoch=int(body.get("epoch", 0)),
            epoch_clear=int(body.get("epoch_clear", 0)),
        )


def _plain(mapping: Mapping[str, Any] | None) -> dict[str, Any] | None:
    return None if mapping is None else {k: (list(v) if isinstance(v, tuple) else v) for k, v in mapping.items()}


def _frozen_or_none(mapping: Mapping[str, Any] | None) -> Mapping[str, Any] | None:
    return None if mapping is None else frozen(mapping)


def tries_of(records: Iterable[Mapping[str, Any]]) -> dict[str, int]:
    """``task_id -> try_number`` of task instances as Airflow's REST API lists them (a clear's answer)."""
    return {str(ti["task_id"]): int(ti.get("try_number") or 0) for ti in records}


def snapshots_of(records: Iterable[Mapping[str, Any]]) -> dict[str, TaskSnapshot]:
    """``task_id -> (state, try_number)`` of task instances as Airflow's REST API lists them."""
    return {str(ti["task_id"]): TaskSnapshot.from_json(ti) for ti in records}

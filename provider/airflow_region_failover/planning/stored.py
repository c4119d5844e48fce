"""The plans the store keeps for a job rendered ``PER_RUN``: the decision for a DAG's next run, and each run's own.

Rules:

* a :class:`PlanDecision` is the planner's choice for the DAG's **next** run (:func:`~.choice.decide` over the
  history as it stood when the scheduler decided): its plan, why, when, an id, and the run whose end it followed
  (``""``: none — decided because none was stored). A newer decision replaces it;
* a :class:`RunPlan` is the plan **one run** runs, fixed once, when the run's first task that needs it starts: a
  copy of the decision stored then (``decision``), or — with none stored — every AUTO result BLOCKING
  (``decision`` ``None``). It never changes afterwards: every later task and try of the run, the failover
  decisions and the views read it;
* both carry the **epochs** of the job's ``Checkpoint(epochs="AUTO")`` steps and sliced chains (``epochs``: step ->
  :class:`~.epochs.EpochsChoice`, decided with the plan, :mod:`.epochs`), so a run fixes them with its plan and
  every try of the run — a retry resuming its checkpoint — runs the same number; a run fixed while no decision was
  stored has none (its AUTO steps run :data:`~.epochs.NO_HISTORY_EPOCHS`, :meth:`RunPlan.epochs_of`; its sliced
  chains one epoch, :meth:`RunPlan.slices_of`);
* both are JSON with a ``format`` (:data:`FORMAT`; ``epochs`` only when there are some, and a record without the
  key — written before epochs were planned — reads as none); bad input is a :class:`~..graph.errors.GraphError`
  naming the key and what it must be.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from airflow_region_failover.graph.auto import ExchangePlan
from airflow_region_failover.graph.errors import GraphError
from airflow_region_failover.planning.epochs import NO_HISTORY_EPOCHS, EpochsChoice

FORMAT = 1
NO_DECISION = "no plan was decided for this run: every AUTO result BLOCKING (the conservative default)"
"""The reason of a run's plan fixed while no decision was stored."""


@dataclass(frozen=True)
class PlanDecision:
    """The plan decided for a DAG's next run (module rule).

    JSON: ``{"format": 1, "id": ..., "plan": {"choices": {...}}, "reason": ..., "decided_at": <epoch s>,
    "after_run": <run id or "">, "epochs": {<step>: {"epochs": n, "reason": ...}}}`` (``epochs`` when some)."""

    id: str
    plan: ExchangePlan
    reason: str
    decided_at: float
    after_run: str = ""
    epochs: Mapping[str, EpochsChoice] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        """The JSON form."""
        return {"format": FORMAT, "id": self.id, "plan": self.plan.to_json(), "reason": self.reason,
                "decided_at": self.decided_at, "after_run": self.after_run, **_epochs_json(self.epochs)}

    @classmethod
    def from_json(cls, document: object) -> PlanDecision:
        """Parse :meth:`to_json`'s form."""
        body = _body(document, {"id", "plan", "reason", "decided_at", "after_run"}, "plan decision")
        return cls(_text(body, "id", "plan decision"), ExchangePlan.from_json(body["plan"]),
                   _text(body, "reason", "plan decision"), _when(body, "decided_at", "plan decision"),
                   _text(body, "after_run", "plan decision"), _epochs(body, "plan decision"))


@dataclass(frozen=True)
class RunPlan:
    """The plan one run runs, fixed at its start (module rule); ``decision``: the decision it copied, ``None``
    when none was stored.

    JSON: ``{"format": 1, "plan": {"choices": {...}}, "reason": ..., "fixed_at": <epoch s>, "decision":
    <PlanDecision JSON> | null, "epochs": {<step>: {"epochs": n, "reason": ...}}}`` (``epochs`` when some)."""

    plan: ExchangePlan
    reason: str
    fixed_at: float
    decision: PlanDecision | None = None
    epochs: Mapping[str, EpochsChoice] = field(default_factory=dict)

    @classmethod
    def of(cls, decision: PlanDecision | None, now: float) -> RunPlan:
        """The run's plan copied from ``decision`` (``None``: every AUTO result BLOCKING) at ``now``."""
        if decision is None:
            return cls(ExchangePlan(), NO_DECISION, now)
        return cls(decision.plan, decision.reason, now, decision, decision.epochs)

    def epochs_of(self, step: str, max_epochs: int) -> EpochsChoice:
        """The epochs AUTO-epochs step ``step`` runs in this run: the ones fixed with the plan, else — none decided
        for it before the run was fixed — :data:`~.epochs.NO_HISTORY_EPOCHS` (at most ``max_epochs``), the same
        for every try of the run."""
        chosen = self.epochs.get(step)
        if chosen is not None:
            return chosen
        epochs = min(NO_HISTORY_EPOCHS, max_epochs)
        return EpochsChoice(epochs, f"no epochs were decided for {step!r} before this run's plan was fixed: the "
                                    f"default {epochs}")

    def slices_of(self, head: str) -> EpochsChoice:
        """The epochs the sliced chain headed by ``head`` (:mod:`~..graph.slicing`) takes in this run: the ones fixed
        with the plan, else one — the subtask runs whole, as before slicing — the same for every try of the run."""
        chosen = self.epochs.get(head)
        if chosen is not None:
            return chosen
        return EpochsChoice(1, f"no epochs were decided for {head!r} before this run's plan was fixed: one (the "
                               "subtask runs whole)")

    def to_json(self) -> dict[str, Any]:
        """The JSON form."""
        return {"format": FORMAT, "plan": self.plan.to_json(), "reason": self.reason, "fixed_at": self.fixed_at,
                "decision": None if self.decision is None else self.decision.to_json(), **_epochs_json(self.epochs)}

    @classmethod
    def from_json(cls, document: object) -> RunPlan:
        """Parse :meth:`to_json`'s form."""
        body = _body(document, {"plan", "reason", "fixed_at", "decision"}, "run plan")
        decision = body["decision"]
        return cls(ExchangePlan.from_json(body["plan"]), _text(body, "reason", "run plan"),
                   _when(body, "fixed_at", "run plan"),
                   None if decision is None else PlanDecision.from_json(decision), _epochs(body, "run plan"))


def _body(document: object, keys: set[str], what: str) -> dict[str, Any]:
    """``document`` with exactly ``keys``, ``format`` and maybe ``epochs`` (module rule)."""
    if not isinstance(document, dict) or document.get("format") != FORMAT or \
            not keys | {"format"} <= set(document) <= keys | {"format", "epochs"}:
        raise GraphError(f"{what} {document!r} must be an object with format {FORMAT} and exactly the keys "
                         f"{', '.join(sorted(keys | {'format'}))} (and epochs); it was written by another provider "
                         "version")
    return document


def _epochs_json(epochs: Mapping[str, EpochsChoice]) -> dict[str, Any]:
    return {"epochs": {step: c.to_json() for step, c in sorted(epochs.items())}} if epochs else {}


def _epochs(body: dict[str, Any], what: str) -> dict[str, EpochsChoice]:
    raw = body.get("epochs", {})
    if not isinstance(raw, dict):
        raise GraphError(f"{what}: 'epochs' must map step ids to {{\"epochs\": n, \"reason\": ...}}, not {raw!r}")
    return {str(step): EpochsChoice.from_json(c, f"{what}: epochs of {step!r}") for step, c in raw.items()}


def _text(body: dict[str, Any], key: str, what: str) -> str:
    if not isinstance(body[key], str):
        raise GraphError(f"{what}: {key!r} must be a string, not {body[key]!r}")
    return str(body[key])


def _when(body: dict[str, Any], key: str, what: str) -> float:
    value = body[key]
    if isinstance(value, bool) or not isinstance(value, (int, float)) or value < 0:
        raise GraphError(f"{what}: {key!r} must be epoch seconds (a number >= 0), not {value!r}")
    return float(value)

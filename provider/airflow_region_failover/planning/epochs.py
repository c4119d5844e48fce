"""How many epochs a checkpointed step should take: Young's and Daly's optimal checkpoint interval.

Rule: a subtask that checkpoints every ``τ`` seconds of work, at ``C`` seconds per checkpoint, and fails on
average every ``M`` seconds (MTBF, ``1/λ`` for a failure rate λ per task-second, :mod:`.rate`) loses least
in expectation at Young's interval (J. W. Young, "A first order approximation to the optimum checkpoint
interval", CACM 17(9), 1974)

    τ = √(2·C·M)

refined by Daly (J. T. Daly, "A higher order estimate of the optimum checkpoint interval for restart dumps",
FGCS 22(3), 2006), which this module uses:

    τ = √(2·C·M) · (1 + ⅓·√(C/(2M)) + ⅑·(C/(2M))) − C    for C < 2M,   else τ = M.

A step whose subtask works ``W`` seconds then takes ``⌈W/τ⌉`` epochs, at least 1 (no failures: one epoch, no
checkpoint paid) and at most ``max_epochs``.

Choosing a step's epochs for its next run (:func:`choose_epochs`, a step declared ``Checkpoint(epochs="AUTO")``):

* ``W``: the mean of the step's measured subtask compute seconds over the runs of the history that measured
  them (:class:`~.history.StepTimes`; checkpointing is not in it), ``C``: the mean seconds one of its checkpoints
  took (``StepTimes.checkpoint_seconds``, over the runs that checkpointed), λ: the step's failure rate
  (:func:`~.rate.step_rates`: its failed tries over its task time, pooled towards the DAG's, with the prior of
  :mod:`.rate` — never 0, so rare failures give a long interval and few epochs, usually 1);
* **no history** — no run measured both ``W`` and ``C`` of the step (its first runs, or a step that never
  checkpointed): :data:`NO_HISTORY_EPOCHS` (10, ``Checkpoint``'s declared default), at most ``max_epochs``; a
  run that checkpoints nothing measures no ``C``, and 10 epochs both bound the work a failure loses and measure
  ``C`` for the next run.

Choosing a **sliced chain**'s epochs (:func:`choose_slices`, :mod:`~..graph.slicing`: a rescalable chain whose
subtask may run as ``E`` virtual subtasks, a checkpoint after each): the same interval, with ``W`` the chain
subtask's work — the sum over its members of each one's mean measured subtask seconds (a chain task's compute is
split evenly over its members) — ``C`` what one more epoch costs: the mean measured seconds of one of its
checkpoints (a sliced run's) or, before any was measured, :data:`DEFAULT_EPOCH_SECONDS`, **plus reading the
subtask's inputs again** — every epoch reads the subtask's whole share of each BLOCKING input (a keyed input's
subpartition, of which it keeps its key groups; a BROADCAST input whole), its read-back seconds as the plan's cost
has them (:func:`~.estimates.read_share`) — and λ the head's failure rate (a chain's failures are counted for its
head); at most the chain's most epochs. With no run measuring ``W``: **one** epoch — the subtask
runs whole, as it did before slicing, until a run measured it; a rare failure rate gives one epoch too.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from airflow_region_failover.graph.errors import GraphError
from airflow_region_failover.graph.model import JobGraph
from airflow_region_failover.planning.estimates import read_share, result_estimates
from airflow_region_failover.planning.history import History
from airflow_region_failover.planning.rate import step_rates

DEFAULT_EPOCH_SECONDS = 2.0
"""``C`` of a sliced chain no run measured a checkpoint of: one more epoch's checkpoint, its objects' upload and its
Spark job, a few S3 requests and a job on this machine (module rule)."""
DEFAULT_MAX_EPOCHS = 1000
"""The most epochs :func:`epochs_for` chooses (each is a Spark job and a checkpoint upload)."""
NO_HISTORY_EPOCHS = 10
"""The epochs of a step without history (module rule)."""


def young_interval(checkpoint_seconds: float, mtbf_seconds: float) -> float:
    """Young's first-order optimum, √(2·C·M)."""
    return math.sqrt(2 * checkpoint_seconds * mtbf_seconds)


def daly_interval(checkpoint_seconds: float, mtbf_seconds: float) -> float:
    """Daly's higher-order optimum (module rule)."""
    c, m = checkpoint_seconds, mtbf_seconds
    if c >= 2 * m:
        return m
    ratio = c / (2 * m)
    return math.sqrt(2 * c * m) * (1 + math.sqrt(ratio) / 3 + ratio / 9) - c


def epochs_for(work_seconds: float, checkpoint_seconds: float, per_task_second: float,
               max_epochs: int = DEFAULT_MAX_EPOCHS) -> int:
    """The epochs of a checkpointed subtask of ``work_seconds`` at failure rate ``per_task_second``."""
    if work_seconds <= 0 or per_task_second <= 0:
        return 1
    if checkpoint_seconds <= 0:
        return max_epochs
    interval = daly_interval(checkpoint_seconds, 1 / per_task_second)
    return max(1, min(max_epochs, math.ceil(work_seconds / interval)))


@dataclass(frozen=True)
class EpochsChoice:
    """The epochs chosen for one AUTO-epochs step and why; JSON ``{"epochs": <int >= 1>, "reason": ...}``."""

    epochs: int
    reason: str

    def to_json(self) -> dict[str, Any]:
        """The JSON form."""
        return {"epochs": self.epochs, "reason": self.reason}

    @classmethod
    def from_json(cls, document: object, where: str) -> EpochsChoice:
        """Parse :meth:`to_json`'s form; :class:`GraphError` naming ``where`` and the key."""
        if not isinstance(document, dict) or set(document) != {"epochs", "reason"}:
            raise GraphError(f"{where}: {document!r} must be an object with exactly the keys epochs, reason")
        epochs, reason = document["epochs"], document["reason"]
        if isinstance(epochs, bool) or not isinstance(epochs, int) or epochs < 1 or not isinstance(reason, str):
            raise GraphError(f"{where}: 'epochs' must be a whole number >= 1 and 'reason' a string, not "
                             f"{epochs!r}, {reason!r}")
        return cls(epochs, reason)


def choose_epochs(step: str, history: History, max_epochs: int = DEFAULT_MAX_EPOCHS) -> EpochsChoice:
    """The epochs of ``step``'s next run from ``history`` (module rule: Daly's interval, or the no-history
    default)."""
    work = [s for r in history.runs if (t := r.step(step)) is not None for s in t.subtask_seconds]
    c = checkpoint_seconds(step, history)
    if not work or c is None:
        epochs = min(NO_HISTORY_EPOCHS, max_epochs)
        return EpochsChoice(epochs, f"no run measured {step!r}'s work and checkpoint cost yet: the default "
                                    f"{epochs} epochs")
    w = sum(work) / len(work)
    rate = step_rates([step], history)[step]
    epochs = epochs_for(w, c, rate.per_task_second, max_epochs)
    interval = daly_interval(c, 1 / rate.per_task_second) if c > 0 else 0.0
    return EpochsChoice(epochs, f"W={w:.3g}s of work per subtask, C={c:.3g}s per checkpoint, "
                                f"{rate.per_task_hour:.3g} failures per task-hour ({rate.failures} in "
                                f"{len(history.runs)} runs): Daly's interval {interval:.3g}s -> {epochs} epochs")


def choose_all(auto_epochs: Mapping[str, int], history: History) -> dict[str, EpochsChoice]:
    """:func:`choose_epochs` for every AUTO-epochs step (step -> its ``max_epochs``)."""
    return {step: choose_epochs(step, history, bound) for step, bound in sorted(auto_epochs.items())}


def choose_slices(graph: JobGraph, sliced: Mapping[str, tuple[tuple[str, ...], int]],
                  history: History) -> dict[str, EpochsChoice]:
    """The epochs of each sliced chain of ``graph``'s next run (head -> its members and its most epochs; module
    rule)."""
    costs = slice_costs(graph, sliced, history)
    return {head: _slices(head, members, most, history, costs[head])
            for head, (members, most) in sorted(sliced.items())}


@dataclass(frozen=True)
class EpochCost:
    """What one more epoch of a chain subtask costs (module rule): its mean measured ``checkpoint`` seconds
    (``None`` before one was measured) and ``reread``, reading the subtask's inputs again."""

    checkpoint: float | None
    reread: float = 0.0

    @property
    def checkpoint_or_default(self) -> float:
        """The measured checkpoint seconds, or :data:`DEFAULT_EPOCH_SECONDS` before one was measured."""
        return DEFAULT_EPOCH_SECONDS if self.checkpoint is None else self.checkpoint

    @property
    def seconds(self) -> float:
        """``C``: the checkpoint (or its default) and the re-read."""
        return self.checkpoint_or_default + self.reread


def slice_costs(graph: JobGraph, heads: Iterable[str], history: History) -> dict[str, EpochCost]:
    """``C`` of each sliced chain (by head step) of ``graph`` after ``history`` (module rule)."""
    results = result_estimates(graph, history)
    return {head: EpochCost(checkpoint_seconds(head, history), read_share(graph, results, head)) for head in heads}


def checkpoint_seconds(step: str, history: History) -> float | None:
    """The mean seconds one of ``step``'s checkpoints took over the runs that checkpointed it, ``None`` if none."""
    costs = [c for r in history.runs if (t := r.step(step)) is not None and (c := t.checkpoint_seconds) is not None]
    return sum(costs) / len(costs) if costs else None


def _slices(head: str, members: tuple[str, ...], most: int, history: History, figures: EpochCost) -> EpochsChoice:
    means = []
    for step in members:
        seconds = [s for r in history.runs if (t := r.step(step)) is not None for s in t.subtask_seconds]
        if not seconds:
            return EpochsChoice(1, f"no run measured {step!r}'s work yet: one epoch (the subtask runs whole)")
        means.append(sum(seconds) / len(seconds))
    work = sum(means)
    checkpoint, reread, cost = figures.checkpoint_or_default, figures.reread, figures.seconds
    rate = step_rates([head], history)[head]
    epochs = epochs_for(work, cost, rate.per_task_second, most)
    interval = daly_interval(cost, 1 / rate.per_task_second)
    measured = "not measured yet, the default" if figures.checkpoint is None else "measured"
    return EpochsChoice(epochs, f"W={work:.3g}s of work per subtask, C={cost:.3g}s per epoch ({checkpoint:.3g}s "
                                f"checkpoint, {measured}; {reread:.3g}s reading its inputs again), "
                                f"{rate.per_task_hour:.3g} failures per task-hour ({rate.failures} in "
                                f"{len(history.runs)} runs): Daly's interval {interval:.3g}s -> {epochs} epoch(s)")

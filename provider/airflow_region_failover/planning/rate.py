"""Failure rates: failures per task-hour, for a DAG and for each of its steps, with a prior for little history.

Rule: failures are a Poisson process in task time (every running task try is exposed; the standard assumption of
Young 1974 and Daly 2006, and of Flint, EuroSys 2016, which measures a revocation rate the same way). A rate λ
has the conjugate Gamma prior Gamma(α₀, β₀) — α₀ pseudo-failures seen in β₀ pseudo task-hours — so after ``k``
failed task tries in ``H`` task-hours the posterior is Gamma(α₀ + k, β₀ + H) and the rate used is its mean

    λ = (α₀ + k) / (β₀ + H)   failures per task-hour,   spread √(α₀ + k) / (β₀ + H).

* The DAG's rate counts every failed try of its runs over their task seconds (all tries). Its prior is
  :data:`PRIOR_PER_TASK_HOUR` = 0.01 (one failure in 100 task-hours) weighing :data:`PRIOR_TASK_HOURS` = 0.01
  task-hours (36 task-seconds, a fraction of one run), so a DAG with no history is taken to fail rarely and its
  first runs soon outweigh that.
* A step's rate counts its failed tries over all the seconds its tries ran: its successful tries' measured
  seconds and its failed tries' seconds (``failed_tries``; a try killed early exposed little, and counting only
  successful tries' seconds overstates a steady failure clock's rate by the failed tries' share of the time —
  measured: 12 failures of the join in 268 s of successful tries, in 1,040 s of all its tries, 2026-12-04). Its
  prior is the DAG's rate with the same weight (partial pooling): a step with little exposure takes the DAG's
  rate, a step that fails in every run — a *late failure* — gets a rate of its own. Where failures happen
  matters: they restart the region they hit, and how far into its attempt a failure comes is what it loses — the
  mean of the step's fractions (``lost``, :attr:`FailureRate.lost_fraction`; none measured: the Poisson process's
  own, :mod:`.model`).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from airflow_region_failover.planning.history import History

PRIOR_PER_TASK_HOUR = 0.01
"""The prior's mean rate, failures per task-hour (module rule)."""
PRIOR_TASK_HOURS = 0.01
"""β₀: the prior's weight in pseudo task-hours (module rule)."""


@dataclass(frozen=True)
class FailureRate:
    """``failures`` failed task tries in ``task_hours`` of exposure over ``runs``, with the prior (module rule)."""

    failures: int
    task_hours: float
    runs: tuple[str, ...] = ()
    prior_per_task_hour: float = PRIOR_PER_TASK_HOUR
    prior_task_hours: float = PRIOR_TASK_HOURS
    lost: tuple[float, ...] = ()

    @property
    def lost_fraction(self) -> float | None:
        """The mean fraction of its attempt a failed try ran (``None``: no failed try measured one)."""
        return sum(self.lost) / len(self.lost) if self.lost else None

    @property
    def per_task_hour(self) -> float:
        """The posterior mean λ, failures per task-hour."""
        alpha = self.prior_per_task_hour * self.prior_task_hours
        return (alpha + self.failures) / (self.prior_task_hours + self.task_hours)

    @property
    def per_task_second(self) -> float:
        """λ per task-second."""
        return self.per_task_hour / 3600.0

    @property
    def spread_per_task_hour(self) -> float:
        """The posterior standard deviation of λ, failures per task-hour."""
        alpha = self.prior_per_task_hour * self.prior_task_hours
        return math.sqrt(alpha + self.failures) / (self.prior_task_hours + self.task_hours)

    def to_json(self) -> dict[str, Any]:
        """The figures, the prior and the rate; ``lost_fraction`` ``None`` when no failed try measured one."""
        lost = self.lost_fraction
        return {"failures": self.failures, "task_hours": round(self.task_hours, 6), "runs": list(self.runs),
                "prior": {"per_task_hour": round(self.prior_per_task_hour, 6),
                          "task_hours": self.prior_task_hours},
                "per_task_hour": round(self.per_task_hour, 6),
                "spread_per_task_hour": round(self.spread_per_task_hour, 6),
                "lost_fraction": None if lost is None else round(lost, 4)}


def failure_rate(history: History) -> FailureRate:
    """The DAG's rate over every run of ``history`` (the caller picks the window, :meth:`History.last`)."""
    return FailureRate(sum(sum(r.failures.values()) for r in history.runs),
                       sum(r.task_seconds for r in history.runs) / 3600.0, tuple(r.run_id for r in history.runs))


def step_rates(steps: Iterable[str], history: History) -> dict[str, FailureRate]:
    """Each step's rate, pooled towards the DAG's (module rule)."""
    pooled = failure_rate(history).per_task_hour
    rates = {}
    for step in steps:
        seconds = sum(sum(t.subtask_seconds) for r in history.runs if (t := r.step(step)) is not None)
        failed = [t for r in history.runs for t in r.failed_tries.get(step, ())]
        rates[step] = FailureRate(sum(r.failures.get(step, 0) for r in history.runs),
                                  (seconds + sum(t.seconds for t in failed)) / 3600.0,
                                  tuple(r.run_id for r in history.runs), pooled,
                                  lost=tuple(t.fraction for t in failed if t.fraction is not None))
    return rates


def lost_fractions(rates: Mapping[str, FailureRate]) -> dict[str, float]:
    """Step -> the mean fraction of its attempt a failed try of it ran, for the steps that measured one."""
    return {step: lost for step, r in rates.items() if (lost := r.lost_fraction) is not None}

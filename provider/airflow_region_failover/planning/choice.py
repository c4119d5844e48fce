"""Which exchange plan a run gets: the cheapest in expectation, but only with enough history and a clear gain.

Rules:

* the previous plan is the newest run's (its choices for results no longer AUTO dropped); with no run it is the
  default, every AUTO result BLOCKING. BLOCKING is the default because it is the conservative choice: a failure
  restarts the least, a run finishes even under failures more frequent than the whole job runs, and only a
  BLOCKING run measures what choosing needs (each AUTO result's bytes and write and read seconds — a fused run
  does not materialise them);
* with fewer than :attr:`PlannerPolicy.min_runs` runs (3) in the window the previous plan is kept: one run is not a
  failure rate;
* otherwise every plan is costed (:func:`~.model.plan_cost`; all 2^k when k ≤ :attr:`PlannerPolicy.exhaustive` AUTO
  results, else from the previous plan flipping one result at a time while that gains), over the newest
  :attr:`PlannerPolicy.window` runs (20) and the failure rates they measured, each step's own (:mod:`.rate`). An AUTO
  result that is *pinned* (fusing impossible, with the caller's reason) or that no run has persisted (it cannot
  be costed persisted) stays BLOCKING;
* hysteresis: the run switches to the cheapest plan only when it saves more than :attr:`PlannerPolicy.margin` (10 %) of
  the previous plan's expected time; a smaller gain keeps the previous plan, so a history near the break-even
  rate — or alternating between failing and clean runs — does not flap. A plan never changes within a run: the
  choice is made once, before it starts;
* a **deadline** (:attr:`PlannerPolicy.deadline_seconds`) ranks plans by their probability of missing it instead
  (:mod:`.deadline`; the mean among plans equally likely to miss it), and the run switches only when the cheapest
  lowers that probability by more than :attr:`PlannerPolicy.deadline_margin` (5 points); plans equally likely to miss it
  switch by the mean's rule above;
* every plan is costed with the epochs the next run's steps take (``segments``, :class:`~.model.Segments`: its
  sliced chains and AUTO-epochs steps, as :mod:`.epochs` chooses them), and a job without an AUTO edge gets the
  cost of the one plan it has, as declared (:func:`declared_cost`), so its expected completion time is shown too.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from airflow_region_failover.graph.auto import Choice, ExchangePlan, all_of, auto_results
from airflow_region_failover.graph.model import JobGraph
from airflow_region_failover.planning.deadline import TIE, miss_probability, rank
from airflow_region_failover.planning.estimates import Estimates, estimate
from airflow_region_failover.planning.history import History
from airflow_region_failover.planning.model import PlanCost, Segments, plan_cost
from airflow_region_failover.planning.policy import DEFAULT_POLICY, PlannerPolicy
from airflow_region_failover.planning.rate import FailureRate, failure_rate, lost_fractions, step_rates

Costing = Callable[[ExchangePlan], PlanCost]


@dataclass(frozen=True)
class EdgeAdvice:
    """One AUTO result: the plan's expected seconds with it persisted and with it fused (the other results as
    chosen), the choice, and why it could not be fused (``pinned``) if so."""

    result: str
    persist: float | None
    fuse: float | None
    choice: Choice
    pinned: str | None = None

    def to_json(self) -> dict[str, Any]:
        """The JSON form."""
        return {"result": self.result, "choice": self.choice.value, "pinned": self.pinned,
                "expected_seconds_if_persisted": None if self.persist is None else round(self.persist, 3),
                "expected_seconds_if_fused": None if self.fuse is None else round(self.fuse, 3)}


@dataclass(frozen=True)
class Decision:
    """The plan chosen for the next run and why; the costed plans when there was enough history."""

    plan: ExchangePlan
    reason: str
    rate: FailureRate
    previous: ExchangePlan
    step_rates: Mapping[str, FailureRate] = field(default_factory=dict)
    chosen: PlanCost | None = None
    best: PlanCost | None = None
    previous_cost: PlanCost | None = None
    all_blocking: PlanCost | None = None
    all_fused: PlanCost | None = None
    edges: tuple[EdgeAdvice, ...] = ()
    estimates: Estimates | None = field(default=None, repr=False)
    deadline_seconds: float | None = None
    policy: PlannerPolicy = DEFAULT_POLICY

    def to_json(self) -> dict[str, Any]:
        """The JSON form (what ``region-failover advise --json`` prints)."""
        def cost(value: PlanCost | None) -> dict[str, Any] | None:
            return None if value is None else value.to_json()

        return {"plan": self.plan.to_json(), "reason": self.reason, "failure_rate": self.rate.to_json(),
                "step_failure_rates": {s: r.to_json() for s, r in self.step_rates.items()},
                "previous": self.previous.to_json(), "chosen": cost(self.chosen), "best": cost(self.best),
                "all_blocking": cost(self.all_blocking), "all_fused": cost(self.all_fused),
                "edges": [e.to_json() for e in self.edges],
                "figures": None if self.estimates is None else self.estimates.to_json(),
                "deadline": self._deadline_json(),  # the budget is there, not in "planner"
                "planner": {k: v for k, v in asdict(self.policy).items() if k != "deadline_seconds"}}

    def _deadline_json(self) -> dict[str, Any] | None:
        """The deadline and each costed plan's probability of missing it (None without a deadline)."""
        if self.deadline_seconds is None:
            return None
        plans = {"chosen": self.chosen, "previous": self.previous_cost, "all_blocking": self.all_blocking,
                 "all_fused": self.all_fused}
        return {"seconds": self.deadline_seconds,
                "miss_probability": {name: None if cost is None else round(miss_probability(cost,
                                                                                            self.deadline_seconds), 4)
                                     for name, cost in plans.items()}}


def decide(graph: JobGraph, history: History, policy: PlannerPolicy = DEFAULT_POLICY,
           pinned: Mapping[str, str] | None = None, serial: Sequence[frozenset[str]] = (),
           segments: Mapping[str, Segments] | None = None) -> Decision:
    """The plan for the next run of ``graph`` (with its AUTO edges) after ``history`` (module rules); ``serial``:
    the subtasks each multi-subtask task runs, whatever the plan, ``segments`` the steps that run in epochs
    (:func:`~.model.plan_cost`)."""
    auto = auto_results(graph)
    previous = _previous(history, auto)
    window = history.last(policy.window)
    rate = failure_rate(window)
    if len(window.runs) < policy.min_runs:
        return Decision(previous, f"{len(window.runs)} run(s) of history, fewer than the {policy.min_runs} a choice "
                        "needs: the previous plan (every AUTO result BLOCKING when there is none) is kept", rate,
                        previous, policy=policy)
    estimates = estimate(graph, window)
    rates = step_rates((s.id for s in graph.steps), window)
    per_second, lost = {step: r.per_task_second for step, r in rates.items()}, lost_fractions(rates)
    fixed = dict(pinned or {})
    for result in auto:
        if result not in estimates.results and result not in fixed:
            fixed[result] = "no run of the history persisted it yet"
    previous = ExchangePlan({r: Choice.BLOCKING if r in fixed else c for r, c in previous.choices.items()})

    costed: dict[ExchangePlan, PlanCost] = {}

    def cost(plan: ExchangePlan) -> PlanCost:  # a plan that ran, from its own runs' compute (:mod:`.estimates`)
        if plan not in costed:
            costed[plan] = plan_cost(graph, plan, estimate(graph, window, plan), per_second, policy.restart_seconds,
                                     serial, segments, lost)
        return costed[plan]

    free = [r for r in auto if r not in fixed]
    best = _cheapest(free, previous, cost, policy.exhaustive, policy.deadline_seconds)
    chosen, reason = _switch(cost(previous), best, policy)
    edges = tuple(_advice(r, chosen.plan, fixed.get(r), cost) for r in auto)
    return Decision(chosen.plan, reason, rate, previous, rates, chosen, best, cost(previous),
                    cost(all_of(graph, Choice.BLOCKING)), cost(all_of(graph, Choice.FUSED, frozenset(fixed))), edges,
                    estimates, policy.deadline_seconds, policy)


def declared_cost(graph: JobGraph, history: History, policy: PlannerPolicy = DEFAULT_POLICY,
                  serial: Sequence[frozenset[str]] = (), segments: Mapping[str, Segments] | None = None) -> PlanCost:
    """The expected completion time of ``graph``'s next run as declared (a job without AUTO edges: one plan), over
    the newest :attr:`PlannerPolicy.window` runs (module rule); :class:`~.history.HistoryError` naming a step no
    run measured."""
    window = history.last(policy.window)
    rates = step_rates((s.id for s in graph.steps), window)
    return plan_cost(graph, ExchangePlan(), estimate(graph, window), {s: r.per_task_second for s, r in rates.items()},
                     policy.restart_seconds, serial, segments, lost_fractions(rates))


def _switch(previous: PlanCost, best: PlanCost, policy: PlannerPolicy) -> tuple[PlanCost, str]:
    """The hysteresis (module rules): the plan the run gets, and why."""
    deadline = policy.deadline_seconds
    if best.plan == previous.plan:
        return best, ("keeps the previous plan: it is the cheapest" if deadline is None else
                      f"keeps the previous plan: it is the least likely to miss the {deadline:.0f} s deadline "
                      "(then the cheapest)")
    if deadline is not None:
        before, after = miss_probability(previous, deadline), miss_probability(best, deadline)
        if before - after > policy.deadline_margin:
            return best, (f"switches: misses the {deadline:.0f} s deadline with probability {after:.2f} instead of "
                          f"{before:.2f}, better by more than the {policy.deadline_margin:.2f} margin")
        if abs(before - after) >= TIE:
            return previous, (f"keeps the previous plan: the best misses the {deadline:.0f} s deadline with "
                              f"probability {after:.2f} instead of {before:.2f}, within the "
                              f"{policy.deadline_margin:.2f} margin")
    saving = previous.expected - best.expected
    if saving > policy.margin * previous.expected:
        return best, (f"switches: saves {saving:.1f} s of {previous.expected:.1f} s expected, more than the "
                      f"{policy.margin:.0%} margin")
    return previous, (f"keeps the previous plan: the cheapest saves {saving:.1f} s of {previous.expected:.1f} s, "
                      f"within the {policy.margin:.0%} margin")


def _previous(history: History, auto: tuple[str, ...]) -> ExchangePlan:
    if not history.runs:
        return ExchangePlan({r: Choice.BLOCKING for r in auto})
    plan = history.runs[-1].plan
    return ExchangePlan({r: plan.choice(r) for r in auto})


def _cheapest(free: list[str], start: ExchangePlan, cost: Costing, exhaustive: int,
              deadline: float | None) -> PlanCost:
    """The best plan varying only ``free`` results, by :func:`~.deadline.rank` (module rule: exhaustive, or one
    flip at a time)."""
    if len(free) <= exhaustive:
        plans = (_with(start, dict(zip(free, choices, strict=True)))
                 for choices in itertools.product((Choice.BLOCKING, Choice.FUSED), repeat=len(free)))
        return min((cost(p) for p in plans), key=lambda c: rank(c, deadline))
    best = cost(start)
    improved = True
    while improved:
        improved = False
        for result in free:
            flipped = Choice.FUSED if best.plan.choice(result) is Choice.BLOCKING else Choice.BLOCKING
            candidate = cost(best.plan.with_choice(result, flipped))
            if rank(candidate, deadline) < rank(best, deadline):
                best, improved = candidate, True
    return best


def _with(plan: ExchangePlan, choices: Mapping[str, Choice]) -> ExchangePlan:
    return ExchangePlan({**plan.choices, **choices})


def _advice(result: str, plan: ExchangePlan, pinned: str | None, cost: Costing) -> EdgeAdvice:
    persist = cost(plan.with_choice(result, Choice.BLOCKING)).expected
    fuse = None if pinned is not None else cost(plan.with_choice(result, Choice.FUSED)).expected
    return EdgeAdvice(result, persist, fuse, plan.choice(result), pinned)

"""The expected completion time of an exchange plan at a failure rate, and its spread: the one formula.

The model (the standard one for work that restarts from its start; Young 1974, Daly 2006, and Flint, EuroSys
2016, which chooses what to checkpoint from it):

* a plan resolves the graph (:func:`~.graph.auto.resolve`) and so its failover regions
  (:func:`~.graph.regions.compute_regions`); each region restarts from its start, independently of the others,
  when one of its subtasks fails. A BLOCKING result is paid on every run: its producers' write seconds and its
  consumers' read seconds join the subtasks' work (Mantri, OSDI 2010: protect an output when recomputing it
  would cost more than copying it — here, in expectation);
* a region's wall time per attempt ``W`` is the longest path through its steps, a step costing its slowest
  subtask in the region (compute + its share of reads and writes); its exposure ``S`` is the sum over its
  subtasks of the same seconds. Failures arrive at ``λ`` per task-second, each step at its own rate
  (:mod:`.rate`), so an attempt meets ``m = Σ λ_step·seconds`` over its subtasks failures on average (``λ·S``
  at one rate) and fails with probability ``1 − e^{−m}``; with ``R`` seconds lost per
  restart (the restart's scheduling and session start), the region's completion time has mean

      E = (e^{m} − 1) · (W/m + R)          (→ W as m → 0; with S = W it is (e^{λW} − 1)/λ + R(e^{λW} − 1))

  and the variance of a geometric sum: ``N`` failed attempts (mean q/p, variance q/p², p = e^{−m}, q = 1 − p),
  each losing a time ``X`` exponential at the wall rate ``m/W`` cut at ``W``, plus ``R``:
  ``Var = E[N]·Var(X) + Var(N)·(E[X] + R)²``;
* where the history measured how far into their attempts failures came (``lost``: per step, the mean fraction
  of its attempt a failed try ran, :attr:`.rate.FailureRate.lost_fraction`), a failure loses that much instead of
  the exponential's share: failures need not be memoryless (a step that fails at the end of every first try
  loses a whole attempt each time, one killed by a steady clock a part). A failed attempt running a fraction
  ``φ`` of ``W`` and the rate ``m`` per ``W`` seconds of exposure (which counts the failed attempts' seconds,
  :mod:`.rate`) leave ``m / (1 − m·φ)`` failed attempts per success (the renewal identity: failures per exposure
  second = ``q / (q·φW + (1 − q)·W)``), so

      E = W + m·(φ·W + R) / (1 − m·φ),     Var = N̄·(1 + N̄)·(φ·W + R)²,   N̄ = m / (1 − m·φ)

  which is the formula above exactly when ``φ`` is the exponential's mean share ``1/m − e^{−m}/(1 − e^{−m})``;
  ``m·φ`` is held to at most :data:`MAX_LOST_SHARE` (beyond it no attempt would finish). A region's ``φ`` weighs
  its steps' by their failures: a failure of step ``s`` at fraction ``φ_s`` of its work loses the seconds before
  ``s`` starts in the region (its longest path) and ``φ_s`` of its slowest subtask; a step with none measured
  loses the exponential's share;
* the plan's completion time is the longest path through the region graph (regions joined by BLOCKING results)
  weighted by each region's ``E`` — independent regions run side by side, as Airflow runs them given slots — and
  its spread the square root of the variances summed along that path (PERT's approximation);
* a region that is one subtask of a chain run in **epochs** (``segments``: the chain's steps, ``E`` > 1 epochs with
  a checkpoint costing ``C`` seconds after each — a sliced chain, a checkpointed step) restarts from its last
  checkpoint, not from its start: its attempts are its ``E`` epochs, each ``W/E + C`` wall seconds meeting
  ``m·(W/E + C)/W`` failures, so ``E_region = E · E_epoch`` and ``Var_region = E · Var_epoch`` (independent epochs;
  Young's and Daly's model, which :mod:`.epochs` chooses ``E`` by). Any other region (a chain fused with other
  steps, several subtasks) runs whole; with ``E`` = 1 nothing is checkpointed and nothing is paid;
* except inside one task: the subtasks a task runs (``serial``, a job rendered ``PER_RUN`` runs its static fused
  regions as one task each, whatever the run's plan) run one after another in its one Spark session, and the
  history measured them so (the task's clock split over its members). A region all of whose subtasks one task runs
  has ``W = S``, and the regions one task runs follow each other on the path, in the region graph's order.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from airflow_region_failover.graph.auto import ExchangePlan, resolve
from airflow_region_failover.graph.elements import Exchange
from airflow_region_failover.graph.model import JobGraph
from airflow_region_failover.graph.regions import Region, Regions, compute_regions
from airflow_region_failover.planning.estimates import Estimates, read_share

DEFAULT_RESTART_SECONDS = 10.0
"""R: seconds a restart loses besides the lost work (Airflow clearing and scheduling the tasks, a Spark session)."""
MAX_LOST_SHARE = 0.95
"""The most ``m·φ`` may be (module rule): at most ``m / 0.05`` failed attempts per success."""
_TINY = 1e-6


def failed_attempts(failures: float, lost: float) -> float:
    """N̄: failed attempts per success at ``failures`` (m) per attempt's exposure, each running ``lost`` (φ) of it."""
    return failures / (1 - min(failures * lost, MAX_LOST_SHARE))


def memoryless_share(failures: float) -> float:
    """The exponential's mean share of an attempt a failure loses at ``failures`` (m) per attempt (module rule)."""
    if failures < _TINY:
        return 0.5 - failures / 12
    return 1 / failures - 1 / math.expm1(failures)


def expected_time(work: float, failures: float, restart_seconds: float = 0.0, lost: float | None = None) -> float:
    """Mean completion time of ``work`` wall seconds meeting ``failures`` (m) failures per attempt on average, each
    losing the exponential's share of the attempt or ``lost`` of it (module rule)."""
    if lost is not None:
        return work + failed_attempts(failures, lost) * (lost * work + restart_seconds)
    if failures < _TINY:
        return work * (1 + failures / 2) + restart_seconds * failures
    return math.expm1(failures) * (work / failures + restart_seconds)


def time_variance(work: float, failures: float, restart_seconds: float = 0.0, lost: float | None = None) -> float:
    """Variance of that completion time (module rule)."""
    if work <= 0 or failures <= 0:
        return 0.0
    if lost is not None:
        attempts = failed_attempts(failures, lost)
        return attempts * (1 + attempts) * (lost * work + restart_seconds) ** 2
    if failures < _TINY:  # at most one failure, at a uniform point of the attempt
        return failures * (work * work / 3 + work * restart_seconds + restart_seconds ** 2)
    p = math.exp(-failures)
    q = -math.expm1(-failures)
    scale = work / failures  # 1 / the wall rate
    lost = scale - work * p / q  # E[X | X < W]
    lost_square = (2 * scale * scale - p * (work * work + 2 * work * scale + 2 * scale * scale)) / q
    mean_failed, attempts_variance = q / p, q / (p * p)
    return mean_failed * max(lost_square - lost * lost, 0.0) + attempts_variance * (lost + restart_seconds) ** 2


@dataclass(frozen=True)
class Segments:
    """The chain (its steps) whose subtasks run in ``epochs`` epochs, each followed by a checkpoint of ``seconds``
    (module rule)."""

    epochs: int
    seconds: float
    chain: tuple[str, ...]

    def __post_init__(self) -> None:
        if self.epochs < 1 or self.seconds < 0 or not self.chain:
            raise ValueError(f"Segments({self.epochs}, {self.seconds}, {self.chain}): a chain of steps runs at "
                             "least one epoch and a checkpoint costs no less than 0 s")


def _epochs_of(region: Region, segments: Mapping[str, Segments]) -> Segments | None:
    """The epochs of ``region`` when it is one subtask of a chain run in more than one (module rule), else None."""
    found = segments.get(region.steps[0]) if region.steps else None
    if found is None or found.epochs == 1 or set(region.steps) != set(found.chain):
        return None
    return found if len(region.subtasks) == len(found.chain) else None


def region_time(work: float, failures: float, restart_seconds: float,
                epochs: Segments | None = None, lost: float | None = None) -> tuple[float, float]:
    """A region's expected completion seconds and their variance, whole or in epochs, a failure losing the
    exponential's share of an attempt or ``lost`` of it (module rule)."""
    if epochs is None or work <= 0:
        return (expected_time(work, failures, restart_seconds, lost),
                time_variance(work, failures, restart_seconds, lost))
    seconds = work / epochs.epochs + epochs.seconds
    meets = failures * seconds / work
    return (epochs.epochs * expected_time(seconds, meets, restart_seconds, lost),
            epochs.epochs * time_variance(seconds, meets, restart_seconds, lost))


@dataclass(frozen=True)
class RegionCost:
    """One region of a plan: its steps, wall seconds ``work`` and ``task_seconds`` per attempt, the ``failures``
    an attempt meets on average (m), and its time."""

    region: str
    steps: tuple[str, ...]
    work: float
    task_seconds: float
    expected: float
    variance: float
    failures: float = 0.0

    def to_json(self) -> dict[str, Any]:
        """The JSON form."""
        return {"region": self.region, "steps": list(self.steps), "work": round(self.work, 3),
                "task_seconds": round(self.task_seconds, 3), "failures_per_attempt": round(self.failures, 6),
                "expected": round(self.expected, 3), "spread": round(math.sqrt(self.variance), 3)}


@dataclass(frozen=True)
class PlanCost:
    """A plan's expected completion seconds and their standard deviation (``spread``), with the regions and the
    critical path (region ids) they came from."""

    plan: ExchangePlan
    expected: float
    spread: float
    regions: tuple[RegionCost, ...]
    critical_path: tuple[str, ...]

    def to_json(self) -> dict[str, Any]:
        """The JSON form."""
        return {"plan": self.plan.to_json(), "expected_seconds": round(self.expected, 3),
                "spread_seconds": round(self.spread, 3), "critical_path": list(self.critical_path),
                "regions": [r.to_json() for r in self.regions]}


def plan_cost(graph: JobGraph, plan: ExchangePlan, estimates: Estimates, per_task_second: Mapping[str, float],
              restart_seconds: float = DEFAULT_RESTART_SECONDS,
              serial: Sequence[frozenset[str]] = (), segments: Mapping[str, Segments] | None = None,
              lost: Mapping[str, float] | None = None) -> PlanCost:
    """The expected completion time of ``graph`` (with its AUTO edges) under ``plan``, each step failing at its
    rate ``per_task_second[step]``; ``serial``: the subtask ids (``step#i``) each task that runs several runs;
    ``segments``: the steps that run in epochs; ``lost``: per step, the fraction of its attempt a failure of it
    was measured to lose (module rules)."""
    concrete = resolve(graph, plan)
    regions = compute_regions(concrete)
    costs = _subtask_seconds(concrete, estimates)
    region_costs = []
    tasks: list[list[int]] = [[] for _ in serial]
    for number, region in enumerate(regions.regions):
        exposure = sum(costs[(t.step, t.index)] for t in region.subtasks)
        ids = {str(t) for t in region.subtasks}
        task = next((i for i, members in enumerate(serial) if ids <= members), None)
        if task is not None:
            tasks[task].append(number)
        slowest = {s: max(costs[(s, t.index)] for t in region.subtasks if t.step == s) for s in region.steps}
        starts = _starts(concrete, region.steps, slowest)
        work = exposure if task is not None else max((starts[s] + slowest[s] for s in region.steps), default=0.0)
        meets = {s: 0.0 for s in region.steps}
        for t in region.subtasks:
            meets[t.step] += per_task_second[t.step] * costs[(t.step, t.index)]
        failures = sum(meets.values())
        share = _lost_share(work, meets, starts, slowest, lost or {})
        expected, variance = region_time(work, failures, restart_seconds, _epochs_of(region, segments or {}), share)
        region_costs.append(RegionCost(region.id, region.steps, work, exposure, expected, variance, failures))
    expected, variance, path = _critical_path(regions, region_costs, tasks)
    return PlanCost(plan, expected, math.sqrt(variance), tuple(region_costs), path)


def _subtask_seconds(graph: JobGraph, estimates: Estimates) -> dict[tuple[str, int], float]:
    """Each subtask's seconds per attempt: compute, plus its share of its BLOCKING inputs' reads and outputs'
    writes (a result no run measured costs nothing here: :mod:`.estimates`)."""
    seconds: dict[tuple[str, int], float] = {}
    for step in graph.steps:
        io = 0.0
        for result in graph.outputs(step.id):
            found = estimates.results.get(result.id)
            if result.exchange is Exchange.BLOCKING and found is not None:
                io += found.write_seconds.value / step.parallelism
        io += read_share(graph, estimates.results, step.id)
        for index in range(step.parallelism):
            seconds[(step.id, index)] = estimates.steps[step.id].seconds(index) + io
    return seconds


def _topological(successors: Sequence[set[int]]) -> list[int]:
    """The nodes in an order where every node comes after its predecessors (Kahn's, lowest index first)."""
    indegree = [0] * len(successors)
    for targets in successors:
        for t in targets:
            indegree[t] += 1
    ready = sorted(i for i, d in enumerate(indegree) if d == 0)
    order: list[int] = []
    while ready:
        node = ready.pop(0)
        order.append(node)
        for t in sorted(successors[node]):
            indegree[t] -= 1
            if indegree[t] == 0:
                ready.append(t)
    return order


def _starts(graph: JobGraph, steps: tuple[str, ...], cost: dict[str, float]) -> dict[str, float]:
    """Each of ``steps``' start: the longest path to it (in topological order) along the graph's edges among them."""
    inside = set(steps)
    start: dict[str, float] = {}
    for step in steps:
        start[step] = max((start[e.source] + cost[e.source] for e in graph.inputs(step)
                           if e.source in inside and e.source in start), default=0.0)
    return start


def _lost_share(work: float, meets: Mapping[str, float], starts: Mapping[str, float], slowest: Mapping[str, float],
                lost: Mapping[str, float]) -> float | None:
    """φ of a region: its steps' measured losses weighed by their failures (module rule); ``None`` when none of
    its failing steps measured one (the exponential's share, as for one step)."""
    failures = sum(meets.values())
    if work <= 0 or failures <= 0 or not any(meets[s] > 0 and s in lost for s in meets):
        return None
    memoryless = memoryless_share(failures)
    return sum(m * (min(1.0, (starts[s] + lost[s] * slowest[s]) / work) if s in lost else memoryless)
               for s, m in meets.items()) / failures


def _critical_path(regions: Regions, costs: list[RegionCost],
                   tasks: Sequence[Sequence[int]] = ()) -> tuple[float, float, tuple[str, ...]]:
    """The longest path through the region graph by expected time: (expected, variance, region ids); the regions
    of each of ``tasks`` one after another (module rule)."""
    successors: list[set[int]] = [set() for _ in costs]
    for group in regions.groups():
        if group.group.edge.exchange is not Exchange.BLOCKING:
            continue
        sources = {regions.region_index[p] for p in group.producers}
        targets = {regions.region_index[c] for c in group.consumers}
        for s in sources:
            successors[s].update(t for t in targets if t != s)
    position = {node: i for i, node in enumerate(_topological(successors))}
    for members in tasks:
        ordered = sorted(members, key=position.__getitem__)
        for before, after in itertools.pairwise(ordered):
            successors[before].add(after)
    indegree = [0] * len(costs)
    for targets in successors:
        for t in targets:
            indegree[t] += 1
    ready = [i for i, d in enumerate(indegree) if d == 0]
    best: list[tuple[float, float, tuple[int, ...]]] = [(c.expected, c.variance, (i,)) for i, c in enumerate(costs)]
    while ready:
        node = ready.pop()
        expected, variance, path = best[node]
        for t in successors[node]:
            candidate = (expected + costs[t].expected, variance + costs[t].variance, (*path, t))
            if candidate[0] > best[t][0] or (candidate[0] == best[t][0] and len(path) + 1 > len(best[t][2])):
                best[t] = candidate
            indegree[t] -= 1
            if indegree[t] == 0:
                ready.append(t)
    expected, variance, path = max(best, key=lambda b: b[0], default=(0.0, 0.0, ()))
    return expected, variance, tuple(costs[i].region for i in path)

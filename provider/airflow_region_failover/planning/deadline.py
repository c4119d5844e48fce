"""The probability that a plan misses a deadline: what the planner minimises when a run declares one.

Rule (issue 47: "a run may declare a deadline; the plan then minimises the probability of missing it instead of
the mean"). A plan's completion time ``T`` along its critical path (:mod:`.model`) is its failure-free time ``W``
(the regions' work summed along the path) plus the time lost to failures ``L``:

* with probability ``p₀ = e^{−m}`` no failure hits the path (``m``: the failures its attempts meet on average,
  summed over the path's regions) and ``L = 0`` — the run finishes in ``W``, exactly;
* otherwise ``L`` has the conditional mean and variance that the model's mean ``E`` and variance ``V`` leave:
  ``μ = (E − W)/(1 − p₀)`` and ``σ² = (V + (E − W)²)/(1 − p₀) − μ²``, and is taken as Gamma distributed with
  those moments (positive and skewed to the right like a geometric sum of lost attempts; a normal tail would
  understate the chance of a second and third failure).

So ``P(T > d) = 1`` for ``d < W``, and ``(1 − p₀) · Q(k, (d − W)/θ)`` otherwise, with the Gamma's shape
``k = μ²/σ²``, scale ``θ = σ²/μ`` and ``Q`` the regularised upper incomplete gamma function. The planner then
ranks plans by that probability, and by the mean among plans whose probabilities differ by less than
:data:`TIE`: at a loose deadline every plan is safe and the cheapest in expectation wins, as without a deadline.
"""

from __future__ import annotations

import math

from airflow_region_failover.planning.model import PlanCost

TIE = 0.01
"""Miss probabilities closer than this are equal for ranking: the mean decides between them."""
_EPS = 1e-12


def miss_probability(cost: PlanCost, deadline_seconds: float) -> float:
    """P(the plan's completion time > ``deadline_seconds``) (module rule)."""
    path = [r for r in cost.regions if r.region in set(cost.critical_path)]
    work = sum(r.work for r in path)
    failures = sum(r.failures for r in path)
    if deadline_seconds < work:
        return 1.0
    hit = -math.expm1(-failures)  # 1 − p₀
    lost = cost.expected - work
    if hit < _EPS or lost <= _EPS:
        return 0.0
    mean = lost / hit
    variance = (cost.spread ** 2 + lost * lost) / hit - mean * mean
    if variance <= _EPS * max(mean * mean, 1.0):  # lost time as good as fixed
        return hit if deadline_seconds - work < mean else 0.0
    shape, scale = mean * mean / variance, variance / mean
    return hit * upper_gamma_q(shape, (deadline_seconds - work) / scale)


def upper_gamma_q(shape: float, x: float) -> float:
    """The regularised upper incomplete gamma function Q(shape, x) = Γ(shape, x)/Γ(shape): the series of P below
    ``shape + 1``, Lentz's continued fraction above (Numerical Recipes, §6.2)."""
    if x <= 0:
        return 1.0
    log_front = shape * math.log(x) - x - math.lgamma(shape)
    if x < shape + 1:
        term = total = 1.0 / shape
        a = shape
        for _ in range(1000):
            a += 1
            term *= x / a
            total += term
            if abs(term) < abs(total) * 1e-15:
                break
        return max(0.0, 1.0 - total * math.exp(log_front))
    tiny = 1e-300
    b = x + 1 - shape
    c, d = 1 / tiny, 1 / b
    h = d
    for i in range(1, 1000):
        an = -i * (i - shape)
        b += 2
        d = an * d + b
        d = tiny if abs(d) < tiny else d
        c = b + an / c
        c = tiny if abs(c) < tiny else c
        d = 1 / d
        delta = d * c
        h *= delta
        if abs(delta - 1) < 1e-15:
            break
    return min(1.0, math.exp(log_front) * h)


def rank(cost: PlanCost, deadline_seconds: float | None) -> tuple[float, float, int]:
    """The sort key of ``cost`` (lower is better): its miss probability rounded to :data:`TIE` when a deadline is
    given, then its mean, then how many results it fuses (fewer: the conservative plan wins a tie)."""
    miss = 0.0 if deadline_seconds is None else round(miss_probability(cost, deadline_seconds) / TIE)
    return (miss, cost.expected, len(cost.plan.fused))

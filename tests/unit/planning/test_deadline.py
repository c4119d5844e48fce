"""A deadline: the probability a plan misses it, checked against a simulation, and the choices it changes.

    (gen_orders#0,1)   --AUTO keyed--+
                                     +--> (join#0,1) --AUTO broadcast--> (report#0)
    (gen_lineitem#0,1) --AUTO keyed--+

(the synthetic ETL of ``test_choice.py``; its join fails in every other run).
"""

from __future__ import annotations

import math
import random

import pytest

from airflow_region_failover.graph.auto import Choice, ExchangePlan
from airflow_region_failover.planning.choice import decide
from airflow_region_failover.planning.deadline import miss_probability, upper_gamma_q
from airflow_region_failover.planning.history import History
from airflow_region_failover.planning.model import PlanCost, RegionCost, expected_time, time_variance
from airflow_region_failover.planning.policy import PlannerPolicy
from tests.unit.planning.test_choice import _etl, _run

GENERATORS_FUSED = ("gen_lineitem->join", "gen_orders->join")


@pytest.mark.parametrize("shape", [0.5, 1.0, 2.0, 7.5, 40.0])
def test_the_upper_incomplete_gamma_matches_its_closed_forms(shape: float) -> None:
    for x in (0.01, 0.3, 1.0, 2.5, 8.0, 30.0, 120.0):
        if shape == 0.5:
            exact = math.erfc(math.sqrt(x))
        elif shape == 1.0:
            exact = math.exp(-x)
        elif shape == 2.0:
            exact = (1 + x) * math.exp(-x)
        else:  # integer-free shapes: against a fine numerical integral of the density's tail
            exact = _tail_integral(shape, x)
        assert upper_gamma_q(shape, x) == pytest.approx(exact, abs=1e-6)


def _tail_integral(shape: float, x: float) -> float:
    top, steps = x + 60 * math.sqrt(shape) + 60, 200_000
    width = (top - x) / steps
    density = [math.exp((shape - 1) * math.log(x + i * width) - (x + i * width) - math.lgamma(shape))
               for i in range(steps + 1)]
    return width * (sum(density) - (density[0] + density[-1]) / 2)


def _simulated_times(work: float, failures: float, restart: float, samples: int, seed: int) -> list[float]:
    """Completion times of one region: attempts of ``work`` s, failures arriving at ``failures/work`` per s."""
    rng, times = random.Random(seed), []
    for _ in range(samples):
        total = 0.0
        while True:
            hit = rng.expovariate(failures / work)
            if hit >= work:
                times.append(total + work)
                break
            total += hit + restart
    return times


@pytest.mark.parametrize(("failures", "restart"), [(0.2, 10.0), (1.0, 10.0), (2.5, 0.0)])
def test_the_miss_probability_agrees_with_a_simulation(failures: float, restart: float) -> None:
    work = 100.0
    cost = PlanCost(ExchangePlan(), expected_time(work, failures, restart),
                    math.sqrt(time_variance(work, failures, restart)),
                    (RegionCost("r0", ("s",), work, work, expected_time(work, failures, restart),
                                time_variance(work, failures, restart), failures),), ("r0",))
    times = _simulated_times(work, failures, restart, 20_000, seed=47)
    assert cost.expected == pytest.approx(sum(times) / len(times), rel=0.03)
    for deadline in (99.0, 100.0, 150.0, 250.0, 400.0, 800.0):
        simulated = sum(t > deadline + 1e-9 for t in times) / len(times)
        assert miss_probability(cost, deadline) == pytest.approx(simulated, abs=0.03), deadline


def _join_fails_every_other_run() -> History:
    return History(tuple(_run(f"run{i}", {"join": 1} if i % 2 else {}) for i in range(6)))


def test_a_deadline_keeps_the_plan_least_likely_to_miss_it_where_the_mean_would_switch() -> None:
    """Fusing the generators saves 16.7 s on average, but a join failure then reruns them too: past a 400 s
    deadline that plan is likelier to be late, so with the deadline the persisted plan stays."""
    history = _join_fails_every_other_run()
    by_mean = decide(_etl(), history, PlannerPolicy(margin=0.0))
    assert by_mean.plan.fused == GENERATORS_FUSED and by_mean.reason.startswith("switches")
    by_deadline = decide(_etl(), history, PlannerPolicy(margin=0.0, deadline_seconds=400.0))
    assert by_deadline.plan == ExchangePlan() and "least likely to miss the 400 s deadline" in by_deadline.reason
    assert by_deadline.best is not None and by_mean.best is not None
    assert miss_probability(by_deadline.best, 400.0) < miss_probability(by_mean.best, 400.0)
    body = by_deadline.to_json()["deadline"]
    assert body["seconds"] == 400.0 and body["miss_probability"]["chosen"] < body["miss_probability"]["all_fused"]


def test_a_loose_or_an_impossible_deadline_leaves_the_choice_to_the_mean() -> None:
    """Every plan surely meets 2000 s, and surely misses 150 s (less than any plan's failure-free time)."""
    history = _join_fails_every_other_run()
    by_mean = decide(_etl(), history, PlannerPolicy(margin=0.0)).plan
    for deadline in (2000.0, 150.0):
        assert decide(_etl(), history, PlannerPolicy(margin=0.0, deadline_seconds=deadline)).plan == by_mean


def test_a_small_gain_in_the_miss_probability_keeps_the_previous_plan() -> None:
    """The hysteresis on the deadline: the persisted plan lowers the miss probability of an all-fused previous
    plan at 250 s by less than a margin of 0.5, so the previous plan stays; at no margin it switches."""
    fused = ExchangePlan({r: Choice.FUSED for r in GENERATORS_FUSED})
    history = History(tuple(_run(f"run{i}", {"join": 1} if i % 2 else {}, fused if i == 5 else ExchangePlan())
                            for i in range(6)))
    kept = decide(_etl(), history, PlannerPolicy(deadline_seconds=250.0, deadline_margin=0.5))
    assert kept.plan.fused == GENERATORS_FUSED and "within the 0.50 margin" in kept.reason
    switched = decide(_etl(), history, PlannerPolicy(deadline_seconds=250.0, deadline_margin=0.0))
    assert switched.plan != kept.plan and "misses the 250 s deadline with probability" in switched.reason

"""The completion-time formula: its limits, a Monte Carlo check of its mean and variance, and a plan's regions.

    (a#0) --AUTO--> (b#0)        a: 100 s, b: 50 s; a->b: 10 s to write, 5 s to read back
"""

from __future__ import annotations

import math
import random

import pytest

from airflow_region_failover.graph import JobGraph, JobGraphBuilder
from airflow_region_failover.graph.auto import Choice, ExchangePlan
from airflow_region_failover.planning.estimates import estimate
from airflow_region_failover.planning.history import History, ResultBytes, RunRecord, StepTimes
from airflow_region_failover.planning.model import expected_time, plan_cost, time_variance


def _simulate(work: float, failures: float, restart: float, rng: random.Random) -> float:
    """One completion time: attempts of ``work`` wall seconds, failures at wall rate failures/work."""
    rate, total = failures / work, 0.0
    while True:
        at = rng.expovariate(rate)
        if at >= work:
            return total + work
        total += at + restart


@pytest.mark.parametrize(("work", "failures", "restart"), [(100.0, 0.5, 0.0), (100.0, 1.5, 10.0), (30.0, 0.1, 5.0)])
def test_mean_and_variance_match_a_simulation(work: float, failures: float, restart: float) -> None:
    rng = random.Random(47)
    samples = [_simulate(work, failures, restart, rng) for _ in range(40_000)]
    mean = sum(samples) / len(samples)
    variance = sum((s - mean) ** 2 for s in samples) / (len(samples) - 1)
    assert mean == pytest.approx(expected_time(work, failures, restart), rel=0.02)
    assert variance == pytest.approx(time_variance(work, failures, restart), rel=0.06)


def test_no_failures_cost_the_work_alone_and_the_limit_is_continuous() -> None:
    assert expected_time(100.0, 0.0) == 100.0 and time_variance(100.0, 0.0) == 0.0
    assert expected_time(100.0, 1e-7, 10.0) == pytest.approx(expected_time(100.0, 2e-6, 10.0), rel=1e-5)
    assert time_variance(100.0, 9e-7, 10.0) == pytest.approx(time_variance(100.0, 1.1e-6, 10.0), rel=0.2)


def test_at_one_rate_it_is_the_textbook_formula() -> None:
    rate, work = 1 / 400, 100.0  # (e^{λW} − 1)/λ for a region whose exposure is its wall time
    assert expected_time(work, rate * work) == pytest.approx(math.expm1(rate * work) / rate)


def _graph() -> JobGraph:
    return JobGraphBuilder().step("a").step("b").edge("a", "b", exchange="AUTO").build()


def _history() -> History:
    run = RunRecord("r1", (StepTimes("a", (100.0,)), StepTimes("b", (50.0,))),
                    (ResultBytes("a->b", 250_000_000, write_seconds=10.0, read_seconds=5.0),), {}, 165.0)
    return History((run,))


def test_a_blocking_cut_pays_its_persist_and_read_back_on_every_run() -> None:
    figures = estimate(_graph(), _history())
    never = {"a": 0.0, "b": 0.0}
    blocking = plan_cost(_graph(), ExchangePlan(), figures, never)
    fused = plan_cost(_graph(), ExchangePlan({"a->b": Choice.FUSED}), figures, never)
    assert [(r.steps, r.work) for r in blocking.regions] == [(("a",), 110.0), (("b",), 55.0)]
    assert blocking.expected == 165.0 and blocking.critical_path == ("r0", "r1") and blocking.spread == 0.0
    assert [(r.steps, r.work) for r in fused.regions] == [(("a", "b"), 150.0)] and fused.expected == 150.0


def test_the_cut_restarts_only_the_region_a_failure_hits() -> None:
    figures = estimate(_graph(), _history())
    late = {"a": 0.0, "b": 1 / 50}  # b fails once per attempt on average
    blocking = plan_cost(_graph(), ExchangePlan(), figures, late, restart_seconds=0.0)
    fused = plan_cost(_graph(), ExchangePlan({"a->b": Choice.FUSED}), figures, late, restart_seconds=0.0)
    assert blocking.expected == pytest.approx(110.0 + expected_time(55.0, 55.0 / 50))
    assert fused.expected == pytest.approx(expected_time(150.0, 1.0))
    assert blocking.expected < fused.expected
    assert blocking.spread == pytest.approx(math.sqrt(time_variance(55.0, 55.0 / 50)))


def test_skew_sets_the_wall_time_and_every_subtask_the_exposure() -> None:
    graph = JobGraphBuilder().step("a", parallelism=2).step("b").edge("a", "b", exchange="AUTO").build()
    run = RunRecord("r1", (StepTimes("a", (10.0, 90.0)), StepTimes("b", (5.0,))),
                    (ResultBytes("a->b", 0, 0.0, 0.0),), {}, 105.0)
    cost = plan_cost(graph, ExchangePlan({"a->b": Choice.FUSED}), estimate(graph, History((run,))),
                     {"a": 0.001, "b": 0.001})
    (region,) = cost.regions
    assert (region.work, region.task_seconds) == (95.0, 105.0)


def test_side_by_side_regions_count_once_on_the_longest_path() -> None:
    """(a#0) -AUTO-> (c#0) <-AUTO- (b#0): a and b run side by side, so the plan takes max(a, b) + c."""
    graph = (JobGraphBuilder().step("a").step("b").step("c").edge("a", "c", exchange="AUTO")
             .edge("b", "c", exchange="AUTO").build())
    run = RunRecord("r1", (StepTimes("a", (30.0,)), StepTimes("b", (70.0,)), StepTimes("c", (10.0,))),
                    (ResultBytes("a->c", 0, 0.0, 0.0), ResultBytes("b->c", 0, 0.0, 0.0)), {}, 110.0)
    cost = plan_cost(graph, ExchangePlan(), estimate(graph, History((run,))), {"a": 0.0, "b": 0.0, "c": 0.0})
    assert cost.expected == 80.0 and cost.critical_path == ("r1", "r2")
    fused = plan_cost(graph, ExchangePlan({"a->c": Choice.FUSED, "b->c": Choice.FUSED}),
                      estimate(graph, History((run,))), {"a": 0.0, "b": 0.0, "c": 0.0})
    assert [r.work for r in fused.regions] == [80.0]


def test_one_task_runs_its_regions_one_after_another() -> None:
    """The same (a#0) -AUTO-> (c#0) <-AUTO- (b#0), every subtask run by one task (a PER_RUN job's static fused
    task): side by side no more — every plan takes a + b + c, the BLOCKING one its writes and reads on top."""
    graph = (JobGraphBuilder().step("a").step("b").step("c").edge("a", "c", exchange="AUTO")
             .edge("b", "c", exchange="AUTO").build())
    run = RunRecord("r1", (StepTimes("a", (30.0,)), StepTimes("b", (70.0,)), StepTimes("c", (10.0,))),
                    (ResultBytes("a->c", 0, 2.0, 1.0), ResultBytes("b->c", 0, 4.0, 2.0)), {}, 110.0)
    figures, never = estimate(graph, History((run,))), {"a": 0.0, "b": 0.0, "c": 0.0}
    task = (frozenset({"a#0", "b#0", "c#0"}),)
    blocking = plan_cost(graph, ExchangePlan(), figures, never, serial=task)
    fused = plan_cost(graph, ExchangePlan({"a->c": Choice.FUSED, "b->c": Choice.FUSED}), figures, never, serial=task)
    assert fused.expected == 110.0 and [r.work for r in fused.regions] == [110.0]
    assert blocking.expected == 119.0 and blocking.critical_path == ("r0", "r1", "r2")
    assert plan_cost(graph, ExchangePlan(), figures, never).expected == 87.0  # in tasks of their own: b + c

"""The completion-time formula with epochs: a region whose subtask runs in ``E`` epochs with a checkpoint after
each restarts from its last checkpoint, so its attempts are the epochs, each paying its checkpoint.

    (a#0) ==B==> (b#0)          a: 120 s of work, 12 epochs, C = 2 s per epoch; b: 30 s, whole
    (c#0) -chained-> (d#0)      one chain subtask (one region): c 40 s + d 20 s, 6 epochs of the chain
"""

from __future__ import annotations

import math
import random

import pytest

from airflow_region_failover.graph import JobGraph, JobGraphBuilder
from airflow_region_failover.graph.auto import ExchangePlan
from airflow_region_failover.planning.estimates import estimate
from airflow_region_failover.planning.history import History, ResultBytes, RunRecord, StepTimes
from airflow_region_failover.planning.model import Segments, expected_time, plan_cost, time_variance

RESTART = 5.0


def _graph() -> JobGraph:
    return (JobGraphBuilder().step("a").step("b").step("c").step("d").edge("a", "b", exchange="BLOCKING")
            .edge("c", "d", exchange="PIPELINED", distribution="POINTWISE").build())


def _estimates(graph: JobGraph):  # type: ignore[no-untyped-def]
    run = RunRecord("r1", (StepTimes("a", (120.0,)), StepTimes("b", (30.0,)), StepTimes("c", (40.0,)),
                           StepTimes("d", (20.0,))), (ResultBytes("a->b", 1000, write_seconds=0.0, read_seconds=0.0),),
                    {}, 150.0)
    return estimate(graph, History((run,)))


def _simulate(epochs: int, seconds: float, rate: float, restart: float, rng: random.Random) -> float:
    """Epochs of ``seconds`` wall each (work + checkpoint), a failure losing the epoch so far plus ``restart``."""
    total = 0.0
    for _ in range(epochs):
        while (at := rng.expovariate(rate)) < seconds:
            total += at + restart
        total += seconds
    return total


def test_a_region_in_epochs_restarts_from_its_last_checkpoint() -> None:
    graph = _graph()
    rate = 1 / 60  # a failure every minute of a's task time: 2 per whole attempt of a
    rates = {"a": rate, "b": 0.0, "c": 0.0, "d": 0.0}
    whole = plan_cost(graph, ExchangePlan(), _estimates(graph), rates, RESTART)
    sliced = plan_cost(graph, ExchangePlan(), _estimates(graph), rates, RESTART,
                       segments={"a": Segments(12, 2.0, ("a",))})
    a_whole = next(r for r in whole.regions if r.steps == ("a",))
    a_sliced = next(r for r in sliced.regions if r.steps == ("a",))
    assert a_whole.expected == pytest.approx(expected_time(120.0, 2.0, RESTART))
    epoch = 120.0 / 12 + 2.0  # an epoch's work and its checkpoint
    assert a_sliced.expected == pytest.approx(12 * expected_time(epoch, rate * epoch, RESTART))
    assert a_sliced.variance == pytest.approx(12 * time_variance(epoch, rate * epoch, RESTART))
    assert a_sliced.expected < a_whole.expected / 2
    assert sliced.expected == pytest.approx(a_sliced.expected + 30.0)  # then b, which no failure meets


def test_the_epochs_formula_matches_a_simulation() -> None:
    graph, rng = _graph(), random.Random(47)
    rate = 1 / 30
    cost = plan_cost(graph, ExchangePlan(), _estimates(graph), {"a": rate, "b": 0.0, "c": 0.0, "d": 0.0}, RESTART,
                     segments={"a": Segments(8, 1.0, ("a",))})
    region = next(r for r in cost.regions if r.steps == ("a",))
    samples = [_simulate(8, 120.0 / 8 + 1.0, rate, RESTART, rng) for _ in range(20_000)]
    mean = sum(samples) / len(samples)
    spread = math.sqrt(sum((s - mean) ** 2 for s in samples) / (len(samples) - 1))
    assert mean == pytest.approx(region.expected, rel=0.02)
    assert spread == pytest.approx(math.sqrt(region.variance), rel=0.06)


def test_a_chain_in_epochs_is_one_region_in_epochs_and_one_epoch_is_the_chain_whole() -> None:
    graph = _graph()
    rates = {"a": 0.0, "b": 0.0, "c": 1 / 40, "d": 1 / 40}
    chain = dict.fromkeys(("c", "d"), Segments(6, 1.5, ("c", "d")))
    region = next(r for r in plan_cost(graph, ExchangePlan(), _estimates(graph), rates, RESTART,
                                       segments=chain).regions if r.steps == ("c", "d"))
    epoch = 60.0 / 6 + 1.5
    assert region.expected == pytest.approx(6 * expected_time(epoch, epoch / 40, RESTART))
    whole = next(r for r in plan_cost(graph, ExchangePlan(), _estimates(graph), rates, RESTART,
                                      segments=dict.fromkeys(("c", "d"), Segments(1, 1.5, ("c", "d")))).regions
                 if r.steps == ("c", "d"))
    assert whole.expected == pytest.approx(expected_time(60.0, 60.0 / 40, RESTART))  # no checkpoint paid


def test_a_region_that_is_not_one_subtask_of_the_chain_runs_whole() -> None:
    #   the c -> d region holds d too: epochs of c alone (a chain of one) do not cut it
    graph = _graph()
    rates = {"a": 0.0, "b": 0.0, "c": 1 / 40, "d": 1 / 40}
    region = next(r for r in plan_cost(graph, ExchangePlan(), _estimates(graph), rates, RESTART,
                                       segments={"c": Segments(6, 1.5, ("c",))}).regions if r.steps == ("c", "d"))
    assert region.expected == pytest.approx(expected_time(60.0, 60.0 / 40, RESTART))
    with pytest.raises(ValueError, match="at least one epoch"):
        Segments(0, 1.0, ("c",))

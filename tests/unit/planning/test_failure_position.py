"""Where failures come in their tries decides what each loses: a steady failure clock and a late failure, each
predicted from the history it leaves (planning/rate.py's exposure over all tries, model.py's lost share).

    (gen#0) --AUTO--> (join#0)        gen: 60 s, join: 150 s; the join fails
"""

from __future__ import annotations

import random
import statistics

import pytest

from airflow_region_failover.graph import JobGraph, JobGraphBuilder
from airflow_region_failover.graph.auto import Choice, ExchangePlan
from airflow_region_failover.planning.choice import declared_cost
from airflow_region_failover.planning.estimates import estimate
from airflow_region_failover.planning.history import FailedTry, History, ResultBytes, RunRecord, StepTimes
from airflow_region_failover.planning.model import (
    expected_time,
    failed_attempts,
    memoryless_share,
    plan_cost,
    time_variance,
)
from airflow_region_failover.planning.policy import PlannerPolicy
from airflow_region_failover.planning.rate import lost_fractions, step_rates

GEN, JOIN, RESTART = 60.0, 150.0, 10.0


def _graph(exchange: str = "AUTO") -> JobGraph:
    return JobGraphBuilder().step("gen").step("join").edge("gen", "join", exchange=exchange).build()


def _run(number: int, failed: list[float], fraction_of: float | None = JOIN) -> RunRecord:
    """A run whose join failed ``failed`` tries (their seconds) before it succeeded in JOIN seconds."""
    tries = tuple(FailedTry(s, None if fraction_of is None else min(1.0, s / fraction_of)) for s in failed)
    return RunRecord(f"r{number}", (StepTimes("gen", (GEN,)), StepTimes("join", (JOIN,))),
                     (ResultBytes("gen->join", 0, 0.0, 0.0),), {"join": len(failed)} if failed else {},
                     GEN + JOIN + sum(failed), failed_tries={"join": tries} if failed else {})


def _completion(rate: float, rng: random.Random) -> tuple[float, list[float]]:
    """One join under a Poisson failure clock at ``rate`` per second: its completion time and its failed tries."""
    total, failed = 0.0, []
    while True:
        at = rng.expovariate(rate)
        if at >= JOIN:
            return total + JOIN, failed
        failed.append(at)
        total += at + RESTART


def test_the_exponentials_share_gives_back_the_memoryless_formula() -> None:
    for m in (1e-7, 0.05, 1.0, 3.0):
        assert expected_time(JOIN, m, RESTART, memoryless_share(m)) == pytest.approx(
            expected_time(JOIN, m, RESTART), rel=1e-6)


@pytest.mark.parametrize(("fails", "share"), [(0.5, 1.0), (0.3, 0.25), (0.8, 0.9)])
def test_a_fixed_loss_matches_a_simulation(fails: float, share: float) -> None:
    """Attempts fail with probability ``fails`` at ``share`` of their work; the rate per exposure second that
    leaves is ``fails / (fails·share·W + (1 − fails)·W)`` (the renewal identity, model.py)."""
    rng, samples = random.Random(47), []
    for _ in range(40_000):
        total = 0.0
        while rng.random() < fails:
            total += share * JOIN + RESTART
        samples.append(total + JOIN)
    m = fails / (fails * share + 1 - fails)
    assert failed_attempts(m, share) == pytest.approx(fails / (1 - fails))
    assert statistics.fmean(samples) == pytest.approx(expected_time(JOIN, m, RESTART, share), rel=0.02)
    assert statistics.variance(samples) == pytest.approx(time_variance(JOIN, m, RESTART, share), rel=0.06)


def test_a_steady_failure_clock_is_predicted_from_the_history_it_left() -> None:
    """400 runs under a clock of one failure per 100 s of the join's work (m = 1.5 per attempt): the next run's
    expected time from those runs' records is what they took, within 5 %, and the clock's own, within 10 % —
    counting only the successful tries' seconds as exposure would put the rate at e^1.5 − 1 failures per 150 s,
    2.3× too high, and the time at 4.4× (the chaos cells missed so, by less, 2026-12-04)."""
    rng = random.Random(7)
    runs, times = [], []
    for number in range(400):
        took, failed = _completion(1 / 100, rng)
        runs.append(_run(number, failed))
        times.append(took)
    cost = declared_cost(_graph("BLOCKING"), History(tuple(runs)), PlannerPolicy(window=400, restart_seconds=RESTART))
    join = next(r for r in cost.regions if r.steps == ("join",))
    assert join.expected == pytest.approx(statistics.fmean(times), rel=0.05)
    assert join.expected == pytest.approx(expected_time(JOIN, 1.5, RESTART), rel=0.10)
    rates = step_rates(["join"], History(tuple(runs)))["join"]
    assert rates.per_task_second * JOIN == pytest.approx(1.5, rel=0.2)
    assert lost_fractions({"join": rates})["join"] == pytest.approx(memoryless_share(1.5) * 1.0, rel=0.25)


def test_a_late_failure_loses_a_whole_attempt() -> None:
    """The join fails at the end of its first try in every run: the next run takes it twice, and a restart."""
    history = History(tuple(_run(n, [JOIN]) for n in range(4)))
    cost = declared_cost(_graph("BLOCKING"), history, PlannerPolicy(restart_seconds=RESTART))
    join = next(r for r in cost.regions if r.steps == ("join",))
    assert join.expected == pytest.approx(2 * JOIN + RESTART, rel=0.01)


def test_a_failure_late_in_a_fused_region_loses_the_steps_before_it_too() -> None:
    """gen and join fused: the join's failure at the end of its work loses gen's 60 s as well."""
    history = History(tuple(_run(n, [JOIN]) for n in range(4)))
    rates = step_rates(["gen", "join"], history)
    per_second = {s: r.per_task_second for s, r in rates.items()}
    fused = plan_cost(_graph(), ExchangePlan({"gen->join": Choice.FUSED}), estimate(_graph(), history), per_second,
                      RESTART, lost=lost_fractions(rates))
    (region,) = fused.regions
    whole = GEN + JOIN
    share = (per_second["gen"] * GEN * memoryless_share(region.failures) + per_second["join"] * JOIN) / \
        region.failures
    assert region.expected == pytest.approx(expected_time(whole, region.failures, RESTART, share))
    assert share > 0.95 and region.expected == pytest.approx(whole + (whole + RESTART), rel=0.03)


def test_tries_run_in_epochs_leave_the_loss_to_the_exponential() -> None:
    """A join run in epochs records its failed tries' seconds (exposure) but no share: a failure there loses what
    followed its last checkpoint, which its try's time does not say."""
    history = History(tuple(_run(n, [40.0, 70.0], fraction_of=None) for n in range(4)))
    rates = step_rates(["join"], history)
    assert lost_fractions(rates) == {}
    assert rates["join"].task_hours == pytest.approx(4 * (JOIN + 110.0) / 3600)


def test_failed_tries_round_trip_and_a_bad_fraction_names_its_place() -> None:
    run = _run(1, [30.0, JOIN])
    assert RunRecord.from_json(run.to_json(), "x") == run
    assert "failed_tries" not in _run(2, []).to_json()
    body = run.to_json()
    body["failed_tries"]["join"][0]["fraction"] = 1.5
    from airflow_region_failover.planning.history import HistoryError

    with pytest.raises(HistoryError, match=r"run 'r1' failed_tries\['join'\]\[0\]: 'fraction' 1.5 must be"):
        RunRecord.from_json(body, "x")

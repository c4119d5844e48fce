"""The planner's choices on synthetic histories of the example ETL's shape.

    (gen_orders#0,1)   --AUTO keyed, 0.25 GB--+
                                               +--> (join#0,1) --AUTO keyed, 66 MB--> (report#0)
    (gen_lineitem#0,1) --AUTO keyed, 0.25 GB--+

The generators are cheap to recompute (20 s) and dear to persist (20 s to write, 12 s to read back per subtask);
the join is dear to recompute (150 s) and its output cheap to persist (1.3 s, 0.8 s).
"""

from __future__ import annotations

import itertools

import pytest

from airflow_region_failover.graph import JobGraph, JobGraphBuilder
from airflow_region_failover.graph.auto import Choice, ExchangePlan
from airflow_region_failover.planning.choice import decide
from airflow_region_failover.planning.history import History, HistoryError, ResultBytes, RunRecord, StepTimes
from airflow_region_failover.planning.policy import PlannerPolicy

ORDERS, LINEITEM, JOINED = "gen_orders->join", "gen_lineitem->join", "join->report"
FUSE_GENERATORS = ExchangePlan({ORDERS: Choice.FUSED, LINEITEM: Choice.FUSED, JOINED: Choice.BLOCKING})
BLOCKING = ExchangePlan()
ALL_FUSED = ExchangePlan({ORDERS: Choice.FUSED, LINEITEM: Choice.FUSED, JOINED: Choice.FUSED})


def _etl() -> JobGraph:
    return (JobGraphBuilder().step("gen_orders", parallelism=2).step("gen_lineitem", parallelism=2)
            .step("join", parallelism=2).step("report")
            .edge("gen_orders", "join", exchange="AUTO", partition_by=["k"])
            .edge("gen_lineitem", "join", exchange="AUTO", partition_by=["k"])
            .edge("join", "report", exchange="AUTO", distribution="BROADCAST").build())


def _run(run_id: str, failures: dict[str, int] | None = None, plan: ExchangePlan = BLOCKING,
         join: tuple[float, float] = (150.0, 150.0)) -> RunRecord:
    persisted = [ResultBytes(JOINED, 66_000_000, 2.6, 0.8)]
    if plan.choice(ORDERS) is Choice.BLOCKING:
        persisted += [ResultBytes(ORDERS, 250_000_000, 40.0, 24.0), ResultBytes(LINEITEM, 250_000_000, 40.0, 24.0)]
    steps = (StepTimes("gen_orders", (20.0, 20.0)), StepTimes("gen_lineitem", (20.0, 20.0)),
             StepTimes("join", join), StepTimes("report", (10.0,)))
    return RunRecord(run_id, steps, tuple(persisted), failures or {}, 500.0, plan)


def _history(count: int, failures: dict[str, int] | None = None, plan: ExchangePlan = BLOCKING) -> History:
    return History(tuple(_run(f"run{i}", failures, plan) for i in range(count)))


def test_no_history_keeps_every_auto_result_blocking() -> None:
    decision = decide(_etl(), History())
    assert decision.plan == ExchangePlan() and "fewer than the 3" in decision.reason
    assert decision.chosen is None


def test_too_little_history_keeps_the_previous_plan() -> None:
    assert decide(_etl(), _history(2)).plan == ExchangePlan()


def test_no_failures_fuse_everything() -> None:
    decision = decide(_etl(), _history(5))
    assert decision.plan == ALL_FUSED and decision.reason.startswith("switches")
    assert decision.all_fused is not None and decision.all_blocking is not None
    assert decision.chosen is not None and decision.chosen.expected == pytest.approx(decision.all_fused.expected)
    assert decision.all_fused.expected < decision.all_blocking.expected * 0.85


def test_frequent_late_failures_persist_the_join_and_fuse_the_generators() -> None:
    decision = decide(_etl(), _history(5, {"report": 1}))
    assert decision.plan == FUSE_GENERATORS
    assert decision.all_fused is not None and decision.all_blocking is not None and decision.chosen is not None
    assert decision.chosen.expected < 0.9 * min(decision.all_fused.expected, decision.all_blocking.expected)
    joined = next(e for e in decision.edges if e.result == JOINED)
    assert joined.persist is not None and joined.fuse is not None and joined.persist < joined.fuse


def test_failures_in_the_join_keep_its_keyed_inputs_persisted() -> None:
    """Fusing a keyed (all-to-all) exchange makes one region of every generator and join subtask: a join failure
    would restart all of them, where persisted inputs restart one join subtask."""
    decision = decide(_etl(), _history(5, {"join": 1}))
    assert decision.plan.choice(ORDERS) is Choice.BLOCKING and decision.plan.choice(LINEITEM) is Choice.BLOCKING
    assert decision.chosen is not None and decision.all_fused is not None
    assert [len(r.steps) for r in decision.all_fused.regions] == [4]
    assert decision.chosen.expected < decision.all_fused.expected


def test_a_skewed_join_is_costed_by_its_slowest_subtask() -> None:
    history = History(tuple(_run(f"run{i}", {"report": 1}, join=(30.0, 270.0)) for i in range(5)))
    decision = decide(_etl(), history)
    assert decision.chosen is not None
    join_region = next(r for r in decision.chosen.regions if "join" in r.steps)
    assert join_region.work >= 270.0 + 20.0


def test_a_pinned_result_stays_blocking() -> None:
    decision = decide(_etl(), _history(5), pinned={ORDERS: "consumer is checkpointed"})
    assert decision.plan.choice(ORDERS) is Choice.BLOCKING
    assert decision.all_fused is not None and decision.all_fused.plan.choice(ORDERS) is Choice.BLOCKING
    advice = next(e for e in decision.edges if e.result == ORDERS)
    assert advice.pinned == "consumer is checkpointed" and advice.fuse is None


def test_a_result_no_run_persisted_stays_blocking_until_measured() -> None:
    fused_runs = _history(5, plan=ALL_FUSED)
    decision = decide(_etl(), fused_runs)
    assert decision.plan == ExchangePlan({JOINED: Choice.FUSED})
    assert {e.result: e.pinned for e in decision.edges}[ORDERS] == "no run of the history persisted it yet"


def test_a_small_gain_keeps_the_previous_plan() -> None:
    generous = PlannerPolicy(margin=0.5)
    decision = decide(_etl(), _history(5), generous)
    assert decision.plan == ExchangePlan() and "within the 50% margin" in decision.reason


def _switches(policy: PlannerPolicy) -> int:
    """Run by run, each run getting the plan chosen before it, clean and late-failing runs alternating: how
    often the plan changes."""
    runs: list[RunRecord] = []
    plans = []
    for i in range(16):
        plan = decide(_etl(), History(tuple(runs)), policy).plan
        plans.append(plan)
        runs.append(_run(f"run{i}", {"report": 1} if i % 2 else {}, plan))
    return sum(1 for before, after in itertools.pairwise(plans) if before != after)


def test_alternating_histories_do_not_flap() -> None:
    assert _switches(PlannerPolicy()) <= 1


def test_without_margin_and_with_a_short_window_the_plan_flaps() -> None:
    """What the margin and the window guard against (so the test above can fail)."""
    assert _switches(PlannerPolicy(margin=0.0, window=3)) > 3


def test_a_plan_of_a_result_no_longer_auto_is_dropped() -> None:
    stale = _history(1, plan=ExchangePlan({"gone->edge": Choice.FUSED}))
    assert decide(_etl(), stale).plan == ExchangePlan()


def test_history_json_round_trips_and_errors_name_the_run() -> None:
    history = _history(2, {"report": 1})
    assert History.from_json(history.to_json()) == history
    bad = history.to_json()
    bad["runs"][1]["failures"] = {"report": -1}
    with pytest.raises(HistoryError, match=r"run 'run1': 'failures' .* must map step ids to failed task tries"):
        History.from_json(bad)
    with pytest.raises(HistoryError, match=r"step 'gen_orders': no run of the history measured it"):
        decide(_etl(), History(tuple(RunRecord(f"r{i}", (), (), {}, 1.0) for i in range(3))))


def test_a_plan_that_ran_is_costed_from_its_own_runs_compute() -> None:
    """Three BLOCKING runs measured the join at 150 s; two all-fused runs measured it at 100 s (what fusing saved
    inside the join's job: no Parquet to decode). Each plan is costed from its own runs; the base figures
    (``advise``'s) are the median of all five."""
    runs = [_run(f"b{i}") for i in range(3)] + [_run(f"f{i}", plan=ALL_FUSED, join=(100.0, 100.0)) for i in range(2)]
    decision = decide(_etl(), History(tuple(runs)))
    assert decision.all_fused is not None and decision.all_blocking is not None
    fused_join = next(r for r in decision.all_fused.regions if "join" in r.steps)
    assert fused_join.work == pytest.approx(20 + 100 + 10)  # gen, join, report of one fused region: its own runs
    assert decision.estimates is not None and decision.estimates.steps["join"].subtask_seconds == (150.0, 150.0)
    blocking_join = next(r for r in decision.all_blocking.regions if r.steps == ("join",))
    assert blocking_join.work == pytest.approx(150.0 + (24.0 + 24.0) / 2 + 2.6 / 2)  # its own three runs
    mixed = decide(_etl(), History(tuple(runs)), pinned={JOINED: "test"})  # no run ran this plan: all five
    assert mixed.chosen is not None and mixed.chosen.plan == FUSE_GENERATORS

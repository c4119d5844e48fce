"""The epochs a sliced chain's next run takes (planning/epochs.py, ``choose_slices``): Daly's interval over the
chain's work, one epoch's cost and the head's failure rate; one epoch without a measurement or with rare failures.

    gen#0,1 -chained-> clean#0,1 ==B keyed k==> join#0,1     (the chains headed by gen and by join are sliced)
"""

from __future__ import annotations

import math

from airflow_region_failover import JobGraphBuilder
from airflow_region_failover.planning.epochs import DEFAULT_EPOCH_SECONDS, choose_slices, daly_interval
from airflow_region_failover.planning.history import History, ResultBytes, RunRecord, StepTimes
from airflow_region_failover.planning.rate import step_rates
from airflow_region_failover.planning.stored import RunPlan

CHAIN = {"gen": (("gen", "clean"), 64)}
GRAPH = (JobGraphBuilder().step("gen", parallelism=2, rescalable=True).step("clean", parallelism=2, rescalable=True)
         .step("join", parallelism=2, rescalable=True)
         .edge("gen", "clean", exchange="PIPELINED", distribution="POINTWISE")
         .edge("clean", "join", exchange="BLOCKING", partition_by=["k"]).build())


def _runs(gen: float, clean: float, failures: int, checkpoint: float | None = None, count: int = 3) -> History:
    """``count`` runs, each subtask of gen taking ``gen`` s and of clean ``clean`` s, ``failures`` failed tries of the
    chain (counted for its head)."""
    return History(tuple(RunRecord(f"r{i}", (StepTimes("gen", (gen, gen), checkpoint), StepTimes("clean", (clean,
                                                                                                    clean))),
                                   (), {"gen": failures} if failures else {}, 4 * (gen + clean))
                         for i in range(count)))


def test_no_measured_work_runs_the_subtask_whole() -> None:
    chosen = choose_slices(GRAPH, CHAIN, History())
    assert chosen["gen"].epochs == 1 and "no run measured 'gen'" in chosen["gen"].reason
    only_head = History((RunRecord("r0", (StepTimes("gen", (5.0, 5.0)),), (), {}, 10.0),))
    assert choose_slices(GRAPH, CHAIN, only_head)["gen"].epochs == 1  # clean unmeasured: the chain's work is unknown


def test_rare_failures_keep_one_epoch_and_frequent_ones_cut_the_chain_by_dalys_interval() -> None:
    assert choose_slices(GRAPH, CHAIN, _runs(60.0, 40.0, 0))["gen"].epochs == 1
    frequent = _runs(60.0, 40.0, 6)
    chosen = choose_slices(GRAPH, CHAIN, frequent)["gen"]
    rate = step_rates(["gen"], frequent)["gen"].per_task_second
    expected = math.ceil(100.0 / daly_interval(DEFAULT_EPOCH_SECONDS, 1 / rate))  # W: both members' work
    assert chosen.epochs == expected > 1
    assert "C=2s per epoch (2s checkpoint, not measured yet, the default; 0s reading its inputs again)" in chosen.reason


def test_a_measured_epoch_cost_replaces_the_default_and_the_most_epochs_bound_the_cut() -> None:
    costly = choose_slices(GRAPH, CHAIN, _runs(60.0, 40.0, 6, checkpoint=20.0))["gen"]
    cheap = choose_slices(GRAPH, CHAIN, _runs(60.0, 40.0, 6, checkpoint=0.01))["gen"]
    assert costly.epochs < cheap.epochs and "(20s checkpoint, measured;" in costly.reason
    bounded = choose_slices(GRAPH, {"gen": (("gen", "clean"), 3)}, _runs(60.0, 40.0, 6, checkpoint=0.01))
    assert bounded["gen"].epochs == 3


def test_a_run_fixed_without_a_decision_runs_a_sliced_chain_whole() -> None:
    assert RunPlan.of(None, 1.0).slices_of("gen").epochs == 1


def test_an_epoch_costs_its_checkpoint_and_reading_its_subtasks_inputs_again() -> None:
    #   join#i's every epoch reads subtask i's whole subpartition of clean->join and keeps its key groups: one more
    #   epoch reads it once more (measured: 40 s over both join subtasks, 20 s each), so it costs C = 1 + 20 s
    runs = History(tuple(RunRecord(f"r{i}", (StepTimes("join", (120.0, 120.0), 1.0),),
                                   (ResultBytes("clean->join", 10**9, 30.0, 40.0),), {"join": 6}, 400.0)
                         for i in range(3)))
    chosen = choose_slices(GRAPH, {"join": (("join",), 64)}, runs)["join"]
    rate = step_rates(["join"], runs)["join"].per_task_second
    assert chosen.epochs == math.ceil(120.0 / daly_interval(21.0, 1 / rate)) > 1
    assert chosen.epochs < choose_slices(GRAPH, CHAIN | {"join": (("join",), 64)}, History(tuple(
        RunRecord(r.run_id, r.steps, (), r.failures, r.task_seconds) for r in runs.runs)))["join"].epochs
    assert "C=21s per epoch (1s checkpoint, measured; 20s reading its inputs again)" in chosen.reason

"""The epochs a sliced chain's next run takes (planning/epochs.py, ``choose_slices``): Daly's interval over the
chain's work, one epoch's cost and the head's failure rate; one epoch without a measurement or with rare failures.

    gen#0,1 -chained-> clean#0,1 ==B keyed==> ...          (the chain headed by gen is sliced)
"""

from __future__ import annotations

import math

from airflow_region_failover.planning.epochs import DEFAULT_EPOCH_SECONDS, choose_slices, daly_interval
from airflow_region_failover.planning.history import History, RunRecord, StepTimes
from airflow_region_failover.planning.rate import step_rates
from airflow_region_failover.planning.stored import RunPlan

CHAIN = {"gen": (("gen", "clean"), 64)}


def _runs(gen: float, clean: float, failures: int, checkpoint: float | None = None, count: int = 3) -> History:
    """``count`` runs, each subtask of gen taking ``gen`` s and of clean ``clean`` s, ``failures`` failed tries of the
    chain (counted for its head)."""
    return History(tuple(RunRecord(f"r{i}", (StepTimes("gen", (gen, gen), checkpoint), StepTimes("clean", (clean,
                                                                                                    clean))),
                                   (), {"gen": failures} if failures else {}, 4 * (gen + clean))
                         for i in range(count)))


def test_no_measured_work_runs_the_subtask_whole() -> None:
    chosen = choose_slices(CHAIN, History())
    assert chosen["gen"].epochs == 1 and "no run measured 'gen'" in chosen["gen"].reason
    only_head = History((RunRecord("r0", (StepTimes("gen", (5.0, 5.0)),), (), {}, 10.0),))
    assert choose_slices(CHAIN, only_head)["gen"].epochs == 1  # clean unmeasured: the chain's work is unknown


def test_rare_failures_keep_one_epoch_and_frequent_ones_cut_the_chain_by_dalys_interval() -> None:
    assert choose_slices(CHAIN, _runs(60.0, 40.0, 0))["gen"].epochs == 1
    frequent = _runs(60.0, 40.0, 6)
    chosen = choose_slices(CHAIN, frequent)["gen"]
    rate = step_rates(["gen"], frequent)["gen"].per_task_second
    expected = math.ceil(100.0 / daly_interval(DEFAULT_EPOCH_SECONDS, 1 / rate))  # W: both members' work
    assert chosen.epochs == expected > 1
    assert "C=2s per epoch (not measured yet, the default)" in chosen.reason


def test_a_measured_epoch_cost_replaces_the_default_and_the_most_epochs_bound_the_cut() -> None:
    costly = choose_slices(CHAIN, _runs(60.0, 40.0, 6, checkpoint=20.0))["gen"]
    cheap = choose_slices(CHAIN, _runs(60.0, 40.0, 6, checkpoint=0.01))["gen"]
    assert costly.epochs < cheap.epochs and "(measured)" in costly.reason
    assert choose_slices({"gen": (("gen", "clean"), 3)}, _runs(60.0, 40.0, 6, checkpoint=0.01))["gen"].epochs == 3


def test_a_run_fixed_without_a_decision_runs_a_sliced_chain_whole() -> None:
    assert RunPlan.of(None, 1.0).slices_of("gen").epochs == 1

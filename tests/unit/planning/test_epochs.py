"""Young's and Daly's optimal checkpoint interval, and the epochs a checkpointed step takes from it."""

from __future__ import annotations

import math

import pytest

from airflow_region_failover.planning.epochs import daly_interval, epochs_for, young_interval


def test_young_is_the_square_root_of_twice_cost_times_mtbf() -> None:
    assert young_interval(10.0, 3600.0) == pytest.approx(math.sqrt(2 * 10 * 3600))


def test_daly_refines_young_for_small_checkpoint_costs_and_caps_at_the_mtbf() -> None:
    young, daly = young_interval(1.0, 1e6), daly_interval(1.0, 1e6)
    assert daly == pytest.approx(young, rel=1e-3) and daly != young
    assert daly_interval(500.0, 200.0) == 200.0


def test_epochs_follow_the_failure_rate() -> None:
    work, checkpoint = 600.0, 5.0
    assert epochs_for(work, checkpoint, 0.0) == 1  # no failures: one epoch, no checkpoint paid
    rare = epochs_for(work, checkpoint, 1 / 360_000)  # one failure in 100 task-hours
    frequent = epochs_for(work, checkpoint, 1 / 60)  # one a minute
    assert rare == math.ceil(work / daly_interval(checkpoint, 360_000)) == 1
    assert frequent == math.ceil(work / daly_interval(checkpoint, 60)) and frequent > 10
    assert epochs_for(work, 0.0, 1 / 60, max_epochs=50) == 50
    assert epochs_for(work, 1e-9, 1.0, max_epochs=50) == 50

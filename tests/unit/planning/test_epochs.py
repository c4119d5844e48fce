"""Young's and Daly's optimal checkpoint interval, the epochs a checkpointed step takes from it, and the epochs an
``epochs="AUTO"`` step's next run takes from its history (a step ``s`` of two subtasks)."""

from __future__ import annotations

import math

import pytest

from airflow_region_failover.graph.errors import GraphError
from airflow_region_failover.planning.epochs import (
    NO_HISTORY_EPOCHS,
    EpochsChoice,
    choose_all,
    choose_epochs,
    daly_interval,
    epochs_for,
    young_interval,
)
from airflow_region_failover.planning.history import History, HistoryError, RunRecord, StepTimes
from airflow_region_failover.planning.rate import step_rates


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


def _runs(work: float, checkpoint: float | None, failures: int, count: int = 3) -> History:
    """``count`` runs of step ``s`` (2 subtasks of ``work`` s), each with ``failures`` failed tries of ``s``."""
    return History(tuple(RunRecord(f"r{i}", (StepTimes("s", (work, work), checkpoint),), (),
                                   {"s": failures} if failures else {}, 2 * work) for i in range(count)))


def test_without_history_an_auto_step_takes_the_declared_default_of_ten_epochs() -> None:
    assert choose_epochs("s", History()) == EpochsChoice(NO_HISTORY_EPOCHS, "no run measured 's''s work and "
                                                                             "checkpoint cost yet: the default 10 "
                                                                             "epochs")
    assert NO_HISTORY_EPOCHS == 10 and choose_epochs("s", History(), max_epochs=4).epochs == 4
    # work measured but no checkpoint ever timed (older records): still no history of C
    assert choose_epochs("s", _runs(600.0, None, 0)).epochs == 10


def test_rare_failures_choose_one_epoch_frequent_ones_more() -> None:
    """Daly: τ = √(2·C·M)·(1 + ⅓·√(C/(2M)) + ⅑·(C/(2M))) − C, epochs ⌈W/τ⌉; W = 600 s, C = 5 s."""
    rare = choose_epochs("s", _runs(600.0, 5.0, 0))
    assert rare.epochs == 1 and "Daly's interval" in rare.reason
    frequent = choose_epochs("s", _runs(600.0, 5.0, 2))
    rate = step_rates(["s"], _runs(600.0, 5.0, 2))["s"].per_task_second
    m, c = 1 / rate, 5.0
    tau = math.sqrt(2 * c * m) * (1 + math.sqrt(c / (2 * m)) / 3 + c / (2 * m) / 9) - c
    assert frequent.epochs == math.ceil(600.0 / tau) and frequent.epochs > 5
    assert choose_epochs("s", _runs(600.0, 5.0, 2), max_epochs=3).epochs == 3
    costly = choose_epochs("s", _runs(600.0, 60.0, 2))  # dearer checkpoints: fewer of them
    assert 1 <= costly.epochs < frequent.epochs


def test_the_choice_and_its_json() -> None:
    chosen = EpochsChoice(3, "why")
    assert chosen.to_json() == {"epochs": 3, "reason": "why"}
    assert EpochsChoice.from_json(chosen.to_json(), "x") == chosen
    for bad in ({"epochs": 0, "reason": ""}, {"epochs": True, "reason": ""}, {"epochs": 2}, [2]):
        with pytest.raises(GraphError, match="x: "):
            EpochsChoice.from_json(bad, "x")
    assert choose_all({"b": 5, "a": 12}, History()) == {"a": choose_epochs("a", History(), 12),
                                                         "b": choose_epochs("b", History(), 5)}
    assert [c.epochs for c in choose_all({"b": 5, "a": 12}, History()).values()] == [10, 5]


def test_a_history_record_keeps_the_checkpoint_seconds_and_reads_records_without_them() -> None:
    times = StepTimes("s", (1.0, 2.0), 0.5)
    assert times.to_json() == {"step": "s", "subtask_seconds": [1.0, 2.0], "checkpoint_seconds": 0.5}
    record = RunRecord("r1", (times, StepTimes("t", (3.0,))), (), {}, 6.0)
    parsed = History.from_json(History((record,)).to_json())
    assert parsed.runs[0] == record and parsed.runs[0].step("t").checkpoint_seconds is None  # type: ignore[union-attr]
    with pytest.raises(HistoryError, match="'checkpoint_seconds'"):
        History.from_json({"runs": [{**record.to_json(), "steps": [{**times.to_json(), "checkpoint_seconds": -1}]}]})

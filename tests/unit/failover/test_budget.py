"""FLIP-1 failure budgets (``maximum-per-task-failures`` / ``maximum-total-task-failures``)."""

from __future__ import annotations

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from airflow_region_failover.failover.backoff import InvalidStateError
from airflow_region_failover.failover.budget import (
    MAX_PER_TASK_FAILURES_KEY,
    MAX_TOTAL_TASK_FAILURES_KEY,
    BudgetConfig,
    FailureBudget,
)
from airflow_region_failover.graph.errors import OptionError


def test_unlimited_by_default() -> None:
    budget = BudgetConfig().create()
    assert BudgetConfig().unlimited
    for _ in range(1_000):
        budget.record("a#0")
    assert budget.exhausted() is None
    assert budget.total_failures == 1_000


def test_per_task_budget_tolerates_n_failures_of_one_task() -> None:
    budget = BudgetConfig(max_per_task_failures=2).create()
    for task in ("a#0", "a#0", "b#1", "b#1"):
        budget.record(task)
        assert budget.exhausted() is None
    budget.record("b#1")
    reason = budget.exhausted()
    assert reason == f"task 'b#1' failed 3 times, more than {MAX_PER_TASK_FAILURES_KEY}=2"


def test_total_budget_counts_all_tasks() -> None:
    budget = BudgetConfig(max_total_task_failures=3).create()
    for task in ("a#0", "b#0", "c#0"):
        budget.record(task)
    assert budget.exhausted() is None
    budget.record("d#0")
    assert budget.exhausted() == f"4 task failures in total exceed {MAX_TOTAL_TASK_FAILURES_KEY}=3"


def test_zero_tolerates_no_failure() -> None:
    budget = BudgetConfig(max_per_task_failures=0).create()
    assert budget.exhausted() is None
    budget.record("a#0")
    assert budget.exhausted() is not None


def test_total_is_reported_before_per_task_and_worst_task_is_named() -> None:
    budget = BudgetConfig(max_per_task_failures=1, max_total_task_failures=4).create()
    for task in ("b#0", "b#0", "a#0", "a#0", "a#0"):
        budget.record(task)
    reason = budget.exhausted()
    assert reason is not None and reason.startswith("5 task failures in total")
    budget = BudgetConfig(max_per_task_failures=1).create()
    for task in ("b#0", "b#0", "a#0", "a#0", "a#0"):
        budget.record(task)
    assert budget.exhausted() == f"task 'a#0' failed 3 times, more than {MAX_PER_TASK_FAILURES_KEY}=1"


def test_failures_without_a_task_count_toward_the_total_only() -> None:
    budget = BudgetConfig(max_per_task_failures=0, max_total_task_failures=1).create()
    budget.record(None)
    assert budget.exhausted() is None
    assert budget.state_dict() == {"per_task": {}, "total": 1}
    budget.record(None)
    assert budget.exhausted() is not None


@given(
    st.integers(min_value=-1, max_value=5),
    st.integers(min_value=-1, max_value=12),
    st.lists(st.sampled_from(["a#0", "a#1", "b#0", None]), max_size=30),
)
def test_matches_counting_by_hand(per_task: int, total: int, failures: list[str | None]) -> None:
    budget = BudgetConfig(per_task, total).create()
    for task in failures:
        budget.record(task)
    counts = {t: failures.count(t) for t in set(failures) if t is not None}
    over_total = total != -1 and len(failures) > total
    over_task = per_task != -1 and any(c > per_task for c in counts.values())
    assert (budget.exhausted() is not None) == (over_total or over_task)
    restored = FailureBudget(budget.config)
    restored.load_state(json.loads(json.dumps(budget.state_dict())))
    assert restored.state_dict() == budget.state_dict()
    assert restored.exhausted() == budget.exhausted()
    restored_counts = restored.state_dict()["per_task"]
    assert isinstance(restored_counts, dict)
    for task, count in counts.items():
        assert restored_counts.get(task, 0) == count


@pytest.mark.parametrize(
    ("kwargs", "key"),
    [
        ({"max_per_task_failures": -2}, MAX_PER_TASK_FAILURES_KEY),
        ({"max_total_task_failures": -3}, MAX_TOTAL_TASK_FAILURES_KEY),
        ({"max_per_task_failures": 1.5}, MAX_PER_TASK_FAILURES_KEY),
        ({"max_total_task_failures": True}, MAX_TOTAL_TASK_FAILURES_KEY),
    ],
)
def test_bad_budget_names_the_key(kwargs: dict[str, object], key: str) -> None:
    with pytest.raises(OptionError) as info:
        BudgetConfig(**kwargs)  # type: ignore[arg-type]
    assert str(info.value).startswith(f"{key}: ")
    assert "-1 for unlimited" in str(info.value)


@pytest.mark.parametrize(
    "state",
    [
        {},
        {"per_task": [], "total": 0},
        {"per_task": {"a#0": -1}, "total": 0},
        {"per_task": {"": 1}, "total": 1},
        {"per_task": {"a#0": 2}, "total": 1},  # total below the sum of per-task counts
        {"per_task": {"a#0": 1}, "total": "1"},
        {"per_task": {"a#0": True}, "total": 1},
    ],
)
def test_bad_state_is_refused(state: dict[str, object]) -> None:
    with pytest.raises(InvalidStateError):
        BudgetConfig().create().load_state(state)


def test_bad_task_id_is_refused() -> None:
    with pytest.raises(ValueError, match="subtask id"):
        BudgetConfig().create().record("")


def test_to_options() -> None:
    assert BudgetConfig(3, -1).to_options() == {MAX_PER_TASK_FAILURES_KEY: "3", MAX_TOTAL_TASK_FAILURES_KEY: "-1"}

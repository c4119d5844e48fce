"""FLIP-1 failure budgets: how many task failures a job may recover from, per task and in total.

FLIP-1 ("Fine Grained Recovery from Task Failures") reinterprets the number of restarts as

* ``restart-strategy.maximum-per-task-failures`` — failures any one subtask (``"<step>#<i>"``) may have, and
* ``restart-strategy.maximum-total-task-failures`` — failures all subtasks together may have.

Rule (the same "at most N" reading as fixed-delay's ``attempts``): a budget of ``N`` tolerates ``N`` failures;
failure ``N + 1`` exhausts it and the job fails instead of restarting.  ``-1`` (the default) is unlimited and
``0`` tolerates no failure.  Every failure counts, including failures an exponential-delay strategy merges into
one restart attempt.  Counts never decrease during a run.  A restart happens only if the restart backoff strategy
allows it *and* :meth:`FailureBudget.exhausted` is ``None``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from airflow_region_failover.failover.backoff.base import InvalidStateError
from airflow_region_failover.graph.errors import OptionError

MAX_PER_TASK_FAILURES_KEY = "restart-strategy.maximum-per-task-failures"
MAX_TOTAL_TASK_FAILURES_KEY = "restart-strategy.maximum-total-task-failures"
UNLIMITED = -1
"""Budget value meaning "no limit" (the default of both budgets)."""


@dataclass(frozen=True)
class BudgetConfig:
    """The two FLIP-1 budgets; ``-1`` is unlimited.  Invalid values raise :class:`OptionError` naming the key."""

    max_per_task_failures: int = UNLIMITED
    max_total_task_failures: int = UNLIMITED

    def __post_init__(self) -> None:
        _check_budget(MAX_PER_TASK_FAILURES_KEY, self.max_per_task_failures)
        _check_budget(MAX_TOTAL_TASK_FAILURES_KEY, self.max_total_task_failures)

    @property
    def unlimited(self) -> bool:
        """True if neither budget limits anything."""
        return self.max_per_task_failures == UNLIMITED and self.max_total_task_failures == UNLIMITED

    def create(self) -> FailureBudget:
        """A fresh budget with no failure recorded."""
        return FailureBudget(self)

    def to_options(self) -> dict[str, str]:
        """The budgets as Flink-style option strings."""
        return {
            MAX_PER_TASK_FAILURES_KEY: str(self.max_per_task_failures),
            MAX_TOTAL_TASK_FAILURES_KEY: str(self.max_total_task_failures),
        }


class FailureBudget:
    """Counts task failures per subtask and in total against a :class:`BudgetConfig`."""

    def __init__(self, config: BudgetConfig) -> None:
        self.config = config
        self._per_task: dict[str, int] = {}
        self._total = 0

    @property
    def total_failures(self) -> int:
        """All failures recorded so far."""
        return self._total

    def record(self, failed_task: str | None) -> None:
        """Count one failure of subtask ``failed_task``; ``None`` (task unknown) counts toward the total only."""
        if failed_task is not None:
            if not isinstance(failed_task, str) or not failed_task:
                raise ValueError(f"failed task must be a non-empty subtask id, got {failed_task!r}")
            self._per_task[failed_task] = self._per_task.get(failed_task, 0) + 1
        self._total += 1

    def exhausted(self) -> str | None:
        """Return why the budget is used up (one line naming the key), or ``None`` while failures may recover.

        The total budget is reported first; among subtasks over their budget, the one with the most failures
        (then the smallest id) is named.
        """
        limit_total = self.config.max_total_task_failures
        if limit_total != UNLIMITED and self._total > limit_total:
            return f"{self._total} task failures in total exceed {MAX_TOTAL_TASK_FAILURES_KEY}={limit_total}"
        limit_task = self.config.max_per_task_failures
        if limit_task == UNLIMITED:
            return None
        over = [(-count, task) for task, count in self._per_task.items() if count > limit_task]
        if not over:
            return None
        count, task = min(over)
        return f"task {task!r} failed {-count} times, more than {MAX_PER_TASK_FAILURES_KEY}={limit_task}"

    def state_dict(self) -> dict[str, object]:
        """``{"per_task": {subtask: count}, "total": n}`` (JSON-able; ``total`` includes task-less failures)."""
        return {"per_task": dict(sorted(self._per_task.items())), "total": self._total}

    def load_state(self, state: Mapping[str, object]) -> None:
        """Restore counts from :meth:`state_dict`; raise :class:`InvalidStateError` on a malformed state."""
        per_task = _state_counts(state.get("per_task"))
        total = state.get("total")
        if not _is_count(total) or not isinstance(total, int) or total < sum(per_task.values()):
            raise InvalidStateError(f"state field 'total' must be an integer >= the sum of 'per_task', got {total!r}")
        self._per_task = per_task
        self._total = total

    def __repr__(self) -> str:
        return f"FailureBudget(config={self.config!r}, total={self._total}, per_task={self._per_task!r})"


def _is_count(value: object) -> bool:
    """True for a non-negative ``int`` that is not a ``bool``."""
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


def _state_counts(value: object) -> dict[str, int]:
    """Read the persisted ``{subtask: count}`` mapping."""
    if not isinstance(value, dict):
        raise InvalidStateError(f"state field 'per_task' must map subtask ids to counts, got {value!r}")
    counts: dict[str, int] = {}
    for task, count in value.items():
        if not isinstance(task, str) or not task or not _is_count(count) or not isinstance(count, int):
            raise InvalidStateError(f"state field 'per_task' has a bad entry {task!r}: {count!r}")
        counts[task] = count
    return counts


def _check_budget(key: str, value: object) -> None:
    """Refuse a budget that is not an integer >= -1, naming ``key``."""
    if not isinstance(value, int) or isinstance(value, bool) or value < UNLIMITED:
        raise OptionError(
            f"{key}: {value!r} is not a valid budget; use a whole number of failures >= 0, or -1 for unlimited"
        )

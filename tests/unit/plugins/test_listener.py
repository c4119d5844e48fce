"""The failover listener in the worker: which failures it records (single-module unit tests).

    a -> b ==> c#0 ==> d#0        (rf_e2e_region; c#0 fails)
"""

from __future__ import annotations

import runpy
from pathlib import Path
from typing import Any

import pytest
from airflow.sdk import TaskInstanceState

from airflow_region_failover.plugins import listener

DAGS = runpy.run_path(str(Path(__file__).parents[2] / "e2e" / "dags" / "rf_e2e.py"))


class RuntimeTaskInstance:
    """Shaped like the Task SDK's task instance the worker's hook receives (the listener checks the type name)."""

    def __init__(self, state: Any, try_number: int = 1) -> None:
        self.dag_id, self.run_id, self.task_id, self.map_index = "rf_e2e_budget", "r1", "c.0", -1
        self.try_number, self.state = try_number, state
        self.task = type("Task", (), {"dag": DAGS["_dag"]})()


@pytest.fixture
def recorded(monkeypatch: pytest.MonkeyPatch) -> list[Any]:
    calls: list[Any] = []
    monkeypatch.setattr(listener, "handle_failure", lambda dag_id, run_id, event, spec, *a, **k: calls.append(event))
    return calls


def test_airflow_retry_of_a_step_is_not_a_failover_failure(recorded: list[Any]) -> None:
    """``retries`` on a step: the SDK hands the hook ``TaskInstanceState.UP_FOR_RETRY`` (an enum whose ``str`` is
    ``'TaskInstanceState.UP_FOR_RETRY'``): Airflow retries the task itself; nothing is recorded, no budget spent."""
    listener.FailoverListener().on_task_instance_failed(None, RuntimeTaskInstance(TaskInstanceState.UP_FOR_RETRY),
                                                        RuntimeError("boom"))
    assert recorded == []


def test_terminal_failure_of_a_step_is_recorded(recorded: list[Any]) -> None:
    listener.FailoverListener().on_task_instance_failed(None, RuntimeTaskInstance(TaskInstanceState.FAILED),
                                                        RuntimeError("boom"))
    assert [e.task_id for e in recorded] == ["c.0"]

"""The ETL benchmarks' wait for a run's final state (``benchmarks/_etl_stack.py``), on a made-up REST client whose
run goes ``running -> failed -> running -> success`` as a failover clear puts a failed run back to work."""

from __future__ import annotations

import itertools
from typing import Any

from benchmarks._etl_stack import final_state


class Api:
    """A run whose state is read from ``states`` one poll at a time (the last one repeats)."""

    def __init__(self, *states: str) -> None:
        self._states = itertools.chain(states, itertools.repeat(states[-1]))
        self.polls = 0

    def dag_run(self, dag_id: str, run_id: str) -> dict[str, Any]:
        self.polls += 1
        return {"state": next(self._states)}

    def wait_for_run(self, dag_id: str, run_id: str, timeout: float, poll: float) -> str:
        while (state := self.dag_run(dag_id, run_id)["state"]) not in ("success", "failed"):
            pass
        return str(state)


def test_a_failed_run_put_back_to_running_by_the_clear_is_waited_for_to_its_success() -> None:
    api = Api("running", "failed", "failed", "running", "running", "success")
    assert final_state(api, "d", "r", timeout=10.0, grace=5.0, poll=0.0) == "success"


def test_a_run_that_stays_failed_for_the_grace_period_is_failed() -> None:
    api = Api("running", "failed")
    assert final_state(api, "d", "r", timeout=10.0, grace=0.05, poll=0.01) == "failed"
    assert api.polls >= 3


def test_success_is_final_at_once() -> None:
    api = Api("success")
    assert final_state(api, "d", "r", timeout=10.0, grace=60.0) == "success" and api.polls == 1


def test_no_grace_takes_the_first_failed() -> None:
    assert final_state(Api("failed", "running", "success"), "d", "r", timeout=10.0, grace=0.0) == "failed"

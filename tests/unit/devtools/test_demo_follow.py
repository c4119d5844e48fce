"""``./dev demo`` follows its run to the final state (``devtools/demo.py``), on a made-up REST client whose run goes
``running -> failed -> running -> success``, as a failover clear puts a run the scheduler marked failed back to
work."""

from __future__ import annotations

import functools
import itertools
from typing import Any

import pytest

from devtools import demo


class Api:
    """A run whose state is read from ``states`` one poll at a time (the last one repeats); no task instances."""

    def __init__(self, *states: str) -> None:
        self._states = itertools.chain(states, itertools.repeat(states[-1]))

    def task_instances(self, dag_id: str, run_id: str) -> list[dict[str, Any]]:
        return []

    def dag_run(self, dag_id: str, run_id: str) -> dict[str, Any]:
        return {"state": next(self._states)}


@pytest.fixture(autouse=True)
def _no_waiting(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(demo.time, "sleep", lambda s: None)


def test_a_failed_run_put_back_to_running_by_the_clear_is_followed_to_its_success() -> None:
    assert demo._follow(Api("running", "failed", "failed", "running", "success"), "r", timeout=60.0) == "success"


def test_a_run_that_stays_failed_for_the_grace_period_is_failed(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(demo, "RunEnd", functools.partial(demo.RunEnd, grace=0.01))
    assert demo._follow(Api("running", "failed"), "r", timeout=60.0) == "failed"

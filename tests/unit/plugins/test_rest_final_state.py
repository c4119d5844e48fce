"""When a run has ended (``plugins/rest.py``: :class:`RunEnd`, :meth:`AirflowRestClient.final_state`), on a
scripted API server whose run goes ``running -> failed -> running -> success`` as a failover clear puts a run the
scheduler marked failed back to work."""

from __future__ import annotations

import itertools

import httpx
import pytest

from airflow_region_failover.plugins import rest


class Clock:
    """A monotonic clock moved by hand."""

    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def serve_states(monkeypatch: pytest.MonkeyPatch, *states: str) -> list[str]:
    """Route the module's clients to a server whose run reads ``states`` one GET at a time (the last repeats);
    returns the states served."""
    served: list[str] = []
    feed = itertools.chain(states, itertools.repeat(states[-1]))
    real = httpx.Client

    def handler(request: httpx.Request) -> httpx.Response:
        served.append(next(feed))
        return httpx.Response(200, json={"state": served[-1]})

    monkeypatch.setattr(rest.httpx, "Client", lambda **kw: real(transport=httpx.MockTransport(handler), **kw))
    return served


def client() -> rest.AirflowRestClient:
    return rest.AirflowRestClient(rest.ApiCredentials("http://api", token="t"))


def finals(grace: float, readings: list[tuple[float, str]]) -> list[bool]:
    """What one :class:`rest.RunEnd` says of each ``(clock time, state)`` reading, in order."""
    clock = Clock()
    end = rest.RunEnd(grace=grace, clock=clock)
    said = []
    for clock.now, state in readings:
        said.append(end.final(state))
    return said


def test_success_is_final_at_once() -> None:
    assert finals(60.0, [(0.0, "success")]) == [True]


def test_failed_is_final_only_once_it_stayed_failed_for_the_grace() -> None:
    assert finals(15.0, [(0.0, "failed"), (14.9, "failed"), (15.0, "failed")]) == [False, False, True]


def test_a_run_put_back_to_running_starts_the_grace_again() -> None:
    readings = [(0.0, "failed"), (10.0, "running"), (20.0, "failed"), (34.0, "failed"), (35.0, "failed")]
    assert finals(15.0, readings) == [False, False, False, False, True]


def test_no_grace_takes_the_first_failed() -> None:
    assert finals(0.0, [(0.0, "failed")]) == [True]


def test_the_client_follows_a_failed_run_put_back_to_running_to_its_success(monkeypatch: pytest.MonkeyPatch) -> None:
    served = serve_states(monkeypatch, "running", "failed", "failed", "running", "running", "success")
    assert client().final_state("d", "r", timeout=10.0, grace=5.0, poll=0.0) == "success"
    assert served == ["running", "failed", "failed", "running", "running", "success"]


def test_the_client_returns_failed_once_it_stayed_failed(monkeypatch: pytest.MonkeyPatch) -> None:
    served = serve_states(monkeypatch, "running", "failed")
    assert client().final_state("d", "r", timeout=10.0, grace=0.05, poll=0.01) == "failed"
    assert len(served) >= 3


def test_the_client_raises_timeout_for_a_run_still_running(monkeypatch: pytest.MonkeyPatch) -> None:
    serve_states(monkeypatch, "running")
    with pytest.raises(TimeoutError, match="still 'running'"):
        client().final_state("d", "r", timeout=0.05, poll=0.01)

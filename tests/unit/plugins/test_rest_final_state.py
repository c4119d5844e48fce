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


def test_success_is_final_at_once() -> None:
    assert rest.RunEnd(grace=60.0, clock=Clock()).final("success")


def test_failed_is_final_only_once_it_stayed_failed_for_the_grace() -> None:
    clock = Clock()
    end = rest.RunEnd(grace=15.0, clock=clock)
    assert not end.final("failed")
    clock.now = 14.9
    assert not end.final("failed")
    clock.now = 15.0
    assert end.final("failed")


def test_a_run_put_back_to_running_starts_the_grace_again() -> None:
    clock = Clock()
    end = rest.RunEnd(grace=15.0, clock=clock)
    assert not end.final("failed")
    clock.now = 10.0
    assert not end.final("running")
    clock.now = 20.0
    assert not end.final("failed")
    clock.now = 34.0
    assert not end.final("failed")
    clock.now = 35.0
    assert end.final("failed")


def test_no_grace_takes_the_first_failed() -> None:
    assert rest.RunEnd(grace=0.0, clock=Clock()).final("failed")


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

"""The REST client against a scripted API server (httpx's MockTransport): what it re-sends and how it
authenticates."""

from __future__ import annotations

from collections.abc import Callable

import httpx
import pytest

from airflow_region_failover.exceptions import RestError
from airflow_region_failover.plugins import rest


def serve(monkeypatch: pytest.MonkeyPatch, handler: Callable[[httpx.Request], httpx.Response]) -> list[str]:
    """Route every client the module builds to ``handler``; returns the log of ``METHOD path`` requests."""
    seen: list[str] = []
    real = httpx.Client

    def record(request: httpx.Request) -> httpx.Response:
        seen.append(f"{request.method} {request.url.path}")
        return handler(request)

    monkeypatch.setattr(rest.httpx, "Client", lambda **kw: real(transport=httpx.MockTransport(record), **kw))
    monkeypatch.setattr(rest.time, "sleep", lambda s: None)
    return seen


def test_a_clear_whose_answer_timed_out_is_not_sent_again(monkeypatch: pytest.MonkeyPatch) -> None:
    """The server may have cleared already: a second POST would clear the tries the first one started."""

    def handler(request: httpx.Request) -> httpx.Response:
        if request.url.path.endswith("/clearTaskInstances"):
            raise httpx.ReadTimeout("no answer", request=request)
        return httpx.Response(200, json={"access_token": "t"})

    seen = serve(monkeypatch, handler)
    client = rest.AirflowRestClient(rest.ApiCredentials("http://api", token="t"))
    with pytest.raises(RestError):
        client.clear("d", "r", ["c.0"])
    assert seen.count("POST /api/v2/dags/d/clearTaskInstances") == 1


class Conn:
    def __init__(self, token: str) -> None:
        self.host, self.port, self.schema, self.login, self.password = "api", 8080, "http", None, None
        self.extra_dejson = {"token": token}


def test_a_pre_issued_token_that_expired_is_read_again_from_its_connection(monkeypatch: pytest.MonkeyPatch) -> None:
    """Tokens in the connection are rotated by whoever issues them: on 401 the client reads the connection again."""
    from airflow_region_failover import conf

    current = {"token": "t1"}
    monkeypatch.setattr(conf, "connection", lambda conn_id: Conn(current["token"]))

    def handler(request: httpx.Request) -> httpx.Response:
        if request.headers.get("Authorization") != "Bearer t2":
            return httpx.Response(401, json={"detail": "Token Expired"})
        return httpx.Response(200, json={"state": "running"})

    serve(monkeypatch, handler)
    rest.default_api.cache_clear()
    try:
        client = rest.default_api()
        current["token"] = "t2"  # rotated after the client was built
        assert client.dag_run("d", "r")["state"] == "running"
    finally:
        rest.default_api.cache_clear()


def test_call_sends_any_public_api_request_with_the_token_and_retries_only_idempotent_ones(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """``call`` is the client's way to any /api/v2 endpoint: authorised, a 503 retried for a PATCH, never for a
    POST (it may have taken effect)."""

    def handler(request: httpx.Request) -> httpx.Response:
        assert request.headers.get("Authorization") == "Bearer t"
        return httpx.Response(503, json={"detail": "busy"})

    seen = serve(monkeypatch, handler)
    client = rest.AirflowRestClient(rest.ApiCredentials("http://api", token="t"))
    with pytest.raises(RestError):
        client.call("PATCH", "/dags/d", json={"is_paused": False})
    with pytest.raises(RestError):
        client.call("POST", "/backfills", json={})
    assert seen.count("PATCH /api/v2/dags/d") == rest.RETRIES
    assert seen.count("POST /api/v2/backfills") == 1


def test_a_trigger_whose_answer_timed_out_is_sent_again_under_its_own_run_id(monkeypatch: pytest.MonkeyPatch) -> None:
    """``./dev demo`` on a fresh, busy machine: the API server took longer than the client's time-out to create the
    run. The client names the run itself, so it can send the request again: a 409 for that id on the second try means
    the first created it, and the run is not created twice."""
    import json

    runs: dict[str, dict[str, object]] = {}
    bodies: list[dict[str, object]] = []

    def handler(request: httpx.Request) -> httpx.Response:
        body = json.loads(request.content)
        bodies.append(body)
        run_id = str(body.get("dag_run_id") or "manual__chosen_by_the_server")
        if run_id in runs:
            return httpx.Response(409, json={"detail": f"DAGRun with dag_run_id: '{run_id}' already exists"})
        runs[run_id] = body
        if len(bodies) == 1:  # created, but the answer never arrived
            raise httpx.ReadTimeout("no answer", request=request)
        return httpx.Response(200, json={"dag_run_id": run_id})

    seen = serve(monkeypatch, handler)
    client = rest.AirflowRestClient(rest.ApiCredentials("http://api", token="t"))
    run_id = client.trigger("d", {"fail_once": True})
    assert list(runs) == [run_id], "one run, the one the first request created"
    assert seen.count("POST /api/v2/dags/d/dagRuns") == 2
    assert bodies[0] == bodies[1] and bodies[0]["conf"] == {"fail_once": True}


def test_a_trigger_refused_for_a_run_id_that_already_existed_is_an_error(monkeypatch: pytest.MonkeyPatch) -> None:
    """A 409 on the first try is someone else's run of that id: not ours to report as created."""

    def handler(request: httpx.Request) -> httpx.Response:
        return httpx.Response(409, json={"detail": "already exists"})

    serve(monkeypatch, handler)
    client = rest.AirflowRestClient(rest.ApiCredentials("http://api", token="t"))
    with pytest.raises(RestError, match="409"):
        client.trigger("d", {}, run_id="taken")


def test_waiting_for_a_runs_end_outlasts_an_api_server_that_stopped_answering_for_a_while(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """A wait with a deadline keeps polling through a busy API server (seen in CI: three time-outs in a row on a
    loaded 2-core machine); an answer the server did give, such as 404, still ends the wait at once."""
    answers = iter([None] * 4 + ["running", "success", 404])

    def handler(request: httpx.Request) -> httpx.Response:
        state = next(answers)
        if state is None:
            raise httpx.ReadTimeout("no answer", request=request)
        if state == 404:
            return httpx.Response(404, json={"detail": "DagRun not found"})
        return httpx.Response(200, json={"state": state})

    serve(monkeypatch, handler)
    client = rest.AirflowRestClient(rest.ApiCredentials("http://api", token="t"))
    assert client.final_state("d", "r", timeout=60, poll=0.0) == "success"
    with pytest.raises(RestError) as refused:
        client.final_state("d", "r", timeout=60, poll=0.0)
    assert refused.value.status == 404


@pytest.mark.parametrize("created_by_the_500", [False, True])
def test_a_trigger_answered_http_500_is_sent_again_under_its_run_id(monkeypatch: pytest.MonkeyPatch,
                                                                    created_by_the_500: bool) -> None:
    """The standalone stack's API server answers 500 "Database error" when its event loop gives up waiting for
    SQLite's lock (``standalone/sqlite.py``): the trigger is sent again under the same id, and a 409 then is the run
    the 500-answered try created."""
    import json

    runs: list[str] = []
    answers: list[int] = []

    def handler(request: httpx.Request) -> httpx.Response:
        run_id = str(json.loads(request.content)["dag_run_id"])
        if run_id in runs:
            answers.append(409)
            return httpx.Response(409, json={"detail": f"DAGRun with dag_run_id: '{run_id}' already exists"})
        if not answers:
            if created_by_the_500:
                runs.append(run_id)
            answers.append(500)
            return httpx.Response(500, json={"detail": {"reason": "Database error"}})
        runs.append(run_id)
        answers.append(200)
        return httpx.Response(200, json={"dag_run_id": run_id})

    serve(monkeypatch, handler)
    client = rest.AirflowRestClient(rest.ApiCredentials("http://api", token="t"))
    run_id = client.trigger("d", {})
    assert runs == [run_id]
    assert answers == [500, 409 if created_by_the_500 else 200]

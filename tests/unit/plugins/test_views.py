"""The views' routes: 401 without a user, 403 for a user who may not read the DAG's runs, the pages and JSON for
one who may; the old history routes still answer; a bad dry-run request is a 400 naming the offender.
(The job, the decision log and the task instances are replaced here; the e2e browser test reads them for real.)

    a#0 -> b#0 ==+==> c#0 ==> d#0        a -PIPELINED POINTWISE-> b -BLOCKING ALL_TO_ALL-> c
    a#1 -> b#1 ==+==> c#1 ==> d#1          -BLOCKING POINTWISE-> d; plus an unconnected side#0
"""

from __future__ import annotations

from typing import Any

import pytest
from airflow.api_fastapi.core_api import security
from airflow.models.dag import DagModel
from fastapi.testclient import TestClient

from airflow_region_failover.failover.run_log import RunLog
from airflow_region_failover.failover_view.page import TaskRow
from airflow_region_failover.job import JobSpec
from airflow_region_failover.plugins import views
from tests.unit.failover_view.test_page import decision
from tests.unit.failover_view.test_svg import e2e_graph

SPEC = JobSpec(e2e_graph(), {})
ORIGINAL_JOB = views._job
RUN = "manual__2026-01-01T00:00:00+00:00"
ROUTES = [f"/run/etl/{RUN}", f"/api/run/etl/{RUN}", "/plan/etl?failed=c%230", "/api/plan/etl?failed=c%230",
          f"/history/etl/{RUN}", f"/api/history/etl/{RUN}", "/api/advise/etl"]


class FakeAuthManager:
    """Allows the DAGs in ``allowed`` only, and records what it was asked."""

    def __init__(self, allowed: set[str]) -> None:
        self.allowed = allowed
        self.asked: list[tuple[str, Any]] = []

    def is_authorized_dag(self, *, method: str, user: Any, access_entity: Any = None, details: Any = None) -> bool:
        self.asked.append((method, access_entity))
        return details.id in self.allowed


@pytest.fixture
def app(monkeypatch: pytest.MonkeyPatch) -> Any:
    monkeypatch.setattr(views, "_job", lambda dag_id: SPEC)
    monkeypatch.setattr(views, "load_history", lambda dag_id, run_id: RunLog(dag_id, run_id,
                                                                             decisions=(decision(1, "c#0"),)))
    monkeypatch.setattr(views, "task_rows", lambda dag_id, run_id: [TaskRow("c.0", "success", 2, 130.0)])
    monkeypatch.setattr(DagModel, "get_team_name", staticmethod(lambda dag_id, **kw: None))
    return views.create_app()


def signed_in(app: Any, monkeypatch: pytest.MonkeyPatch, allowed: set[str]) -> tuple[TestClient, FakeAuthManager]:
    manager = FakeAuthManager(allowed)
    monkeypatch.setattr(security, "get_auth_manager", lambda: manager)
    app.dependency_overrides[security.get_user] = lambda: object()
    return TestClient(app, root_path="/airflow/region-failover"), manager


def test_every_route_needs_a_user(app: Any) -> None:
    client = TestClient(app)
    assert [client.get(r).status_code for r in ROUTES] == [401] * len(ROUTES)


def test_a_user_who_may_not_read_the_dags_runs_gets_403(app: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    client, manager = signed_in(app, monkeypatch, allowed={"other"})
    assert [client.get(r).status_code for r in ROUTES] == [403] * len(ROUTES)
    assert {a for a in manager.asked} == {("GET", security.DagAccessEntity.RUN)}


def test_a_reader_gets_the_view_its_json_and_the_dry_run(app: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    client, _ = signed_in(app, monkeypatch, allowed={"etl"})
    page = client.get(f"/run/etl/{RUN}")
    assert page.status_code == 200 and 'class="rf-graph"' in page.text and 'data-reason="failed"' in page.text
    assert 'href="/airflow/region-failover/plan/etl"' in page.text, "links carry the mount path (base_url)"
    model = client.get(f"/api/run/etl/{RUN}").json()
    assert model["run_id"] == RUN and [e["event"] for e in model["decisions"][0]["timeline"]][:2] == [
        "failure", "decision"]
    plan = client.get("/api/plan/etl", params={"failed": "c#0"}).json()
    assert plan["failed"] == "c#0" and {r["reason"] for r in plan["regions"]} == {"failed", "consumer"}
    gone = client.get("/api/plan/etl", params={"failed": "d#0", "unavailable": "c->d#0"}).json()
    assert {r["reason"] for r in gone["regions"]} == {"failed", "producer-unavailable"}
    assert "rf-failed" in client.get("/plan/etl").text
    assert client.get(f"/api/history/etl/{RUN}").json()["decisions"][0]["status"] == "applied"
    assert "APPLIED" in client.get(f"/history/etl/{RUN}").text


@pytest.mark.parametrize(("query", "named"), [({"failed": "nope"}, "'nope'"), ({"failed": "c#9"}, "c#9"),
                                              ({"failed": "c#0", "unavailable": "x->y#0"}, "x->y")])
def test_a_bad_dry_run_request_is_a_400_naming_it(app: Any, monkeypatch: pytest.MonkeyPatch,
                                                   query: dict[str, str], named: str) -> None:
    client, _ = signed_in(app, monkeypatch, allowed={"etl"})
    answer = client.get("/api/plan/etl", params=query)
    assert answer.status_code == 400 and named in answer.json()["detail"]


@pytest.mark.parametrize("broken", ["load_history", "task_rows"])
def test_an_unreachable_store_or_database_is_a_503(app: Any, monkeypatch: pytest.MonkeyPatch, broken: str) -> None:
    def fail(dag_id: str, run_id: str) -> RunLog:
        raise ConnectionError("down")

    monkeypatch.setattr(views, broken, fail)
    client, _ = signed_in(app, monkeypatch, allowed={"etl"})
    assert client.get(f"/run/etl/{RUN}").status_code == 503
    assert client.get(f"/api/run/etl/{RUN}").status_code == 503


def test_a_dag_without_a_job_is_a_404(app: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    from airflow_region_failover.plugins import metadata_db as probes

    monkeypatch.setattr(views, "_job", ORIGINAL_JOB)
    monkeypatch.setattr(probes, "serialized_job", lambda dag_id: None)
    client, _ = signed_in(app, monkeypatch, allowed={"etl"})
    answer = client.get("/plan/etl")
    assert answer.status_code == 404 and "has no region-failover job" in answer.json()["detail"]


@pytest.mark.parametrize(("base_url", "prefix"), [("http://host:8080", ""), ("https://host/airflow/", "/airflow")])
def test_the_tabs_link_under_the_base_url_path(monkeypatch: pytest.MonkeyPatch, base_url: str, prefix: str) -> None:
    """Behind a reverse proxy serving Airflow at ``/airflow`` the tabs' hrefs carry that path."""
    from airflow_region_failover.plugins.plugin import _external_views

    monkeypatch.setenv("AIRFLOW__API__BASE_URL", base_url)
    tabs = {v["destination"]: v for v in _external_views()}
    assert tabs["dag_run"]["href"] == prefix + "/region-failover/run/{DAG_ID}/{RUN_ID}"
    assert tabs["dag"]["href"] == prefix + "/region-failover/plan/{DAG_ID}"
    assert {v["url_route"] for v in tabs.values()} == {"region_failover", "region_failover_dry_run"}


@pytest.mark.parametrize("path", ["/openapi.json", "/docs", "/redoc", "/docs/oauth2-redirect"])
def test_the_apps_own_docs_and_schema_are_not_served(app: Any, monkeypatch: pytest.MonkeyPatch, path: str) -> None:
    """FastAPI's defaults would answer these without a login, and ``/docs`` loads scripts from a CDN into the
    Airflow origin: turned off (401/404 without a user, 404 for one)."""
    assert TestClient(app).get(path).status_code in {401, 404}
    client, _ = signed_in(app, monkeypatch, allowed={"etl"})
    assert client.get(path).status_code == 404
    assert app.openapi_url is None and app.docs_url is None and app.redoc_url is None

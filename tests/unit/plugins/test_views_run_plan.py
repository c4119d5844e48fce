"""The Failover tab and the dry run show the plan of a job whose runs fix one: what the run runs of its AUTO results
and how many epochs its AUTO-epochs steps run, from the stored plans (the view never fixes one); a job without
one shows none.

    src#0 ==B==> gen#0 --AUTO--> agg#0 --AUTO--> fin#0 ==B==> sink#0     rendered PER_RUN: gen.agg.fin.0
    src#0 ==B==> sessions#0 ==B==> sink#0                                sessions: Checkpoint(epochs="AUTO")
"""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest
from airflow.models.dag import DagModel

from airflow_region_failover.decisions.plans import Plans
from airflow_region_failover.failover.run_log import RunLog
from airflow_region_failover.failover_view.page import TaskRow
from airflow_region_failover.graph.auto import Choice, ExchangePlan
from airflow_region_failover.planning.epochs import EpochsChoice
from airflow_region_failover.planning.stored import PlanDecision
from airflow_region_failover.plugins import views
from tests.support.fakes import MemoryObjects
from tests.unit.plugins.test_views import SPEC, signed_in
from tests.unit.test_authoring_auto_epochs import _job as epochs_job
from tests.unit.test_authoring_per_run import _spec as per_run_spec

AGG_FIN = ExchangePlan({"agg->fin": Choice.FUSED})


@pytest.fixture
def objects(monkeypatch: pytest.MonkeyPatch) -> MemoryObjects:
    store = MemoryObjects()
    monkeypatch.setattr("airflow_region_failover.store.result_store.default_store",
                        lambda: SimpleNamespace(objects=store))
    monkeypatch.setattr(views, "load_history", lambda dag_id, run_id: RunLog(dag_id, run_id))
    monkeypatch.setattr(views, "task_rows", lambda dag_id, run_id: [TaskRow("gen.agg.fin.0", "success", 1, 10.0)])
    monkeypatch.setattr(DagModel, "get_team_name", staticmethod(lambda dag_id, **kw: None))
    return store


def _client(monkeypatch: pytest.MonkeyPatch, spec: Any, dag_id: str) -> Any:
    monkeypatch.setattr(views, "_job", lambda dag: spec)
    client, _ = signed_in(views.create_app(), monkeypatch, allowed={dag_id})
    return client


def test_a_run_shows_the_plan_it_fixed_and_the_dry_run_the_next_one(objects: MemoryObjects,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    plans = Plans(objects)  # type: ignore[arg-type]
    plans.decide_next("per_run", PlanDecision("d1", AGG_FIN, "agg->fin is cheaper fused <b>", 1795000000.0, "r0"))
    plans.fix("per_run", "r1")
    plans.decide_next("per_run", PlanDecision("d2", ExchangePlan(), "every result persisted", 1795000100.0, "r1"))
    client = _client(monkeypatch, per_run_spec(), "per_run")

    model = client.get("/api/run/per_run/r1").json()["plan"]
    assert model["state"] == "fixed" and model["decision"] == {"id": "d1", "decided_at": 1795000000.0,
                                                               "after_run": "r0"}
    assert model["results"] == {"agg->fin": "FUSED", "gen->agg": "BLOCKING"} and model["epochs"] == {}
    page = client.get("/run/per_run/r1").text
    row = page.split('<tr data-result="agg-&gt;fin">', 1)[1].split("</tr>", 1)[0]
    assert '<td class="rf-choice">FUSED</td>' in row
    assert "decision d1 of 2026-11-18" in page and "cheaper fused &lt;b&gt;" in page and "<b>" not in page

    waiting = client.get("/api/run/per_run/r2").json()["plan"]  # r2's first task has not fixed its plan yet
    assert waiting["state"] == "next" and waiting["fixed_at"] is None and waiting["decision"]["id"] == "d2"
    assert plans.of_run("per_run", "r2") is None, "the view never fixes a plan"
    dry = client.get("/plan/per_run").text
    assert "The next run&#x27;s plan" in dry and "every result persisted" in dry
    assert '<td class="rf-choice">FUSED</td>' not in dry.split('id="rf-run-plan"', 1)[1].split("</table>", 1)[0]


def test_a_run_shows_the_epochs_its_auto_epochs_step_runs(objects: MemoryObjects,
                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    spec, _ = epochs_job()
    plans = Plans(objects)  # type: ignore[arg-type]
    client = _client(monkeypatch, spec, "auto_epochs")
    before = client.get("/api/run/auto_epochs/r0").json()["plan"]
    assert before["decision"] is None and before["epochs"]["sessions"]["epochs"] == 10  # the default, none decided
    plans.decide_next("auto_epochs", PlanDecision("d1", ExchangePlan(), "epochs from 4 runs", 1795000000.0, "r0",
                                                  {"sessions": EpochsChoice(17, "Daly: 17 of 40")}))
    plans.fix("auto_epochs", "r1")
    model = client.get("/api/run/auto_epochs/r1").json()["plan"]
    assert model["epochs"] == {"sessions": {"epochs": 17, "reason": "Daly: 17 of 40"}} and model["results"] == {}
    page = client.get("/run/auto_epochs/r1").text
    assert '<tr data-step="sessions"><td>sessions</td><td class="rf-epochs">17</td><td>Daly: 17 of 40</td>' in page


def test_a_job_whose_runs_fix_no_plan_shows_none(objects: MemoryObjects, monkeypatch: pytest.MonkeyPatch) -> None:
    client = _client(monkeypatch, SPEC, "etl")
    assert client.get("/api/run/etl/r1").json()["plan"] is None
    assert 'id="rf-run-plan"' not in client.get("/run/etl/r1").text
    assert 'id="rf-run-plan"' not in client.get("/plan/etl").text


def test_an_unreadable_plan_is_a_503_naming_it(objects: MemoryObjects, monkeypatch: pytest.MonkeyPatch) -> None:
    def away() -> Any:
        raise ConnectionError("store away")

    monkeypatch.setattr("airflow_region_failover.store.result_store.default_store", away)
    answer = _client(monkeypatch, per_run_spec(), "per_run").get("/api/run/per_run/r1")
    assert answer.status_code == 503 and "the run's plan is unavailable: ConnectionError" in answer.text

"""The dry-run tab's AUTO section and ``/api/advise/DAG_ID``: the example ETL with AUTO edges after a history of
late failures — the same decision ``region-failover advise`` prints, as HTML and JSON, behind the views' login.
(The job and the history are replaced; plugins/run_history.py is tested on a real schema and store.)

    gen_orders -PIPELINED-> clean_orders -AUTO "orders"---+
                                                          +-> join -AUTO-> aggregate -AUTO-> report
    gen_lineitem -PIPELINED-> clean_lineitem -AUTO "lineitem"-+
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from airflow.models.dag import DagModel

from airflow_region_failover.cli import main
from airflow_region_failover.cli.advise import FileHistory
from airflow_region_failover.plugins import advice, views
from tests.unit.cli.test_advise import HISTORY, _etl_job
from tests.unit.plugins.test_views import signed_in


@pytest.fixture
def app(monkeypatch: pytest.MonkeyPatch) -> Any:
    monkeypatch.setattr(views, "_job", lambda dag_id: _etl_job())
    monkeypatch.setattr(advice, "dag_job", lambda dag_id: _etl_job())
    monkeypatch.setattr(advice, "AirflowHistory", lambda store, parallelism, window, rendered: FileHistory(HISTORY))
    monkeypatch.setattr("airflow_region_failover.store.result_store.default_store", lambda: None)
    monkeypatch.setattr(DagModel, "get_team_name", staticmethod(lambda dag_id, **kw: None))
    return views.create_app()


def test_the_dry_run_shows_each_auto_edge_and_the_three_plans(app: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    client, _ = signed_in(app, monkeypatch, allowed={"etl"})
    page = client.get("/plan/etl")
    assert page.status_code == 200 and 'id="rf-auto-edges"' in page.text and "rf-failed" in page.text
    for result, choice in (("orders", "FUSED"), ("lineitem", "FUSED"), ("join-&gt;aggregate", "FUSED"),
                           ("aggregate-&gt;report", "BLOCKING")):
        row = page.text.split(f'<tr data-result="{result}">', 1)[1].split("</tr>", 1)[0]
        assert f'<td class="rf-choice">{choice}</td>' in row and " s</td>" in row
    assert "350.0 MB (5 runs), write 56.0 s (5 runs), read 28.0 s (5 runs)" in page.text
    assert 'title="scheduled__2026-11-20T00:00:00+00:00, ' in page.text, "every run a figure came from"
    plans = page.text.split('id="rf-auto-plans"', 1)[1]
    assert all(name in plans for name in ("all BLOCKING", "all fused (one Spark application)", "chosen"))


def test_the_json_is_what_advise_dag_id_prints(app: Any, monkeypatch: pytest.MonkeyPatch,
                                               capsys: pytest.CaptureFixture[str]) -> None:
    client, _ = signed_in(app, monkeypatch, allowed={"etl"})
    answer = client.get("/api/advise/etl")
    assert answer.status_code == 200
    monkeypatch.setenv("AIRFLOW__REGION_FAILOVER__STORE_BUCKET", "bkt")  # the CLI checks it before Airflow starts
    assert main(["advise", "etl", "-o", "json"]) == 0
    assert answer.json() == json.loads(capsys.readouterr().out)
    assert answer.json()["decision"]["plan"]["choices"]["aggregate->report"] == "BLOCKING"


def test_an_unreadable_history_is_a_note_on_the_page_and_a_503_of_the_json(app: Any,
                                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    class Down:
        def history(self, dag_id: str) -> Any:
            raise ConnectionError("down")

    monkeypatch.setattr(advice, "AirflowHistory", lambda store, parallelism, window, rendered: Down())
    client, _ = signed_in(app, monkeypatch, allowed={"etl"})
    page = client.get("/plan/etl")
    assert page.status_code == 200 and "run history unavailable: ConnectionError" in page.text
    assert client.get("/api/advise/etl").status_code == 503


def test_a_history_that_cannot_be_costed_names_the_step(app: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """Three runs that measured no step: the planner says which step it lacks, on the page and in the JSON."""
    from airflow_region_failover.planning.history import History, RunRecord

    class Empty:
        def history(self, dag_id: str) -> History:
            return History(tuple(RunRecord(f"r{i}", (), (), {}, 1.0) for i in range(3)))

    monkeypatch.setattr(advice, "AirflowHistory", lambda store, parallelism, window, rendered: Empty())
    client, _ = signed_in(app, monkeypatch, allowed={"etl"})
    assert "no run of the history measured it" in client.get("/plan/etl").text
    found = client.get("/api/advise/etl").json()
    assert found["decision"] is None and "step 'gen_orders'" in found["note"]

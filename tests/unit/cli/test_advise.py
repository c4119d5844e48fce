"""``region-failover advise``: the example ETL with AUTO edges after a history of late failures.

    gen_orders -PIPELINED-> clean_orders -AUTO "orders"---+
                                                          +-> join -AUTO-> aggregate -AUTO-> report
    gen_lineitem -PIPELINED-> clean_lineitem -AUTO "lineitem"-+
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from airflow_region_failover.cli import main
from airflow_region_failover.cli.advise import FileHistory
from airflow_region_failover.graph import jsonformat
from airflow_region_failover.graph.auto import AutoDeclaration, ExchangePlan, auto_results, resolve
from airflow_region_failover.job import JobSpec
from tests.unit.cli.test_cli import _run

ROOT = Path(__file__).resolve().parents[3]
GRAPH = str(ROOT / "examples" / "etl_auto.json")
HISTORY = str(ROOT / "examples" / "etl_auto_history.json")


def test_advise_prints_each_auto_edge_and_the_three_plans(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["advise", GRAPH, "--history", HISTORY]) == 0
    out = capsys.readouterr().out
    rows = {line.split()[0]: line.split()[1] for line in out.splitlines() if line.split()[:1] and
            line.split()[0] in {"orders", "lineitem", "join->aggregate", "aggregate->report"}}
    assert rows == {"orders": "FUSED", "lineitem": "FUSED", "join->aggregate": "FUSED",
                    "aggregate->report": "BLOCKING"}
    assert "step report: 238 per task-hour (4 failed tries in 25 task-seconds)" in out
    assert "350.0 MB (5 runs), write 56.0 s (5 runs), read 28.0 s (5 runs)" in out
    plans = {line[:28].strip(): float(line[28:].split()[0]) for line in out.splitlines()
             if line.startswith(("all BLOCKING", "all fused", "chosen"))}
    assert plans["chosen"] < 0.9 * min(plans["all BLOCKING"], plans["all fused"])


def test_advise_json_is_the_whole_decision(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["advise", GRAPH, "--history", HISTORY, "--json"]) == 0
    decision = json.loads(capsys.readouterr().out)
    assert decision["plan"]["choices"]["aggregate->report"] == "BLOCKING"
    assert decision["figures"]["results"][0]["bytes"]["runs"][0] == "scheduled__2026-11-20T00:00:00+00:00"
    assert {e["result"] for e in decision["edges"]} == {"orders", "lineitem", "join->aggregate", "aggregate->report"}


def test_too_little_history_keeps_blocking(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    history = json.loads(Path(HISTORY).read_text())
    short = tmp_path / "short.json"
    short.write_text(json.dumps({"runs": history["runs"][:1]}))
    assert main(["advise", GRAPH, "--history", str(short)]) == 0
    out = capsys.readouterr().out
    assert "fewer than the 3 a choice needs" in out and "(not costed: too little history)" in out


def test_a_bad_history_file_is_one_line_naming_it(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"runs": [{"run_id": "r1", "steps": [], "results": [], "failures": 1,
                                         "task_seconds": 5}]}))
    assert main(["advise", GRAPH, "--history", str(bad)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and f"history file {str(bad)!r}: run 'r1': 'failures' 1 must map step ids" in err
    assert main(["advise", GRAPH, "--history", str(tmp_path / "missing.json")]) == 2
    assert "cannot read history file" in capsys.readouterr().err


def test_a_deadline_prints_each_plans_probability_of_missing_it(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["advise", GRAPH, "--history", HISTORY, "--deadline", "240"]) == 0
    lines = [line for line in capsys.readouterr().out.splitlines()
             if line.startswith(("all BLOCKING", "all fused", "chosen"))]
    assert len(lines) == 3 and all("misses 240 s: " in line for line in lines)
    assert main(["advise", GRAPH, "--history", HISTORY, "--deadline", "240", "--json"]) == 0
    deadline = json.loads(capsys.readouterr().out)["deadline"]
    assert deadline["seconds"] == 240.0
    assert deadline["miss_probability"]["chosen"] <= deadline["miss_probability"]["all_fused"]


@pytest.mark.parametrize("bad", ["-5", "0", "soon", "inf"])
def test_a_deadline_that_is_no_positive_number_is_refused_naming_it(bad: str,
                                                                   capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exited:
        main(["advise", GRAPH, "--history", HISTORY, f"--deadline={bad}"])
    assert exited.value.code == 2
    assert f"{bad!r} is not a positive number of seconds" in capsys.readouterr().err


def test_advise_needs_no_airflow_boto3_or_pyspark() -> None:
    done = _run("advise", GRAPH, "--history", HISTORY)
    assert done.returncode == 0, done.stderr
    assert "chosen" in done.stdout


def _etl_job() -> JobSpec:
    """The example ETL as a DAG renders it without a plan: every AUTO result BLOCKING, the declaration kept."""
    declared = jsonformat.load(GRAPH)
    return JobSpec(resolve(declared, ExchangePlan()), {}, auto=AutoDeclaration(auto_results(declared)))


@pytest.fixture(autouse=True)
def store_bucket(monkeypatch: pytest.MonkeyPatch) -> None:
    """``advise DAG_ID`` reads the store as ``history`` and ``gc`` do: its bucket must be set (cli/preflight.py)."""
    monkeypatch.setenv("AIRFLOW__REGION_FAILOVER__STORE_BUCKET", "bkt")


@pytest.fixture
def etl_dag(monkeypatch: pytest.MonkeyPatch) -> None:
    """DAG ``etl``: its job as the metadata DB would hand it over, its history as the store and the DB would (the
    file's runs; plugins/run_history.py is tested on a real schema and store in tests/unit/plugins)."""
    from airflow_region_failover.plugins import advice

    monkeypatch.setattr(advice, "dag_job", lambda dag_id: _etl_job())
    monkeypatch.setattr(advice, "AirflowHistory", lambda store, parallelism, window, rendered: FileHistory(HISTORY))
    monkeypatch.setattr("airflow_region_failover.store.result_store.default_store", lambda: None)


def test_advise_by_dag_id_reads_the_job_and_its_history(etl_dag: None, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["advise", "etl"]) == 0
    by_dag = capsys.readouterr().out
    assert main(["advise", GRAPH, "--history", HISTORY, "-o", "table"]) == 0
    assert by_dag == capsys.readouterr().out, "the same decision as the graph and its history give offline"
    assert main(["advise", "etl", "-o", "json"]) == 0
    document = json.loads(capsys.readouterr().out)
    assert document["dag_id"] == "etl" and document["note"] == ""
    assert document["decision"]["plan"]["choices"]["aggregate->report"] == "BLOCKING"


def test_the_history_an_advice_printed_replays_it(etl_dag: None, tmp_path: Path,
                                                 capsys: pytest.CaptureFixture[str]) -> None:
    """``advise DAG -o json`` carries the history window it came from, in the form ``--history FILE`` reads: saved,
    it gives the same decision offline (how the benchmarks keep the history beside each prediction)."""
    assert main(["advise", "etl", "-o", "json"]) == 0
    document = json.loads(capsys.readouterr().out)
    saved = tmp_path / "history.json"
    saved.write_text(json.dumps(document["history"]))
    assert main(["advise", GRAPH, "--history", str(saved), "--json"]) == 0
    assert json.loads(capsys.readouterr().out) == document["decision"]


def test_a_dag_without_auto_edges_says_so(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    from airflow_region_failover.plugins import advice

    monkeypatch.setattr(advice, "dag_job", lambda dag_id: JobSpec(resolve(jsonformat.load(GRAPH), ExchangePlan()),
                                                                  {}))
    assert main(["advise", "plain"]) == 0
    assert "DAG 'plain' declares no AUTO edge" in capsys.readouterr().out


def test_a_dag_without_auto_edges_shows_its_epochs_and_its_declared_plans_expected_time(
        etl_dag: None, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    from airflow_region_failover.plugins import advice

    plain = JobSpec(resolve(jsonformat.load(GRAPH), ExchangePlan()), {}, sliced={"join": 8})
    monkeypatch.setattr(advice, "dag_job", lambda dag_id: plain)
    assert main(["advise", "plain"]) == 0
    out = capsys.readouterr().out
    assert "declares no AUTO edge" in out and "  join: " in out and "epoch(s): " in out
    assert re.search(r"^as declared +\d+\.\d s +\d+\.\d s  fused: none$", out, re.MULTILINE), out
    assert main(["advise", "plain", "-o", "json"]) == 0
    document = json.loads(capsys.readouterr().out)
    assert document["decision"] is None and document["expected"]["expected_seconds"] > 0


def test_an_unknown_dag_exits_2_naming_it(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    from airflow_region_failover.plugins import metadata_db

    monkeypatch.setattr(metadata_db, "serialized_job", lambda dag_id: None)
    assert main(["advise", "nope"]) == 2
    assert "DAG 'nope' has no region-failover job" in capsys.readouterr().err


def test_advise_by_dag_id_names_a_missing_bucket_first(monkeypatch: pytest.MonkeyPatch,
                                                        capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.delenv("AIRFLOW__REGION_FAILOVER__STORE_BUCKET")
    monkeypatch.setenv("AIRFLOW_HOME", "/nonexistent")  # no airflow.cfg to find a bucket in
    assert main(["advise", "etl"]) == 2
    assert "store_bucket" in capsys.readouterr().err

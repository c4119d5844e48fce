"""``region-failover advise``: the example ETL with AUTO edges after a history of late failures.

    gen_orders -PIPELINED-> clean_orders -AUTO "orders"---+
                                                          +-> join -AUTO-> aggregate -AUTO-> report
    gen_lineitem -PIPELINED-> clean_lineitem -AUTO "lineitem"-+
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from airflow_region_failover.cli import main
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


def test_advise_needs_no_airflow_boto3_or_pyspark() -> None:
    done = _run("advise", GRAPH, "--history", HISTORY)
    assert done.returncode == 0, done.stderr
    assert "chosen" in done.stdout

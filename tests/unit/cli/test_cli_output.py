"""What the CLI writes: results alone on stdout (Airflow's and the AWS SDK's log lines on stderr), ``-o json|table``,
help without reStructuredText, a missing ``store_bucket`` named before Airflow is imported, and the same commands
as ``airflow region-failover ...``.

The ``gc`` and ``history`` runs are real subprocesses of the CLI against moto's in-memory S3 (started inside the
subprocess), with an AWS connection id that does not exist, so the amazon provider logs a warning while they run.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from airflow_region_failover.cli import build_parser, main
from tests.unit.cli.test_cli import _BLOCKED_RUN

ROOT = Path(__file__).resolve().parents[3]
ETL = str(ROOT / "examples" / "etl.json")

_ON_MOTO = """
import sys
from moto import mock_aws
with mock_aws():
    import boto3
    boto3.client("s3", region_name="us-east-1").create_bucket(Bucket="bkt")
    from airflow_region_failover.cli import main
    code = main(sys.argv[1:])
sys.exit(code)
"""


def _env(home: Path, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AIRFLOW", "AWS_"))}
    home.mkdir(parents=True, exist_ok=True)
    return {**env, "AIRFLOW_HOME": str(home), "AWS_DEFAULT_REGION": "us-east-1", **extra}


@pytest.mark.parametrize("argv", [["gc", "--dry-run"], ["history", "d", "r", "--json"]], ids=["gc", "history"])
def test_stdout_holds_only_the_json_and_airflow_logs_go_to_stderr(argv: list[str], tmp_path: Path) -> None:
    env = _env(tmp_path / "home", AIRFLOW__REGION_FAILOVER__STORE_BUCKET="bkt", AWS_ACCESS_KEY_ID="testing",
               AWS_SECRET_ACCESS_KEY="testing")
    done = subprocess.run([sys.executable, "-c", _ON_MOTO, *argv], capture_output=True, text=True, env=env,
                          timeout=180, check=False)
    assert done.returncode == 0, done.stderr[-2000:]
    json.loads(done.stdout)  # nothing but the document
    assert "Unable to find AWS Connection ID" in done.stderr, done.stderr[-2000:]


def test_output_json_or_table(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["regions", ETL, "-o", "table"]) == 0
    table = capsys.readouterr().out.splitlines()
    assert table[0].split() == ["REGION", "SUBTASKS"], table
    assert any(line.split()[1:] == ["report#0"] for line in table[1:]), table
    assert main(["plan", ETL, "--failed", "report#0", "--output", "json"]) == 0
    assert json.loads(capsys.readouterr().out)["failed"] == "report#0"
    assert main(["plan", ETL, "--failed", "report#0", "-o", "table"]) == 0
    rows = capsys.readouterr().out.splitlines()
    assert rows[0].split() == ["REGION", "REASON", "SUBTASKS"] and "consumer" not in rows[0], rows
    for command in (["gc"], ["history", "d", "r"]):
        for fmt in ("json", "table"):
            assert build_parser().parse_args([*command, "-o", fmt]).output == fmt


def test_the_gc_summary_as_a_table() -> None:
    from airflow_region_failover.cli.output import render

    text = render({"dry_run": True, "released_runs": {"d": ["r1", "r2"]}, "swept_objects": 3}, "table")
    assert text.splitlines() == ["KEY            VALUE", "dry_run        true", 'released_runs  {"d": ["r1", "r2"]}',
                                 "swept_objects  3"]


def test_help_text_has_no_restructuredtext(capsys: pytest.CaptureFixture[str]) -> None:
    commands = [[], *([c] for c in ("regions", "plan", "backoff", "dot", "history", "gc", "standalone"))]
    for command in commands:
        with pytest.raises(SystemExit):
            main([*command, "--help"])
        text = capsys.readouterr().out
        assert "``" not in text and ":func:" not in text and ":mod:" not in text, text


def test_a_missing_store_bucket_is_named_before_airflow_is_imported(tmp_path: Path) -> None:
    started = time.monotonic()
    done = subprocess.run([sys.executable, "-c", _BLOCKED_RUN, "gc", "--dry-run"], capture_output=True, text=True,
                          env=_env(tmp_path / "home"), timeout=60, check=False)
    elapsed = time.monotonic() - started
    assert done.returncode == 2 and done.stdout == "", done.stderr[-2000:]
    assert done.stderr.count("\n") == 1 and "store_bucket" in done.stderr, done.stderr
    assert "AIRFLOW__REGION_FAILOVER__STORE_BUCKET" in done.stderr and elapsed < 3, (elapsed, done.stderr)


def test_the_commands_are_an_airflow_subcommand(tmp_path: Path) -> None:
    airflow = Path(sys.executable).with_name("airflow")
    done = subprocess.run([str(airflow), "region-failover", "regions", ETL, "-o", "json"], capture_output=True,
                          text=True, env=_env(tmp_path / "home"), timeout=180, check=False)
    assert done.returncode == 0, done.stderr[-2000:]
    assert ["report#0"] in json.loads(done.stdout)["regions"]

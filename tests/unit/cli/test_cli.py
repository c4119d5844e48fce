"""The ``region-failover`` CLI: JSON outputs, one-line errors, and no Airflow/boto3/pyspark on its path."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from airflow_region_failover.cli import main

ROOT = Path(__file__).resolve().parents[3]
ETL = str(ROOT / "examples" / "etl.json")

# Runs the CLI with airflow, boto3 and pyspark made unimportable, then proves none was imported.
_BLOCKED_RUN = """
import runpy, sys
for name in ("airflow", "boto3", "botocore", "pyspark"):
    sys.modules[name] = None
sys.argv = ["region-failover", *sys.argv[1:]]
try:
    runpy.run_module("airflow_region_failover", run_name="__main__")
finally:
    heavy = ("airflow", "boto3", "botocore", "pyspark")
    loaded = [m for m in sys.modules if m.split(".")[0] in heavy and sys.modules[m]]
    assert not loaded, loaded
"""


def _run(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", _BLOCKED_RUN, *args], capture_output=True, text=True, env=env, check=False
    )


def test_regions_json(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["regions", ETL]) == 0
    regions = json.loads(capsys.readouterr().out)["regions"]
    assert ["gen_orders#0", "clean_orders#0"] in regions
    assert ["join#0", "join#1", "aggregate#0"] in regions
    assert ["report#0"] in regions


def test_plan_json(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["plan", ETL, "--failed", "aggregate#1", "--unavailable", "orders#3"]) == 0
    plan = json.loads(capsys.readouterr().out)
    assert plan["restart"][:3] == ["aggregate#0", "aggregate#1", "clean_orders#3"]
    reasons = {r["region"]: (r["reason"], r["subtasks"]) for r in plan["regions"]}
    assert ("failed", ["join#2", "join#3", "aggregate#1"]) in reasons.values()
    assert ("producer-unavailable", ["gen_orders#3", "clean_orders#3"]) in reasons.values()
    assert ("consumer", ["report#0"]) in reasons.values()


def test_full_plan_restarts_all(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["plan", ETL, "--failed", "report#0", "--strategy", "full"]) == 0
    assert len(json.loads(capsys.readouterr().out)["restart"]) == 23


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["plan", ETL, "--failed", "nope#0"], "unknown step 'nope'"),
        (["plan", ETL, "--failed", "join"], "subtask 'join' must look like '<name>#<index>'"),
        (["plan", ETL, "--failed", "join#9"], "subtask join#9 does not exist"),
        (["plan", ETL, "--failed", "join#0", "--unavailable", "ghost#0"], "unknown result 'ghost'"),
        (["regions", "/nonexistent.json"], "cannot read job graph '/nonexistent.json'"),
    ],
)
def test_bad_input_is_one_line_naming_the_offender(
    args: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(args) == 2
    err = capsys.readouterr().err
    assert message in err and err.count("\n") == 1


def test_cli_imports_no_airflow_boto3_or_pyspark() -> None:
    for args in (["regions", ETL], ["plan", ETL, "--failed", "join#0"], ["dot", ETL]):
        done = _run(*args)
        assert done.returncode == 0, done.stderr
    assert "digraph" in _run("dot", ETL).stdout


@pytest.mark.skipif(shutil.which("uv") is None, reason="needs uv to build a networkx-only environment")
def test_cli_runs_in_an_environment_with_only_networkx(tmp_path: Path) -> None:
    venv = tmp_path / "venv"
    subprocess.run(["uv", "venv", "-q", "-p", sys.executable, str(venv)], check=True)
    python = str(venv / "bin" / "python")
    subprocess.run(["uv", "pip", "install", "-q", "-p", python, "networkx"], check=True)
    env = {**os.environ, "PYTHONPATH": str(ROOT / "provider")}
    env.pop("VIRTUAL_ENV", None)
    done = subprocess.run(
        [python, "-m", "airflow_region_failover", "plan", ETL, "--failed", "join#0"],
        capture_output=True,
        text=True,
        env=env,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["failed"] == "join#0"


def test_backoff_preview_follows_the_exponential_example_of_the_flink_docs(tmp_path: Path) -> None:
    """Flink docs: initial 1 s, multiplier 2, max 10 s, no jitter -> 1, 2, 4, 8, 10, 10 s."""
    events = tmp_path / "events.json"
    events.write_text(json.dumps([{"t": 0, "op": "check"}] + [{"t": i * 60_000, "op": "failure"} for i in range(1, 7)]))
    done = _run(
        "backoff",
        "--set", "restart-strategy.type=exponential-delay",
        "--set", "restart-strategy.exponential-delay.initial-backoff=1 s",
        "--set", "restart-strategy.exponential-delay.backoff-multiplier=2",
        "--set", "restart-strategy.exponential-delay.max-backoff=10 s",
        "--set", "restart-strategy.exponential-delay.jitter-factor=0",
        "--set", "restart-strategy.exponential-delay.reset-backoff-threshold=1 h",
        "--events", str(events),
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    rows = [json.loads(line) for line in done.stdout.splitlines()]
    assert rows[0] == {"t": 0, "op": "check", "new_attempt": None, "can_restart": True, "backoff_ms": None}
    assert [r["backoff_ms"] for r in rows[1:]] == [1000, 2000, 4000, 8000, 10000, 10000]
    assert all(r["new_attempt"] for r in rows[1:])


def test_backoff_bad_option_names_the_key(tmp_path: Path) -> None:
    events = tmp_path / "events.json"
    events.write_text("[]")
    done = _run("backoff", "--set", "restart-strategy.type=fixed-delay",
                "--set", "restart-strategy.fixed-delay.delay=10 ss", "--events", str(events))  # fmt: skip
    assert done.returncode == 2
    assert "restart-strategy.fixed-delay.delay" in done.stderr and done.stderr.count("\n") == 1


def test_plan_takes_every_repeated_unavailable_partition(capsys: pytest.CaptureFixture[str]) -> None:
    """``--unavailable A --unavailable B`` (as docs/user/cli.md writes it) marks both partitions unavailable."""
    assert main(["plan", ETL, "--failed", "aggregate#1", "--unavailable", "orders#3", "--unavailable",
                 "orders#0"]) == 0
    regions = json.loads(capsys.readouterr().out)["regions"]
    producers = [r["subtasks"] for r in regions if r["reason"] == "producer-unavailable"]
    assert ["gen_orders#0", "clean_orders#0"] in producers and ["gen_orders#3", "clean_orders#3"] in producers

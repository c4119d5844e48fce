"""The commonest set-up mistakes end in one line naming the fix and exit 2, not a traceback: no AWS credentials
for the result store, an S3 endpoint that does not answer, ``standalone`` without its extra.

The store cases run the real CLI (``gc``, which starts the store as every task does) in a subprocess: no
credentials anywhere (no connection, no environment, no files, no instance metadata), or a connection whose
``endpoint_url`` is a port nothing listens on.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest

from airflow_region_failover.cli.main import main
from airflow_region_failover.exceptions import StoreError
from airflow_region_failover.store.result_store import ResultStore


def _closed_port() -> int:
    with socket.socket() as bound:
        bound.bind(("127.0.0.1", 0))
        return int(bound.getsockname()[1])


def _gc(tmp_path: Path, **extra: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AIRFLOW", "AWS_"))}
    (tmp_path / "home").mkdir()
    env.update(AIRFLOW_HOME=str(tmp_path / "home"), AIRFLOW__REGION_FAILOVER__STORE_BUCKET="bkt",
               AWS_CONFIG_FILE=str(tmp_path / "none"), AWS_SHARED_CREDENTIALS_FILE=str(tmp_path / "none"),
               AWS_EC2_METADATA_DISABLED="true", AWS_DEFAULT_REGION="us-east-1", **extra)
    return subprocess.run([sys.executable, "-m", "airflow_region_failover", "gc", "--dry-run"], capture_output=True,
                          text=True, env=env, timeout=180, check=False)


def _one_error_line(done: subprocess.CompletedProcess[str]) -> str:
    assert done.returncode == 2 and "Traceback" not in done.stderr, done.stderr[-3000:]
    errors = [line for line in done.stderr.splitlines() if line.startswith("region-failover: error:")]
    assert len(errors) == 1 and done.stdout == "", done.stderr[-3000:]
    return errors[0]


def test_no_aws_credentials_is_one_line_naming_the_connection_and_the_fix(tmp_path: Path) -> None:
    line = _one_error_line(_gc(tmp_path))
    assert "'aws_default'" in line and "store_aws_conn_id" in line, line
    assert "airflow connections add" in line and "AWS_ACCESS_KEY_ID" in line, line


def test_an_s3_endpoint_that_does_not_answer_is_one_line_naming_it_and_the_connection(tmp_path: Path) -> None:
    endpoint = f"http://127.0.0.1:{_closed_port()}"
    connection = json.dumps({"conn_type": "aws", "login": "key", "password": "secret",
                             "extra": {"endpoint_url": endpoint}})
    line = _one_error_line(_gc(tmp_path, AIRFLOW_CONN_AWS_DEFAULT=connection))
    assert endpoint in line and "'aws_default'" in line and "endpoint_url" in line, line


def test_a_task_sees_the_same_error_naming_the_endpoint() -> None:
    endpoint = f"http://127.0.0.1:{_closed_port()}"
    store = ResultStore.from_endpoint(endpoint, "key", "secret", "bkt", max_attempts=1, connect_timeout=1)
    with pytest.raises(StoreError) as raised:
        store.start_up()
    assert endpoint in str(raised.value) and "\n" not in str(raised.value), raised.value


def test_standalone_without_its_extra_names_the_extra(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                      capsys: pytest.CaptureFixture[str]) -> None:
    from airflow_region_failover.standalone import command, seaweedfs

    monkeypatch.setattr(seaweedfs, "sys", SimpleNamespace(executable=str(tmp_path / "bin" / "python")))  # no weed
    monkeypatch.setattr(seaweedfs.shutil, "which", lambda name: None)  # nor on PATH
    monkeypatch.setattr(command, "stop_on_signals", lambda: None)  # this test process keeps its own handlers
    monkeypatch.setattr(command, "stop_guarded", lambda: None)
    assert main(["standalone", "--dags", str(tmp_path), "--home", str(tmp_path / "home")]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and "[standalone]" in err and "pip install" in err, err

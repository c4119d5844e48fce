"""``region-failover standalone`` without its servers (they are replaced here; ``tests/e2e/test_standalone_e2e.py``
runs them for real): exported ``AIRFLOW__`` settings reach every Airflow component, the way to the embedded S3 is
printed (its secret is not), and every secret it writes is 0600 from its first byte."""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path
from typing import Any

import pytest

from airflow_region_failover.standalone import airflow_stack, command
from airflow_region_failover.standalone.airflow_stack import AirflowStack
from airflow_region_failover.standalone.seaweedfs import S3Endpoint


def endpoint(bucket: str) -> S3Endpoint:
    return S3Endpoint("http://127.0.0.1:18333", "AKTESTKEY", "s3-secret-never-printed", bucket)


@pytest.fixture
def started(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> dict[str, Any]:
    """``Standalone.start()`` with SeaweedFS, Spark Connect and Airflow replaced: what Airflow would be started
    with (its environment, computed as for its components) and the stack."""
    seen: dict[str, Any] = {}

    def s3_start(self: Any, attempts: int = 3) -> S3Endpoint:
        seen["bucket"] = self.bucket
        return endpoint(self.bucket)

    def spark_start(self: Any, attempts: int = 3) -> str:
        self.port = 15002
        self.token = "spark-token" if getattr(self, "authenticate", False) else None
        return str(self.url)

    def airflow_start(self: AirflowStack, timeout: float = 180.0) -> AirflowStack:
        assert self.home is not None
        self.home.mkdir(parents=True, exist_ok=True)
        self.port = self.port or 8080
        self.passwords = {self.username: self.password, self.api_user: "api-password"}
        seen["env"] = self.env()
        return self

    monkeypatch.setattr(command.SeaweedFS, "start", s3_start)
    monkeypatch.setattr(command.SparkConnectServer, "start", spark_start)
    monkeypatch.setattr(command.SparkConnectServer, "stop", lambda self, grace=15.0: None)
    monkeypatch.setattr(command.SeaweedFS, "stop", lambda self, grace=10.0: None)
    monkeypatch.setattr(AirflowStack, "start", airflow_start)
    monkeypatch.setattr(AirflowStack, "stop", lambda self, grace=10.0: None)
    (tmp_path / "dags").mkdir()
    seen["home"] = tmp_path / "home"
    seen["dags"] = tmp_path / "dags"
    return seen


def start(seen: dict[str, Any]) -> Any:
    stack = command.Standalone(seen["dags"], seen["home"], 0)
    stack.start()
    return stack


def test_exported_airflow_settings_take_effect(started: dict[str, Any], monkeypatch: pytest.MonkeyPatch) -> None:
    """``airflow standalone`` honours ``AIRFLOW__...`` variables; ours dropped them all (only airflow.cfg worked).
    They now override the stack's defaults — but not what its flags decide (--dags here), which it says."""
    monkeypatch.setenv("AIRFLOW__REGION_FAILOVER__WATCH_INTERVAL", "7")
    monkeypatch.setenv("AIRFLOW__REGION_FAILOVER__STORE_PREFIX", "team-a")
    monkeypatch.setenv("AIRFLOW__CORE__PARALLELISM", "9")
    monkeypatch.setenv("AIRFLOW__CORE__DAGS_FOLDER", "/somewhere/else")
    start(started)
    env = started["env"]
    assert env["AIRFLOW__REGION_FAILOVER__WATCH_INTERVAL"] == "7"
    assert env["AIRFLOW__REGION_FAILOVER__STORE_PREFIX"] == "team-a"
    assert env["AIRFLOW__CORE__PARALLELISM"] == "9"
    assert env["AIRFLOW__CORE__DAGS_FOLDER"] == str(started["dags"].resolve())


def test_an_exported_bucket_is_the_bucket_the_embedded_s3_serves(started: dict[str, Any],
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AIRFLOW__REGION_FAILOVER__STORE_BUCKET", "my-results")
    start(started)
    assert started["bucket"] == "my-results" == started["env"]["AIRFLOW__REGION_FAILOVER__STORE_BUCKET"]


def test_the_settings_it_honours_and_ignores_are_named(started: dict[str, Any], monkeypatch: pytest.MonkeyPatch,
                                                       capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setenv("AIRFLOW__DATABASE__SQL_ALCHEMY_CONN", "postgresql://u:db-password@h/db")
    monkeypatch.setenv("AIRFLOW__API__PORT", "1234")
    start(started)
    out = capsys.readouterr().out
    assert "AIRFLOW__DATABASE__SQL_ALCHEMY_CONN" in out and "db-password" not in out, "names, never values"
    assert "AIRFLOW__API__PORT" in out and "--port" in out
    assert started["env"]["AIRFLOW__API__PORT"] == "8080"


def test_the_way_to_the_embedded_s3_is_printed_and_its_secret_kept_in_a_0600_file(
        started: dict[str, Any], capsys: pytest.CaptureFixture[str]) -> None:
    """A published Delta table could not be read from outside the stack: nothing said where S3 was. The endpoint,
    bucket, prefix and table root are printed; the keys are in ``<home>/s3.env`` (0600), never on the terminal."""
    stack = start(started)
    out = capsys.readouterr().out
    assert "http://127.0.0.1:18333" in out and "region-failover" in out
    assert "s3://region-failover/region-failover/tables/<table>" in out
    path = started["home"].resolve() / "s3.env"
    assert str(path) in out and "s3-secret-never-printed" not in out
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    variables = dict(line.split("=", 1) for line in path.read_text().splitlines() if "=" in line)
    assert variables["AWS_ENDPOINT_URL"] == "http://127.0.0.1:18333"
    assert (variables["AWS_ACCESS_KEY_ID"], variables["AWS_SECRET_ACCESS_KEY"]) == ("AKTESTKEY",
                                                                                    "s3-secret-never-printed")
    assert stack.airflow is not None


def test_its_spark_connect_server_has_a_token_which_only_the_connection_carries(started: dict[str, Any],
                                                                                capsys: pytest.CaptureFixture[str]
                                                                                ) -> None:
    stack = start(started)
    assert stack.spark.authenticate and stack.spark.token == "spark-token"
    conn = json.loads(started["env"]["AIRFLOW_CONN_REGION_FAILOVER_SPARK"])
    assert (conn["host"], conn["port"], conn["password"]) == ("localhost", 15002, "spark-token")
    assert "spark-token" not in capsys.readouterr().out


def test_every_secret_is_0600_from_its_first_byte(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """``passwords.json`` was written 0644 in a 0755 home, the other secrets written first and chmod-ed after: with
    chmod doing nothing, only files created 0600 pass. A world-readable file left by an older stack is narrowed."""
    for skipped in ("_run_once", "_spawn", "wait_healthy"):
        monkeypatch.setattr(AirflowStack, skipped, lambda *a, **k: None)
    monkeypatch.setattr(airflow_stack, "ensure_guard", lambda: "stack")
    monkeypatch.setattr(os, "chmod", lambda *a, **k: None)
    monkeypatch.setattr(Path, "chmod", lambda *a, **k: None)
    home = tmp_path / "home"
    old = os.umask(0o022)
    try:
        (home / "airflow").mkdir(parents=True)
        (home / "airflow" / "passwords.json").write_text("{}")
        AirflowStack(dags_folder=tmp_path, home=home / "airflow", supervise=False).start()
        command.Standalone(tmp_path, home, 0)._password()
    finally:
        os.umask(old)
    secrets = [*(home / "airflow").glob(".*"), home / "airflow" / "passwords.json", home / "admin-password"]
    modes = {p.name: stat.S_IMODE(p.stat().st_mode) for p in secrets}
    assert modes == {".secret_key": 0o600, ".jwt_secret": 0o600, "passwords.json": 0o600, "admin-password": 0o600}


def test_the_home_is_its_owners_only(started: dict[str, Any]) -> None:
    start(started)
    assert stat.S_IMODE(started["home"].stat().st_mode) == 0o700


def test_a_second_start_on_the_same_home_keeps_the_admin_password(tmp_path: Path) -> None:
    """The log-in survives a restart: the password is made once, kept 0600 in the home, and read back by the next
    ``Standalone`` on that home (the e2e of the second start is an ``extended`` scenario)."""
    home = tmp_path / "home"
    home.mkdir(mode=0o700)
    first = command.Standalone(tmp_path, home, 0)._password()
    again = command.Standalone(tmp_path, home, 0)._password()
    assert first and again == first == (home / "admin-password").read_text().strip()
    assert stat.S_IMODE((home / "admin-password").stat().st_mode) == 0o600
    other = tmp_path / "other"
    other.mkdir(mode=0o700)
    assert command.Standalone(tmp_path, other, 0)._password() != first


def test_an_existing_home_of_an_older_stack_is_made_private_on_start(started: dict[str, Any],
                                                                     capsys: pytest.CaptureFixture[str]) -> None:
    """A home an older stack left 0755 kept that mode (``mkdir(mode=0o700, exist_ok=True)`` leaves an existing
    directory alone): the SQLite DB, the logs and the SeaweedFS volumes were readable by every local user (L8). A
    start narrows the home and its secret-bearing folders to 0700, and says so."""
    home = started["home"]
    for folder in (home, home / "airflow", home / "s3", home / "spark"):
        folder.mkdir(exist_ok=True)
        folder.chmod(0o755)
    (home / "airflow" / "airflow.db").write_text("rows")
    start(started)
    modes = {p.name: stat.S_IMODE(p.stat().st_mode) for p in (home, home / "airflow", home / "s3", home / "spark")}
    assert modes == {"home": 0o700, "airflow": 0o700, "s3": 0o700, "spark": 0o700}, modes
    out = capsys.readouterr().out
    assert f"Made {home} private (0755 -> 0700)" in out, out
    assert f"Made {home / 's3'} private (0755 -> 0700)" in out, out

"""docker/compose.yaml and docker/Dockerfile, checked without a Docker engine: every check passes on the real
files, and each catches the breakage it is for on a broken copy (``BREAKAGES``)."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests.unit.docker_compose import checks
from tests.unit.docker_compose.checks import CHECKS, command_problems, wheel_build_problems
from tests.unit.docker_compose.compose import DOCKERFILE, Compose, load


@pytest.mark.parametrize("check", sorted(CHECKS))
def test_compose_file(check: str) -> None:
    problems = CHECKS[check](load())
    assert not problems, "\n".join(problems)


def _set(service: str, key: str, value: Any) -> Callable[[Compose], None]:
    def change(doc: Compose) -> None:
        doc["services"][service][key] = value
    return change


def _set_env(service: str, key: str, value: str | None) -> Callable[[Compose], None]:
    def change(doc: Compose) -> None:
        variables = doc["services"][service]["environment"]
        if value is None:
            variables.pop(key)
        else:
            variables[key] = value
    return change


def _drop(service: str) -> Callable[[Compose], None]:
    def change(doc: Compose) -> None:
        del doc["services"][service]
    return change


def _both(*changes: Callable[[Compose], None]) -> Callable[[Compose], None]:
    def change(doc: Compose) -> None:
        for one in changes:
            one(doc)
    return change


def _add_dependency(service: str, dep: str, condition: str) -> Callable[[Compose], None]:
    return lambda doc: doc["services"][service]["depends_on"].update({dep: {"condition": condition}})


def _add_volume(service: str, volume: str) -> Callable[[Compose], None]:
    return lambda doc: doc["services"][service].setdefault("volumes", []).append(volume)


#: (check, what breaks, how): each check must report the broken copy of the real file
BREAKAGES: list[tuple[str, str, Callable[[Compose], None]]] = [
    ("build", "build context gone", _set("api-server", "build", {"context": "../no-such-dir",
                                                                 "dockerfile": "docker/Dockerfile"})),
    ("build", "Dockerfile renamed", _set("spark-master", "build", {"context": "..", "dockerfile": "docker/Dockerfil"})),
    ("mounts", "mounted file gone", _add_volume("scheduler", "./no-such-file.json:/opt/airflow/x.json:ro")),
    ("mounts", "undeclared volume", _add_volume("redis", "redis-data:/data")),
    ("connections", "connection not JSON", _set_env("scheduler-2", "AIRFLOW_CONN_SPARK_DEFAULT", "spark://x:7077")),
    ("connections", "connection without type", _set_env("celery-worker", "AIRFLOW_CONN_AWS_DEFAULT", '{"host": "s"}')),
    ("connections", "named connection undefined", _set_env("scheduler", "AIRFLOW__REGION_FAILOVER__API_CONN_ID",
                                                           "failover_api")),
    ("connections", "default connection undefined", _both(
        _set_env("api-server", "AIRFLOW__REGION_FAILOVER__STORE_AWS_CONN_ID", None),  # default: aws_default
        _set_env("api-server", "AIRFLOW_CONN_AWS_DEFAULT", None))),
    ("connections", "wrong connection type", _set_env("celery-worker", "AIRFLOW_CONN_SPARK_CONNECT_DEFAULT",
                                                      '{"conn_type": "http", "host": "spark-connect"}')),
    ("commands", "Airflow 2 command", _set("api-server", "command", ["webserver"])),
    ("commands", "not a celery command", _set("celery-worker", "command", ["celery", "workers"])),
    ("commands", "Spark class typo", _set("spark-worker", "command",
                                          ["spark-class", "org.apache.spark.deploy.Worker", "spark://spark-master:7077"])),
    ("commands", "not in the image", _set("spark-connect", "command", ["start-connect-server.sh"])),
    ("commands", "not a weed command", _set("seaweedfs", "command", ["serve", "-s3"])),
    ("commands", "healthcheck tool missing", _set("redis", "healthcheck", {"test": ["CMD", "curl", "localhost"]})),
    ("commands", "no command", _set("triggerer", "command", None)),
    ("stack", "one scheduler", _drop("scheduler-2")),
    ("stack", "no Celery worker", _drop("celery-worker")),
    ("stack", "LocalExecutor", _set_env("triggerer", "AIRFLOW__CORE__EXECUTOR", "LocalExecutor")),
    ("stack", "secrets differ", _set_env("scheduler-2", "AIRFLOW__API_AUTH__JWT_SECRET", "another")),
    ("stack", "Connect on another master", _set("spark-connect", "command", [
        "spark-submit", "--class", "org.apache.spark.sql.connect.service.SparkConnectServer", "--master", "local[2]",
        "spark-internal"])),
    ("stack", "the provider's Connect server on another master", _set("spark-connect", "command", [
        "python", "-m", "airflow_region_failover.standalone.connect_server", "--master", "local[2]"])),
    ("commands", "not one of the provider's servers", _set("spark-connect", "command", [
        "python", "-m", "airflow_region_failover.standalone.connect_servers", "--master", "spark://spark-master:7077"])),
    ("hosts", "database host", _set_env("dag-processor", "AIRFLOW__DATABASE__SQL_ALCHEMY_CONN",
                                        "postgresql+psycopg2://airflow:airflow@localhost:5432/airflow")),
    ("hosts", "S3 endpoint host", _set_env("celery-worker", "AIRFLOW_CONN_AWS_DEFAULT", json.dumps(
        {"conn_type": "aws", "extra": {"endpoint_url": "http://s3:8333"}}))),
    ("imports", "Celery configuration path typo", _set_env(
        "celery-worker", "AIRFLOW__CELERY__CELERY_CONFIG_OPTIONS",
        "airflow_region_failover.operators.preload.CELERY_CONFIGS")),
    ("depends_on", "unknown service", _add_dependency("celery-worker", "spark-conect", "service_started")),
    ("depends_on", "healthy without healthcheck", _add_dependency("api-server", "triggerer", "service_healthy")),
]


@pytest.mark.parametrize(("check", "breakage"), [(c, b) for c, b, _ in BREAKAGES])
def test_each_check_catches_its_breakage(check: str, breakage: str) -> None:
    doc = load()
    change = next(how for c, b, how in BREAKAGES if (c, b) == (check, breakage))
    change(doc)
    assert CHECKS[check](doc), f"{check} did not notice: {breakage}"


def test_commands_check_reads_what_the_dockerfile_installs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    without_celery = tmp_path / "Dockerfile"
    without_celery.write_text(DOCKERFILE.read_text().replace("apache-airflow-providers-celery", "apache-airflow"))
    monkeypatch.setattr(checks, "DOCKERFILE", without_celery)
    assert any("'celery'" in problem for problem in command_problems(load()))


def test_the_build_check_catches_a_dockerfile_that_leaves_out_what_the_wheel_build_reads() -> None:
    """Found by the compose test: the readme (docs/pypi.md), LICENSE, NOTICE and the jar hook joined pyproject.toml
    and ``pip install /opt/region-failover`` failed in the image's build."""
    text = DOCKERFILE.read_text()
    assert wheel_build_problems(text) == []
    broken = text.replace("COPY --chown=airflow:root devtools/wheel_jar.py ./devtools/wheel_jar.py\n", "")
    assert wheel_build_problems(broken) == [
        "docker/Dockerfile: the wheel's build reads devtools/wheel_jar.py (pyproject.toml), which no COPY brings"]

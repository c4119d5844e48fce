"""The install commands of docs/operator/installing.md work as a user runs them: its first ``bash`` block builds the
wheel from this checkout and installs it into an empty venv (uv's ``pip``, from the machine's caches and PyPI;
≈ 75 s warm), where ``region-failover --help``, ``airflow region-failover --help`` and ``import
airflow_region_failover`` work, exactly one pyspark distribution is installed (docs/versions.md, "One pyspark") and
the JVM helper jar lies in the environment's ``jars/``."""

from __future__ import annotations

import os
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
INSTALLING = ROOT / "docs" / "operator" / "installing.md"

pytestmark = [pytest.mark.integration, pytest.mark.slow]


def documented_commands() -> list[list[str]]:
    """The commands of the first ``bash`` block of installing.md (comments dropped), as argument lists."""
    block = INSTALLING.read_text().split("```bash\n", 1)[1].split("```", 1)[0]
    return [shlex.split(line, comments=True) for line in block.splitlines() if shlex.split(line, comments=True)]


def _run(argv: list[str], cwd: Path, timeout: float = 240,
         env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    done = subprocess.run(argv, cwd=cwd, capture_output=True, text=True, timeout=timeout, check=False, env=env)
    assert done.returncode == 0, f"{shlex.join(argv)} exited {done.returncode}:\n{done.stdout}\n{done.stderr}"
    return done


@pytest.mark.timeout(300)
def test_the_documented_install_works_in_an_empty_venv(tmp_path: Path) -> None:
    uv = shutil.which("uv")
    if uv is None:
        pytest.skip("uv is not on PATH (./dev puts it there)")
    venv = tmp_path / "venv"
    _run([uv, "venv", "-q", "-p", sys.executable, str(venv)], tmp_path)
    python = venv / "bin" / "python"
    dist = tmp_path / "dist"  # what the commands call dist/, kept out of the checkout
    commands = documented_commands()
    installs = [c for c in commands if c[:2] == ["pip", "install"] and "[" not in " ".join(c)]
    assert installs, f"{INSTALLING}: its first bash block has no plain `pip install`"
    for command in commands:
        if command[:2] == ["uv", "build"]:
            _run([uv, *[str(dist) if arg == "dist" else arg for arg in command[1:]]], ROOT)
    plain = [arg.replace("dist/", f"{dist}/", 1) if arg.startswith("dist/") else arg for arg in installs[0][2:]]
    _run([uv, "pip", "install", "-q", "--python", str(python), *plain], tmp_path)
    helped = _run([str(venv / "bin" / "region-failover"), "--help"], tmp_path, timeout=60)
    assert helped.stdout.startswith("usage: region-failover"), helped.stdout
    probe = ("import importlib.metadata as m, airflow_region_failover, pyspark; "
             "print(sorted(d.metadata['Name'].lower() for d in m.distributions() "
             "if d.metadata['Name'].lower().startswith('pyspark')), pyspark.__version__, m.version('pyspark'))")
    imported = _run([str(python), "-c", probe], tmp_path, timeout=120).stdout.split()
    assert imported[0] == "['pyspark']" and imported[1] == imported[2], imported
    jars = [p.name for p in (venv / "jars").glob("*.jar")]
    assert len(jars) == 1 and jars[0].startswith("region-failover-keyed-parquet-"), jars  # where sessions find it
    (tmp_path / "airflow").mkdir()
    quiet = {**{k: v for k, v in os.environ.items() if not k.startswith("AIRFLOW")},
             "AIRFLOW_HOME": str(tmp_path / "airflow")}
    airflow = _run([str(venv / "bin" / "airflow"), "region-failover", "--help"], tmp_path, timeout=120, env=quiet)
    assert "region-failover" in airflow.stdout, airflow.stdout

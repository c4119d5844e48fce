"""The code standards are part of the test suite: ruff on everything, mypy (strict for the pure core)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def _run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", *args], cwd=ROOT, capture_output=True, text=True, check=False)


def test_ruff() -> None:
    done = _run("ruff", "check", "provider", "tests", "benchmarks", "dags", "devtools", "plugins")
    assert done.returncode == 0, done.stdout + done.stderr


def test_mypy() -> None:
    done = _run("mypy")
    assert done.returncode == 0, done.stdout + done.stderr

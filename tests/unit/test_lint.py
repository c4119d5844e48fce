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


def test_nothing_stops_tracemalloc() -> None:
    """``tracemalloc.stop()`` segfaults CPython 3.11 when a native thread enters Python meanwhile (gh-128679), and
    Arrow's threads do (CI exit 139 in ``test_store_memory.py``): memory is measured in a child that never stops
    tracing (:mod:`tests.support.peak_memory`)."""
    import ast

    calls = [f"{path.relative_to(ROOT)}:{node.lineno}"
             for folder in ("provider", "tests", "benchmarks", "devtools", "plugins", "dags")
             for path in sorted((ROOT / folder).rglob("*.py"))
             for node in ast.walk(ast.parse(path.read_text(), str(path)))
             if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "stop"
             and isinstance(node.func.value, ast.Name) and node.func.value.id == "tracemalloc"]
    assert not calls, f"tracemalloc.stop() called at {calls}: measure in a child (tests.support.peak_memory)"

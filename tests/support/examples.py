"""The repository's example DAG files, for tests that call their functions directly."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from types import ModuleType

DAGS = Path(__file__).resolve().parents[2] / "dags"
"""The dags folder ``./dev demo`` and ``./dev standalone`` serve."""


def example_module(name: str) -> ModuleType:
    """``dags/<name>.py`` executed as a module of its own (a fresh one per call, so a test's changes to it stay
    its own)."""
    spec = importlib.util.spec_from_file_location(f"example_{name}", DAGS / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module

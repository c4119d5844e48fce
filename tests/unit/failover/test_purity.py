"""Purity of the failover core's option and backoff modules: they import only the standard library."""

from __future__ import annotations

import ast
import sys
from pathlib import Path

import pytest

PURE_MODULES = ("values", "backoff/__init__", "backoff/base", "backoff/none", "backoff/fixed_delay",
                "backoff/failure_rate", "backoff/exponential_delay", "options", "budget", "preview", "checkpointing",
                "schema_ddl", "error_class")
ALLOWED_INTERNAL = {
    "airflow_region_failover.failover." + name.removesuffix("/__init__").replace("/", ".") for name in PURE_MODULES
} | {"airflow_region_failover.graph.errors"}


@pytest.mark.parametrize("name", PURE_MODULES)
def test_module_imports_only_the_standard_library(name: str) -> None:
    import airflow_region_failover.failover as package

    source = Path(package.__path__[0], f"{name}.py").read_text()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            modules = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            modules = [node.module or ""]
        else:
            continue
        for module in modules:
            top = module.split(".")[0]
            assert module in ALLOWED_INTERNAL or top in sys.stdlib_module_names or top == "__future__", module

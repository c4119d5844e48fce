"""The README's first DAG, as the e2e test of ``region-failover standalone`` and the docs test read it."""

from __future__ import annotations

from pathlib import Path

README = Path(__file__).resolve().parents[2] / "README.md"
FIRST_DAG_ID = "my_first_region_job"


def readme_dag() -> str:
    """The python block of the README section "A first DAG"."""
    section = README.read_text().split("## A first DAG", 1)[1]
    return section.split("```python\n", 1)[1].split("```", 1)[0]

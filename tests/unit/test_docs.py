"""The documentation: the site builds strictly, the root Markdown files link to what exists, the README's first DAG
parses, and the reference pages say what the code declares.

``mkdocs build --strict`` (``mkdocs.yml``: ``validation`` of links, anchors and the nav set to ``warn``) turns a
broken link, a missing anchor or a page left out of the nav into a failed build; the pages outside ``docs/``
(README.md, ARCHITECTURE.md, benchmarks/README.md and the investigations' notes in benchmarks/notes/) are checked
here with the same slug rule. The reference checks keep one source of truth (the options table is
``tests/unit/test_conf.py``'s): the CLI page against the argument parser, the errors page against
``exceptions.__all__``, the architecture's layer list against the import contract's ``LAYER``.
"""

from __future__ import annotations

import argparse
import re
import subprocess
import sys
from pathlib import Path

import pytest
from markdown.extensions.toc import slugify

from airflow_region_failover import exceptions
from airflow_region_failover.cli.main import build_parser
from tests.support.readme import FIRST_DAG_ID, readme_dag
from tests.unit.test_imports import LAYER

ROOT = Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs"
ROOT_PAGES = ("README.md", "ARCHITECTURE.md", "benchmarks/README.md",
              *sorted(str(p.relative_to(ROOT)) for p in (ROOT / "benchmarks" / "notes").glob("*.md")))
LINK = re.compile(r"!?\[[^\]]*\]\(([^)\s]+)\)")


def mkdocs_build(site: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--config-file", str(ROOT / "mkdocs.yml"),
         "--site-dir", str(site)],
        cwd=ROOT, capture_output=True, text=True, timeout=300, check=False)


def test_docs_site_builds_strictly(tmp_path: Path) -> None:
    done = mkdocs_build(tmp_path / "site")
    output = done.stdout + done.stderr
    assert done.returncode == 0 and "WARNING" not in output, output
    assert (tmp_path / "site" / "index.html").is_file()


def anchors(page: Path) -> set[str]:
    """The ids mkdocs gives the headings of ``page`` (Python-Markdown's toc slugify)."""
    text = re.sub(r"```.*?```", "", page.read_text(), flags=re.S)
    headings = re.findall(r"(?m)^#{1,6}\s+(.+?)\s*$", text)
    return {slugify(re.sub(r"[`*]", "", heading), "-") for heading in headings}


def broken_links(page: Path) -> list[str]:
    problems = []
    for target in LINK.findall(re.sub(r"```.*?```", "", page.read_text(), flags=re.S)):
        if re.match(r"[a-z]+:", target):
            continue
        path, _, anchor = target.partition("#")
        resolved = (page.parent / path).resolve() if path else page
        if not resolved.exists():
            problems.append(f"{target}: no such file")
        elif anchor and resolved.suffix == ".md" and anchor not in anchors(resolved):
            problems.append(f"{target}: no heading #{anchor} in {resolved.relative_to(ROOT)}")
    return problems


@pytest.mark.parametrize("name", ROOT_PAGES)
def test_root_pages_link_to_what_exists(name: str) -> None:
    assert broken_links(ROOT / name) == []


def test_readme_first_dag_parses_into_its_regions(tmp_path: Path) -> None:
    from airflow.dag_processing.dagbag import DagBag

    (tmp_path / f"{FIRST_DAG_ID}.py").write_text(readme_dag())
    bag = DagBag(str(tmp_path))
    assert bag.import_errors == {}
    dag = bag.dags[FIRST_DAG_ID]
    # every edge is BLOCKING: each subtask is a region of its own, and POINTWISE wires squares.i to numbers.i only
    assert {gid: sorted(group.children) for gid, group in dag.task_group_dict.items() if gid} == {
        "r0": ["numbers.0"], "r1": ["numbers.1"], "r2": ["squares.0"], "r3": ["squares.1"], "r4": ["total.0"]}
    assert {task.task_id: sorted(task.upstream_task_ids) for task in dag.tasks} == {
        "numbers.0": [], "numbers.1": [], "squares.0": ["numbers.0"], "squares.1": ["numbers.1"],
        "total.0": ["squares.0", "squares.1"]}


def test_cli_reference_names_every_command_and_flag() -> None:
    text = (DOCS / "reference" / "cli.md").read_text()
    sections = dict(re.findall(r"(?ms)^## (\S+)\n(.*?)(?=^## |\Z)", text))
    commands = next(a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction)).choices
    missing = [f"{name} {flag}" for name, parser in commands.items()
               for action in parser._actions for flag in action.option_strings
               if flag.startswith("--") and flag != "--help" and flag not in sections.get(name, "")]
    assert sorted(set(commands) - set(sections)) == [] and missing == []


def test_errors_reference_names_every_error() -> None:
    text = (DOCS / "reference" / "errors.md").read_text()
    assert [name for name in exceptions.__all__ if f"| `{name}` |" not in text] == []


def test_architecture_layers_are_the_import_contracts() -> None:
    text = (DOCS / "contributing" / "architecture.md").read_text()
    block = text.split("## The layers", 1)[1].split("```\n", 1)[1].split("```", 1)[0]
    layers = {}
    for line in block.splitlines():
        number, *units = line.split()[1:]
        for unit in units:
            name = unit.removesuffix("/").removesuffix(".py").removesuffix("/__init__").replace("/", ".")
            layers[name] = int(number)
    assert layers == LAYER

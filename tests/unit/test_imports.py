"""The import contract: layers import downwards only, the core is pure, the store's protocol is free of the data
plane's libraries, the rest of the provider reaches the store only through its faces, and no two modules import
each other.

Layers (ARCHITECTURE.md): ``(graph, provider_info) < (failover, planning) < (exceptions, naming, conf, job, ...)
< store.key_checks < store.keys < store.s3 < store (the protocol) < (store.gc, store.dataplane) < store.result_store <
(decisions, checkpoint) < spark < (rendering, ...) < (operators, plugins, cli, authoring, standalone) <
(__init__, __main__)``
(``provider_info`` imports nothing: it declares the options that ``conf`` reads). Every import of our own
modules counts — module-level, function-local or under ``TYPE_CHECKING`` — and a function-local one must say why it
is deferred (a comment with ``deferred`` on its line). Sideways imports inside a layer are allowed only where listed.
"""

from __future__ import annotations

import ast
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

import airflow_region_failover

PACKAGE = "airflow_region_failover"
ROOT = Path(airflow_region_failover.__file__).parent

LAYER: dict[str, int] = {
    "graph": 0, "provider_info": 0,
    "failover": 1, "planning": 1,
    "exceptions": 2, "naming": 2, "conf": 2, "job": 2, "process_cache": 2, "publication.declaration": 2,
    "timeline": 2, "current_task": 2,
    "store.keys": 4, "store.key_checks": 3, "publication.staging": 4,
    "store.s3": 5,
    "store": 6,
    "store.gc": 7, "store.dataplane": 7,
    "store.result_store": 8,
    "decisions": 9, "publication.delta": 9, "checkpoint": 9,
    "spark": 10,
    "observability": 11, "rendering": 11, "failover_view": 11, "publication.operator": 11, "plugins.preload": 11,
    "publication": 11,
    "operators": 12, "plugins": 12, "cli": 12, "authoring": 12, "standalone": 12,
    "__init__": 13, "__main__": 13,
}
"""A unit is a subpackage or top-level module, or a module of a subpackage where it has a layer of its own (the
most specific entry wins): ``publication`` spans the job spec (its declaration, read at parse time) and the
adapters (its Delta commit and operator); ``store`` is the protocol (and the package's ``__init__``), with the key
layout below it and its S3 access between, the sweeper and the data plane above it, and the front door on top."""
SIDEWAYS = {
    ("conf", "exceptions"), ("job", "exceptions"), ("job", "naming"), ("job", "publication.declaration"),
    ("publication.declaration", "exceptions"),
    ("authoring", "operators"),
    ("cli", "plugins"), ("standalone", "plugins"),
}
PURE = {"graph", "failover", "planning"}
PURE_THIRD_PARTY: set[str] = set()
PROTOCOL: dict[str, set[str]] = {"store.keys": set(), "store.key_checks": set(), "store": set(), "store.gc": set(),
                                 "store.s3": {"boto3", "botocore", "airflow"}}
"""The store's protocol (keys, S3 access, commit, content, availability, gc) imports, besides the standard library,
only what each unit lists here — never pyarrow, pyspark, numpy or pandas, which belong to ``store.dataplane``: the
correctness proofs live here, and no performance change to a writer or reader may reach them. ``store.s3`` reaches
S3 through boto3/botocore and an Airflow connection's hook."""
EVERYONE = None
FACES: dict[str, set[str] | None] = {
    # ResultStore and its records (None: any unit outside the store)
    "store.result_store": EVERYONE, "store.config": EVERYONE, "store.availability": EVERYONE,
    "store.s3.clients": EVERYONE,
    # the format
    "store.keys": EVERYONE, "store.key_checks": EVERYONE, "store.manifest": EVERYONE,
    "store.checkpoint_manifest": EVERYONE,
    # the guarded S3 objects, for what the store keeps besides results (decision logs, checkpoints) and the
    # failover loop's reading of S3 error codes
    "store.s3.objects": {"decisions", "checkpoint", "plugins"},
    # the write types, and the writer and reader entry points the engines call
    "store.dataplane.types": {"spark", "checkpoint"},
    "store.dataplane.parquet": {"checkpoint"}, "store.dataplane.encoding": {"checkpoint"},
    "store.dataplane.reading": {"spark", "checkpoint"}, "store.dataplane.clustered": {"spark"},
    "store.dataplane.s3a": {"spark", "standalone"},
    # a checkpoint's objects share the results' content addressing, commit clock and run listing
    "store.content": {"checkpoint"}, "store.commit": {"checkpoint"},
    # holds, grace and the run listing: the decision logs, the gc command, checkpoints
    "store.gc.lifecycle": {"decisions", "cli", "checkpoint"},
}
"""The faces of the store: each module of ``store`` the rest of the provider may import, and which top-level units
may (``None``: all). Any other ``store.*`` import from outside the store is refused; an entry no import needs is
removed (:func:`test_every_face_is_used`)."""


@dataclass(frozen=True)
class Import:
    """One import of a module of ours (or, for purity, any module) found in ``source``."""

    source: str  # module name of the importing file
    target: str  # imported module (absolute)
    line: int
    local: bool  # inside a function
    typing_only: bool  # under ``if TYPE_CHECKING:``
    deferred_comment: bool


def module_name(path: Path) -> str:
    rel = path.relative_to(ROOT).with_suffix("")
    parts = [PACKAGE, *rel.parts]
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def unit_of(module: str) -> str:
    """The layer unit of a module of ours: the most specific entry of :data:`LAYER` that is it or contains it (its
    subpackage or top-level module; ``__init__`` for the package)."""
    parts = module.split(".")[1:]
    for end in range(len(parts), 0, -1):
        if ".".join(parts[:end]) in LAYER:
            return ".".join(parts[:end])
    return parts[0] if parts else "__init__"


def imports_in(source: str, module: str, is_package: bool) -> Iterator[Import]:
    """Every import statement of ``source`` (the file of ``module``), resolved to absolute module names."""
    lines = source.splitlines()
    tree = ast.parse(source)

    def visit(node: ast.AST, local: bool, typing_only: bool) -> Iterator[Import]:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
                yield from visit(child, True, typing_only)
            elif isinstance(child, ast.If) and "TYPE_CHECKING" in ast.unparse(child.test):
                yield from visit(child, local, True)
            elif isinstance(child, (ast.Import, ast.ImportFrom)):
                comment = "deferred" in lines[child.lineno - 1]
                for target in _targets(child, module, is_package):
                    yield Import(module, target, child.lineno, local, typing_only, comment)
            else:
                yield from visit(child, local, typing_only)

    yield from visit(tree, False, False)


def _targets(node: ast.Import | ast.ImportFrom, module: str, is_package: bool) -> list[str]:
    if isinstance(node, ast.Import):
        return [alias.name for alias in node.names]
    base = node.module or ""
    if node.level:
        anchor = module.split(".")
        anchor = anchor if is_package else anchor[:-1]
        anchor = anchor[: len(anchor) - (node.level - 1)]
        base = ".".join([*anchor, base] if base else anchor)
    # ``from pkg import name`` may name a submodule: count the submodule when it exists
    found = []
    for alias in node.names:
        candidate = f"{base}.{alias.name}"
        found.append(candidate if _is_our_module(candidate) else base)
    return found


def _is_our_module(name: str) -> bool:
    if not name.startswith(PACKAGE + "."):
        return False
    rel = Path(*name.split(".")[1:])
    return (ROOT / rel).with_suffix(".py").exists() or (ROOT / rel / "__init__.py").exists()


def all_imports() -> list[Import]:
    found = []
    for path in sorted(ROOT.rglob("*.py")):
        found.extend(imports_in(path.read_text(), module_name(path), path.name == "__init__.py"))
    return found


def violations(found: list[Import]) -> list[str]:
    """Every breach of the contract, one line each (``file:line: what``)."""
    out = []
    for imp in found:
        where = f"{imp.source}:{imp.line}"
        ours = imp.target == PACKAGE or imp.target.startswith(PACKAGE + ".")
        src_unit = unit_of(imp.source)
        if not ours:
            top = imp.target.split(".")[0]
            if src_unit in PURE and top not in sys.stdlib_module_names and top != "__future__":
                out.append(f"{where}: the pure core imports {imp.target!r} (only the standard library is allowed)")
            if (src_unit in PROTOCOL and top not in sys.stdlib_module_names and top != "__future__"
                    and top not in PROTOCOL[src_unit]):
                out.append(f"{where}: the store's protocol imports {imp.target!r} (it belongs to store.dataplane)")
            continue
        dst_unit = unit_of(imp.target)
        outside = not (src_unit == "store" or src_unit.startswith("store."))
        if outside and (dst_unit == "store" or dst_unit.startswith("store.")) and not _a_face(imp):
            out.append(f"{where}: {imp.target!r} is not one of the store's faces for {_top(imp.source)} (FACES)")
        if src_unit in PURE and dst_unit not in PURE:
            out.append(f"{where}: the pure core imports {imp.target!r}")
        if dst_unit != src_unit and LAYER[dst_unit] >= LAYER[src_unit] and (src_unit, dst_unit) not in SIDEWAYS:
            out.append(f"{where}: upward import of {imp.target!r} ({src_unit} is layer {LAYER[src_unit]}, "
                       f"{dst_unit} is layer {LAYER[dst_unit]})")
        if imp.local and not imp.typing_only and not imp.deferred_comment:
            out.append(f"{where}: function-local import of {imp.target!r} without a '# deferred: why' comment")
    return out


def _top(module: str) -> str:
    """The top-level unit of a module of ours (``spark`` for ``spark.store_io``)."""
    parts = module.split(".")[1:]
    return parts[0] if parts else "__init__"


def _face_of(target: str) -> str | None:
    """The :data:`FACES` entry ``target`` (a module of ours) is, or lies in."""
    name = target.removeprefix(PACKAGE + ".")
    return next((face for face in FACES if name == face or name.startswith(face + ".")), None)


def _a_face(imp: Import) -> bool:
    face = _face_of(imp.target)
    if face is None:
        return False
    allowed = FACES[face]
    return allowed is EVERYONE or _top(imp.source) in allowed


def cycles(found: list[Import]) -> list[list[str]]:
    """Cycles among our modules through any import: module-level, function-local (a deferred import only hides a
    circle from the interpreter) or under ``TYPE_CHECKING`` (the two modules still need each other to be read)."""
    graph: dict[str, set[str]] = {}
    for imp in found:
        if not _is_our_module(imp.target):
            continue
        if imp.target != imp.source and not imp.source.startswith(imp.target + "."):  # a package's own parent
            graph.setdefault(imp.source, set()).add(imp.target)
    out, state = [], {}

    def walk(node: str, path: list[str]) -> None:
        state[node] = 1
        for nxt in sorted(graph.get(node, ())):
            if state.get(nxt) == 1:
                out.append([*path[path.index(nxt):], nxt] if nxt in path else [node, nxt])
            elif nxt not in state:
                walk(nxt, [*path, nxt])
        state[node] = 2

    for node in sorted(graph):
        if node not in state:
            walk(node, [node])
    return out


def test_every_unit_has_a_layer() -> None:
    units = {unit_of(module_name(p)) for p in ROOT.rglob("*.py")}
    assert units <= set(LAYER), f"give these a layer in ARCHITECTURE.md and here: {sorted(units - set(LAYER))}"


def test_imports_follow_the_layers() -> None:
    assert violations(all_imports()) == []


def test_every_sideways_exception_is_used() -> None:
    """The exceptions list says what is true today: an entry no import needs is removed, not kept in reserve."""
    used = {(unit_of(i.source), unit_of(i.target)) for i in all_imports()
            if i.target == PACKAGE or i.target.startswith(PACKAGE + ".")}
    assert SIDEWAYS - used == set()


def test_every_face_is_used() -> None:
    """The faces say what is true today: a unit no import needs is taken off its face, a face nothing imports is
    removed."""
    used: set[tuple[str, str]] = set()
    for imp in all_imports():
        face = _face_of(imp.target) if imp.target.startswith(PACKAGE + ".store") else None
        if face is not None and not unit_of(imp.source).startswith("store"):
            used.add((face, _top(imp.source)))
    named = {(face, unit) for face, units in FACES.items() if units is not EVERYONE for unit in units}
    assert named - used == set()
    assert {face for face in FACES if FACES[face] is EVERYONE} - {face for face, _ in used} == set()


def test_no_import_cycles() -> None:
    assert cycles(all_imports()) == []


@pytest.mark.parametrize("source, unit, expected", [
    ("from airflow_region_failover.plugins.clearing import SERVICES", "store", "upward import"),
    ("def f():\n    from airflow_region_failover.spark import session\n", "operators", "without a '# deferred"),
    ("import boto3", "failover", "pure core imports 'boto3'"),
    ("from airflow_region_failover.job import JobSpec", "graph", "pure core imports"),
    # a module with a layer of its own inside a package: the declaration may not import its package's operator
    ("from airflow_region_failover.publication.operator import RegionPublishOperator", "publication.declaration",
     "upward import"),
    ("from airflow_region_failover.observability import metrics", "spark", "upward import"),
    # the store's protocol stays free of the data plane's libraries; boto3 only where S3 is reached
    ("import pyspark.sql", "store", "the store's protocol imports 'pyspark.sql'"),
    ("from pyarrow import parquet", "store.gc", "the store's protocol imports 'pyarrow'"),
    ("import boto3", "store", "the store's protocol imports 'boto3'"),
    ("from airflow_region_failover.store.dataplane.parquet import write_arrow", "store", "upward import"),
    # outside the store, only its faces
    ("from airflow_region_failover.store.dataplane.local_write import write", "plugins",
     "not one of the store's faces"),
    ("from airflow_region_failover.store.dataplane.reading import load_table", "operators",
     "not one of the store's faces"),
    ("from airflow_region_failover.store import content", "spark", "not one of the store's faces"),
])
def test_the_contract_catches_what_it_forbids(source: str, unit: str, expected: str) -> None:
    """The checker itself: an upward import, an unexplained local import, an impure core or protocol import and an
    import of the store past its faces are flagged."""
    found = list(imports_in(source, f"{PACKAGE}.{unit}.probe", False))
    assert any(expected in v for v in violations(found)), violations(found)


def test_cycles_are_found() -> None:
    a = Import(f"{PACKAGE}.graph.model", f"{PACKAGE}.graph.validation", 1, False, False, False)
    b = Import(f"{PACKAGE}.graph.validation", f"{PACKAGE}.graph.model", 1, False, False, False)
    assert cycles([a, b])


@pytest.mark.parametrize("local, typing_only", [(True, False), (False, True)])
def test_cycles_through_deferred_or_typing_imports_are_found(local: bool, typing_only: bool) -> None:
    a = Import(f"{PACKAGE}.store.s3.objects", f"{PACKAGE}.store.s3.upload", 1, local, typing_only, local)
    b = Import(f"{PACKAGE}.store.s3.upload", f"{PACKAGE}.store.s3.objects", 1, False, False, False)
    assert cycles([a, b])

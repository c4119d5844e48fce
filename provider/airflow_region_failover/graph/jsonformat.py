"""The JSON format of a job graph (documented in the README), version 1::

    {"version": 1,
     "steps": [{"id": "gen", "parallelism": 4, "deterministic": false}, ...],
     "edges": [{"from": "gen", "to": "clean", "exchange": "PIPELINED",
                "distribution": "POINTWISE", "result": "rows"}, ...]}

``parallelism`` (default 1), ``deterministic`` (default false), ``distribution`` (default ``ALL_TO_ALL``) and
``result`` (default ``"<from>-><to>"``) are optional. Unknown keys and versions are errors naming the key.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from airflow_region_failover.graph.errors import GraphError
from airflow_region_failover.graph.model import Distribution, Edge, Exchange, JobGraph, Step

FORMAT_VERSION = 1
_STEP_KEYS = {"id", "parallelism", "deterministic"}
_EDGE_KEYS = {"from", "to", "exchange", "distribution", "result"}


def loads(text: str) -> JobGraph:
    """Parse and validate a job graph from JSON text."""
    try:
        document = json.loads(text)
    except json.JSONDecodeError as exc:
        raise GraphError(f"job graph is not valid JSON: {exc}") from None
    return from_dict(document)


def load(path: str) -> JobGraph:
    """Parse and validate the job graph in the JSON file ``path``."""
    try:
        with open(path, encoding="utf-8") as handle:
            text = handle.read()
    except OSError as exc:
        raise GraphError(f"cannot read job graph {path!r}: {exc.strerror}") from None
    return loads(text)


def from_dict(document: object) -> JobGraph:
    """Build a validated graph from the decoded JSON document."""
    doc = _mapping(document, "job graph", {"version", "steps", "edges"})
    if doc.get("version") != FORMAT_VERSION:
        raise GraphError(f"job graph: 'version' {doc.get('version')!r} is unsupported; use {FORMAT_VERSION}")
    steps = [_step(s, i) for i, s in enumerate(_list(doc.get("steps", []), "steps"))]
    edges = [_edge(e, i) for i, e in enumerate(_list(doc.get("edges", []), "edges"))]
    return JobGraph.of(steps, edges)


def to_dict(graph: JobGraph) -> dict[str, Any]:
    """The JSON document of ``graph`` (round-trips through :func:`from_dict`)."""
    return {
        "version": FORMAT_VERSION,
        "steps": [{"id": s.id, "parallelism": s.parallelism, "deterministic": s.deterministic} for s in graph.steps],
        "edges": [
            {
                "from": e.source,
                "to": e.target,
                "exchange": e.exchange.value,
                "distribution": e.distribution.value,
                "result": e.result,
            }
            for e in graph.edges
        ],
    }


def dumps(graph: JobGraph) -> str:
    """``graph`` as indented JSON text."""
    return json.dumps(to_dict(graph), indent=2)


def _step(raw: object, i: int) -> Step:
    doc = _mapping(raw, f"steps[{i}]", _STEP_KEYS)
    if "id" not in doc:
        raise GraphError(f"steps[{i}]: missing 'id'")
    return Step(doc["id"], doc.get("parallelism", 1), doc.get("deterministic", False))


def _edge(raw: object, i: int) -> Edge:
    doc = _mapping(raw, f"edges[{i}]", _EDGE_KEYS)
    for key in ("from", "to", "exchange"):
        if key not in doc:
            raise GraphError(f"edges[{i}]: missing {key!r}")
    where = f"edge {doc['from']!r} -> {doc['to']!r}"
    result = doc.get("result") or ""
    if not isinstance(result, str):
        raise GraphError(f"{where}: result {result!r} must be a string")
    return Edge(
        doc["from"],
        doc["to"],
        Exchange.parse(doc["exchange"], where=where),
        Distribution.parse(doc.get("distribution", "ALL_TO_ALL"), where=where),
        result,
    )


def _mapping(raw: object, where: str, allowed: set[str]) -> Mapping[str, Any]:
    if not isinstance(raw, dict):
        raise GraphError(f"{where}: expected a JSON object, got {type(raw).__name__}")
    unknown = sorted(set(raw) - allowed)
    if unknown:
        raise GraphError(f"{where}: unknown key {unknown[0]!r}; allowed keys: {', '.join(sorted(allowed))}")
    return raw


def _list(raw: object, where: str) -> list[object]:
    if not isinstance(raw, list):
        raise GraphError(f"job graph: {where!r} must be a JSON list")
    return raw

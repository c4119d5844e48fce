"""The JSON format of a job graph (documented in docs/reference/json-format.md), version 2::

    {"version": 2,
     "steps": [{"id": "gen", "parallelism": 4, "deterministic": false}, ...],
     "edges": [{"from": "gen", "to": "clean", "exchange": "PIPELINED",
                "distribution": "POINTWISE", "result": "rows"},
               {"from": "clean", "to": "join", "exchange": "BLOCKING",
                "distribution": "ALL_TO_ALL", "partition_by": ["o_orderkey"], "max_parallelism": 128,
                "cluster_by": ["o_orderdate"], "columns": ["o_orderkey", "o_orderdate", "o_total"]}, ...]}

``parallelism`` (default 1), ``deterministic`` and ``rescalable`` (default false; ``rescalable`` written only when
true), ``result`` (default ``"<from>-><to>"``),
``partition_by`` and ``max_parallelism`` (keyed ``ALL_TO_ALL`` edges only; default 128) are optional;
``exchange`` is ``PIPELINED``, ``BLOCKING`` or ``AUTO`` (the provider chooses per run, :mod:`.auto`);
``cluster_by`` (BLOCKING or AUTO edges: sorted, content-defined files) and ``columns`` (BLOCKING or AUTO
edges: the columns the persisted result keeps) are optional and written only when set, so documents without
them are unchanged (still version 2); ``distribution`` defaults to ``ALL_TO_ALL`` on an edge with
``partition_by`` and to ``BROADCAST`` otherwise.
Version 1 (no keys) is still read: its ``ALL_TO_ALL`` (also its default) meant every consumer reads every
partition whole, and is read as ``BROADCAST`` with a deprecation warning; in version 2 ``ALL_TO_ALL`` without
``partition_by`` is an error. Unknown keys and versions are errors naming the key. :func:`to_dict` writes
version 2.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from airflow_region_failover.graph.errors import GraphError
from airflow_region_failover.graph.model import Distribution, Edge, Exchange, JobGraph, Step

FORMAT_VERSION = 2
READ_VERSIONS = (1, 2)
_STEP_KEYS = {"id", "parallelism", "deterministic", "rescalable"}
_EDGE_KEYS = {1: {"from", "to", "exchange", "distribution", "result"},
              2: {"from", "to", "exchange", "distribution", "result", "partition_by", "max_parallelism",
                  "cluster_by", "columns"}}


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
    version = doc.get("version")
    if isinstance(version, bool) or version not in READ_VERSIONS:
        raise GraphError(f"job graph: 'version' {version!r} is unsupported; use {FORMAT_VERSION}")
    steps = [_step(s, i) for i, s in enumerate(_list(doc.get("steps", []), "steps"))]
    edges = [_edge(e, i, version) for i, e in enumerate(_list(doc.get("edges", []), "edges"))]
    return JobGraph.of(steps, edges)


def to_dict(graph: JobGraph) -> dict[str, Any]:
    """The JSON document of ``graph`` (round-trips through :func:`from_dict`)."""
    return {
        "version": FORMAT_VERSION,
        "steps": [_step_dict(s) for s in graph.steps],
        "edges": [_edge_dict(e) for e in graph.edges],
    }


def _step_dict(step: Step) -> dict[str, Any]:
    body: dict[str, Any] = {"id": step.id, "parallelism": step.parallelism, "deterministic": step.deterministic}
    if step.rescalable:
        body["rescalable"] = True
    return body


def _edge_dict(edge: Edge) -> dict[str, Any]:
    body: dict[str, Any] = {"from": edge.source, "to": edge.target, "exchange": edge.exchange.value,
                            "distribution": edge.distribution.value, "result": edge.result}
    if edge.keyed:
        body["partition_by"] = list(edge.partition_by)
        body["max_parallelism"] = edge.max_parallelism
    if edge.cluster_by:
        body["cluster_by"] = list(edge.cluster_by)
    if edge.columns:
        body["columns"] = list(edge.columns)
    return body


def dumps(graph: JobGraph) -> str:
    """``graph`` as indented JSON text."""
    return json.dumps(to_dict(graph), indent=2)


def _step(raw: object, i: int) -> Step:
    doc = _mapping(raw, f"steps[{i}]", _STEP_KEYS)
    if "id" not in doc:
        raise GraphError(f"steps[{i}]: missing 'id'")
    return Step(doc["id"], doc.get("parallelism", 1), doc.get("deterministic", False), doc.get("rescalable", False))


def _edge(raw: object, i: int, version: int) -> Edge:
    doc = _mapping(raw, f"edges[{i}]", _EDGE_KEYS[version])
    for key in ("from", "to", "exchange"):
        if key not in doc:
            raise GraphError(f"edges[{i}]: missing {key!r}")
    for key in ("from", "to"):
        if not isinstance(doc[key], str):
            raise GraphError(f"edges[{i}]: {key!r} {doc[key]!r} must be a step id (a string), e.g. \"{key}\": "
                             "\"extract\"")
    where = f"edge {doc['from']!r} -> {doc['to']!r}"
    result = doc.get("result") or ""
    if not isinstance(result, str):
        raise GraphError(f"{where}: result {result!r} must be a string")
    partition_by = doc.get("partition_by", [])
    if not isinstance(partition_by, list):
        raise GraphError(f"{where}: partition_by {partition_by!r} must be a JSON list of column names")
    cluster_by = doc.get("cluster_by", [])
    if not isinstance(cluster_by, list):
        raise GraphError(f"{where}: cluster_by {cluster_by!r} must be a JSON list of column names")
    columns = doc.get("columns", [])
    if not isinstance(columns, list):
        raise GraphError(f"{where}: columns {columns!r} must be a JSON list of column names")
    default = "ALL_TO_ALL" if version == 1 or partition_by else "BROADCAST"
    distribution = Distribution.parse(doc.get("distribution", default), where=where)
    if version >= 2 and distribution is Distribution.ALL_TO_ALL and not partition_by:
        raise GraphError(f"{where}: distribution ALL_TO_ALL needs \"partition_by\": [<key columns>] (a keyed "
                         "exchange: each consumer reads only its keys); for every consumer reading every "
                         "partition whole say \"BROADCAST\"")
    return Edge(doc["from"], doc["to"], Exchange.parse(doc["exchange"], where=where), distribution, result,
                tuple(partition_by), doc.get("max_parallelism", 0), tuple(cluster_by), tuple(columns))


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

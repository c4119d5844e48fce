"""Validation of a job graph: every rule raises a one-line :class:`GraphError` naming the offender and the fix.

Rules: step ids are valid (:mod:`.ids`) and unique; ``parallelism`` is an int in ``[1, 32768]`` (Flink's upper
bound of max parallelism, :data:`~.keygroups.UPPER_MAX_PARALLELISM`: every subtask is an Airflow task, and every
partition index stays below the store's key limit of 10**6); ``deterministic`` is a bool; every edge joins two
known, distinct steps, each named by its id (a string); a result name is valid, belongs to one producer and has
one exchange; a step consumes a result at most once; the steps form no cycle. Exchanges: ``partition_by``
(non-empty, unique column names) only on ``ALL_TO_ALL`` edges, whose ``max_parallelism`` (default
:data:`~.keygroups.DEFAULT_MAX_PARALLELISM`) is at least the consumer's parallelism; an ``ALL_TO_ALL`` edge
without ``partition_by`` is the deprecated spelling of ``BROADCAST`` (accepted with a
:class:`DistributionDeprecation` warning); the keyed consumers of one result agree on its key, key groups and
parallelism (one result is cut into subpartitions one way). ``cluster_by`` (non-empty, unique column names)
only on BLOCKING (or AUTO: they apply when the plan persists the result) edges; the edges of one result that
declare it agree on it (an edge without it inherits it:
one result is stored one way). ``columns`` (non-empty, unique column names: the columns the persisted result
keeps) the same, and they include every ``partition_by`` and ``cluster_by`` column of the result's edges (the
producer cuts and sorts what it keeps). Steps come back in a deterministic topological
order (ties broken by declaration order), edges with their result names resolved.
"""

from __future__ import annotations

import heapq
import warnings
from collections.abc import Callable
from dataclasses import replace
from typing import Any

from airflow_region_failover.graph.elements import Distribution, Edge, Exchange, Step
from airflow_region_failover.graph.errors import GraphError
from airflow_region_failover.graph.ids import check_result_id, check_step_id, default_result_id
from airflow_region_failover.graph.keygroups import DEFAULT_MAX_PARALLELISM, UPPER_MAX_PARALLELISM


class DistributionDeprecation(FutureWarning):
    """An ``ALL_TO_ALL`` edge without ``partition_by``: read as ``BROADCAST`` (the old meaning)."""


def validate(steps: tuple[Step, ...], edges: tuple[Edge, ...]) -> tuple[tuple[Step, ...], tuple[Edge, ...]]:
    """Check ``steps`` and ``edges``; return the steps in topological order and the resolved edges."""
    declared: dict[str, int] = {}
    for i, step in enumerate(steps):
        if declared.setdefault(_check_step(step), i) != i:
            raise GraphError(f"duplicate step id {step.id!r}; every step needs its own id")
    resolved = tuple(_check_edge(edge, declared, steps) for edge in edges)
    _check_results(resolved)
    _check_keyed_results(resolved, steps, declared)
    _check_clustered_results(resolved)
    _check_kept_columns(resolved)
    order = _topological_order(steps, resolved, declared)
    return tuple(steps[declared[s]] for s in order), resolved


def _check_step(step: Step) -> str:
    check_step_id(step.id)
    where = f"step {step.id!r}"
    parallelism = step.parallelism
    if isinstance(parallelism, bool) or not isinstance(parallelism, int) or parallelism < 1:
        raise GraphError(f"{where}: parallelism {parallelism!r} must be an integer >= 1")
    if parallelism > UPPER_MAX_PARALLELISM:
        raise GraphError(f"{where}: parallelism {parallelism} must be an integer between 1 and "
                         f"{UPPER_MAX_PARALLELISM} (one Airflow task per subtask; Flink's upper bound); lower it")
    if not isinstance(step.deterministic, bool):
        raise GraphError(f"{where}: deterministic {step.deterministic!r} must be true or false")
    if not isinstance(step.rescalable, bool):
        raise GraphError(f"{where}: rescalable {step.rescalable!r} must be true or false")
    return step.id


def _check_edge(edge: Edge, declared: dict[str, int], steps: tuple[Step, ...]) -> Edge:
    where = f"edge {edge.source!r} -> {edge.target!r}"
    for end in (edge.source, edge.target):
        if not isinstance(end, str):
            raise GraphError(f"{where}: {end!r} is not a step id; name each end by its step's id, e.g. 'extract'")
        if end not in declared:
            known = ", ".join(declared) or "none"
            raise GraphError(f"{where}: unknown step {end!r}; declare it first (known steps: {known})")
    if edge.source == edge.target:
        raise GraphError(f"{where}: self-loop on step {edge.source!r}; a step cannot consume its own result")
    exchange = Exchange.parse(edge.exchange, where=where)
    distribution = Distribution.parse(edge.distribution, where=where)
    result = edge.result or default_result_id(edge.source, edge.target)
    try:
        check_result_id(result)
    except GraphError as exc:
        raise GraphError(f"{where}: {exc}") from None
    edge = replace(edge, exchange=exchange, distribution=distribution, result=result)
    edge = _check_key(edge, where, steps[declared[edge.target]].parallelism)
    return _check_persisted_columns(_check_persisted_columns(edge, "cluster_by", where), "columns", where)


def _column_list(columns: object, option: str, where: str) -> tuple[str, ...]:
    """A list of distinct, non-empty column names (``partition_by``, ``cluster_by``, ``columns``) as a tuple."""
    if isinstance(columns, str) or not isinstance(columns, (tuple, list)):
        raise GraphError(f"{where}: {option}={columns!r} must be a list of column names, e.g. ['customer_id']")
    if any(not isinstance(c, str) or not c.strip() for c in columns) or len(set(columns)) != len(columns):
        raise GraphError(f"{where}: {option}={list(columns)!r} must name distinct, non-empty columns")
    return tuple(columns)


def _check_persisted_columns(edge: Edge, option: str, where: str) -> Edge:
    """The per-edge rules of ``cluster_by`` and ``columns`` (module docstring): a column list on a BLOCKING edge
    only; the edge with it as a tuple."""
    columns = _column_list(getattr(edge, option), option, where)
    if columns and edge.exchange is Exchange.PIPELINED:
        raise GraphError(f"{where}: {option} applies to BLOCKING (persisted) results, not "
                         f"{edge.exchange.value}; use exchange='BLOCKING' (or 'AUTO') or drop {option}")
    changes: dict[str, Any] = {option: columns}
    return replace(edge, **changes)


def _agreeing(edges: tuple[Edge, ...], option: str, says: Callable[[Edge, Edge], str]) -> dict[str, Edge]:
    """The first edge of each result that declares ``option``; another edge of that result declaring something
    else is a :class:`GraphError` worded by ``says(edge, first)`` (one result is stored one way)."""
    first: dict[str, Edge] = {}
    for edge in edges:
        if not getattr(edge, option):
            continue
        seen = first.setdefault(edge.result, edge)
        if getattr(seen, option) != getattr(edge, option):
            raise GraphError(says(edge, seen))
    return first


def _check_clustered_results(edges: tuple[Edge, ...]) -> None:
    """The edges of one result that declare ``cluster_by`` declare the same columns."""
    _agreeing(edges, "cluster_by", lambda edge, seen: (
        f"edge {edge.source!r} -> {edge.target!r}: result {edge.result!r} is already clustered by "
        f"{list(seen.cluster_by)} on {seen}, here by {list(edge.cluster_by)}; one result is stored one "
        "way, so declare the same cluster_by (or none) on this edge"))


def _check_kept_columns(edges: tuple[Edge, ...]) -> None:
    """The edges of one result that declare ``columns`` declare the same ones, which include every key and
    cluster column of the result's edges."""
    kept = _agreeing(edges, "columns", lambda edge, seen: (
        f"edge {edge.source!r} -> {edge.target!r}: result {edge.result!r} keeps columns "
        f"{list(seen.columns)} on {seen}, here {list(edge.columns)}; one result is stored one way, so "
        "declare the same columns (every consumer's) on each of its edges, or none"))
    for edge in edges:
        holder = kept.get(edge.result)
        missing = [] if holder is None else [c for c in (*edge.partition_by, *edge.cluster_by)
                                             if c not in holder.columns]
        if holder is not None and missing:
            raise GraphError(
                f"edge {edge.source!r} -> {edge.target!r}: result {edge.result!r} keeps only columns "
                f"{list(holder.columns)} ({holder}), without {missing[0]!r}, which this edge partitions or "
                f"clusters by; add {missing[0]!r} to columns")


def _check_key(edge: Edge, where: str, consumers: int) -> Edge:
    """The ``partition_by`` / ``max_parallelism`` rules of the module docstring; the edge with them resolved."""
    columns = _column_list(edge.partition_by, "partition_by", where)
    if columns and edge.distribution is not Distribution.ALL_TO_ALL:
        raise GraphError(f"{where}: partition_by applies to ALL_TO_ALL (keyed) exchanges, not "
                         f"{edge.distribution.value}; use distribution='ALL_TO_ALL' or drop partition_by")
    if not columns:
        if edge.max_parallelism:
            raise GraphError(f"{where}: max_parallelism applies to keyed exchanges; add partition_by or drop it")
        if edge.distribution is Distribution.ALL_TO_ALL:
            warnings.warn(f"{where}: ALL_TO_ALL without partition_by means every consumer subtask reads every "
                          "producer partition whole; that is now spelled distribution='BROADCAST'. Say "
                          "BROADCAST, or add partition_by=[...] for a keyed exchange (each consumer reads its keys "
                          "only)", DistributionDeprecation, stacklevel=2)
            return replace(edge, distribution=Distribution.BROADCAST)
        return edge
    limit = edge.max_parallelism or DEFAULT_MAX_PARALLELISM
    if isinstance(limit, bool) or not isinstance(limit, int) or not consumers <= limit <= UPPER_MAX_PARALLELISM:
        raise GraphError(f"{where}: max_parallelism {edge.max_parallelism!r} must be an integer between the "
                         f"consumer's parallelism ({consumers}) and {UPPER_MAX_PARALLELISM}; raise it")
    return replace(edge, partition_by=tuple(columns), max_parallelism=limit)


def _check_keyed_results(edges: tuple[Edge, ...], steps: tuple[Step, ...], declared: dict[str, int]) -> None:
    """The keyed consumers of one result share its key, key groups and parallelism."""
    first: dict[str, tuple[Edge, int]] = {}
    for edge in edges:
        if not edge.keyed:
            continue
        parallelism = steps[declared[edge.target]].parallelism
        seen, seen_parallelism = first.setdefault(edge.result, (edge, parallelism))
        if (seen.partition_by, seen.max_parallelism, seen_parallelism) != (edge.partition_by,
                                                                            edge.max_parallelism, parallelism):
            raise GraphError(
                f"edge {edge.source!r} -> {edge.target!r}: result {edge.result!r} is already partitioned by "
                f"{list(seen.partition_by)} into {seen_parallelism} subpartitions of {seen.max_parallelism} key "
                f"groups for {seen}; one result is cut one way, so give this edge its own result name")


def _check_results(edges: tuple[Edge, ...]) -> None:
    first: dict[str, Edge] = {}
    consumed: set[tuple[str, str]] = set()
    for edge in edges:
        where = f"edge {edge.source!r} -> {edge.target!r}"
        seen = first.setdefault(edge.result, edge)
        if seen.source != edge.source:
            raise GraphError(
                f"{where}: result {edge.result!r} is already produced by step {seen.source!r}; "
                "give this result another name"
            )
        if seen.exchange is not edge.exchange:
            raise GraphError(
                f"{where}: result {edge.result!r} is {seen.exchange.value} on {seen} but {edge.exchange.value} "
                "here; one result has one exchange"
            )
        if (edge.result, edge.target) in consumed:
            raise GraphError(f"{where}: duplicate edge; step {edge.target!r} already consumes {edge.result!r}")
        consumed.add((edge.result, edge.target))


def _topological_order(steps: tuple[Step, ...], edges: tuple[Edge, ...], declared: dict[str, int]) -> list[str]:
    """Kahn's algorithm, smallest declaration index first; a leftover means a cycle, which is named."""
    successors: dict[str, list[str]] = {s.id: [] for s in steps}
    indegree = dict.fromkeys(successors, 0)
    for edge in edges:
        successors[edge.source].append(edge.target)
        indegree[edge.target] += 1
    ready = [declared[s] for s, d in indegree.items() if d == 0]
    heapq.heapify(ready)
    order: list[str] = []
    while ready:
        step = steps[heapq.heappop(ready)].id
        order.append(step)
        for nxt in successors[step]:
            indegree[nxt] -= 1
            if indegree[nxt] == 0:
                heapq.heappush(ready, declared[nxt])
    if len(order) < len(steps):
        raise GraphError(f"cycle among steps: {' -> '.join(_find_cycle(successors, indegree))}; remove an edge")
    return order


def _find_cycle(successors: dict[str, list[str]], indegree: dict[str, int]) -> list[str]:
    """Every step Kahn left over has a left-over predecessor: walk predecessors until one repeats."""
    left = {s for s, d in indegree.items() if d > 0}
    predecessors: dict[str, list[str]] = {s: [] for s in left}
    for source, targets in successors.items():
        for target in targets:
            if source in left and target in left:
                predecessors[target].append(source)
    step = min(left)
    path: list[str] = []
    position: dict[str, int] = {}
    while step not in position:
        position[step] = len(path)
        path.append(step)
        step = min(predecessors[step])
    cycle = [*path[position[step] :], step]
    return cycle[::-1]

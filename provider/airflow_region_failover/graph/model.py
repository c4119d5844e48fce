"""The job graph: steps (job vertices) and the edges through which their results flow.

A :class:`JobGraph` is an immutable, validated value. Build it with :class:`~.builder.JobGraphBuilder`, from
JSON with :func:`~.jsonformat.loads`, or directly with :meth:`JobGraph.of` (which validates). Rules:

* a step has a unique id and ``parallelism`` >= 1; ``deterministic`` declares that re-running it on the same
  inputs produces byte-identical output;
* an edge ``source -> target`` carries the result named ``result`` (default ``"<source>-><target>"``); edges from
  one producer that name the same result share it (one result, one set of partitions, several consumers), so
  they must agree on the exchange;
* the steps form a DAG (no self-loop, no cycle); there is at most one edge per (result, target).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from functools import cached_property

from airflow_region_failover.graph.elements import Distribution, Edge, Exchange, Step
from airflow_region_failover.graph.errors import GraphError
from airflow_region_failover.graph.validation import validate

__all__ = ["Distribution", "Edge", "Exchange", "JobGraph", "Result", "Step"]


@dataclass(frozen=True)
class Result:
    """An intermediate result: produced by ``producer`` (one partition per producer subtask)."""

    id: str
    producer: str
    exchange: Exchange
    consumers: tuple[Edge, ...]


@dataclass(frozen=True)
class JobGraph:
    """A validated job graph. Steps are kept in a deterministic topological order (ties by declaration)."""

    steps: tuple[Step, ...]
    edges: tuple[Edge, ...]
    _index: Mapping[str, Step] = field(default_factory=dict, compare=False, repr=False)

    @classmethod
    def of(cls, steps: Iterable[Step], edges: Iterable[Edge]) -> JobGraph:
        """Validate and build a graph (see :func:`~.validation.validate` for the rules and messages)."""
        ordered_steps, resolved_edges = validate(tuple(steps), tuple(edges))
        return cls(ordered_steps, resolved_edges, {s.id: s for s in ordered_steps})

    def step(self, step_id: str) -> Step:
        """The step named ``step_id``; :class:`GraphError` naming it if there is none."""
        try:
            return self._index[step_id]
        except KeyError:
            raise GraphError(f"unknown step {step_id!r}; known steps: {', '.join(self._index)}") from None

    @cached_property
    def results(self) -> tuple[Result, ...]:
        """Every result, in order of first declaration."""
        by_id: dict[str, list[Edge]] = {}
        for edge in self.edges:
            by_id.setdefault(edge.result, []).append(edge)
        return tuple(Result(rid, es[0].source, es[0].exchange, tuple(es)) for rid, es in by_id.items())

    def result(self, result_id: str) -> Result:
        """The result named ``result_id``; :class:`GraphError` naming it if there is none."""
        for result in self.results:
            if result.id == result_id:
                return result
        raise GraphError(f"unknown result {result_id!r}; known results: {', '.join(r.id for r in self.results)}")

    def inputs(self, step_id: str) -> tuple[Edge, ...]:
        """The edges ``step_id`` consumes, in declaration order."""
        return tuple(e for e in self.edges if e.target == step_id)

    def outputs(self, step_id: str) -> tuple[Result, ...]:
        """The results ``step_id`` produces, in declaration order."""
        return tuple(r for r in self.results if r.producer == step_id)

    @property
    def subtask_count(self) -> int:
        """The number of subtasks (sum of parallelisms)."""
        return sum(s.parallelism for s in self.steps)

"""Operator chaining: which steps run together in one task, passing DataFrames in memory (Flink's chaining).

Rule (Flink's ``StreamingJobGraphGenerator.isChainable``, on a job graph): an edge ``s -> t`` is *chainable* when

1. it is ``PIPELINED`` (a BLOCKING result is persisted so that it can be re-read; chaining would drop that),
2. it is ``POINTWISE`` and ``parallelism(s) == parallelism(t)`` (subtask ``i`` reads exactly producer ``i``),
3. ``s``'s results have exactly one consumer edge in total — this one — (nobody else reads the interior), and
   ``t`` has exactly one input edge — this one — (its input comes from the chain alone), and
4. the caller did not *break* it (``breaks``: an edge whose two steps cannot share one Spark session, such as a
   script step, given with the reason).

A :class:`Chain` is a maximal linear sequence of steps joined by chainable edges (a step on no chainable edge is a
chain of one); chain subtask ``i`` runs subtask ``i`` of every step of the chain. A chainable edge is PIPELINED,
so its two ends are always in one failover region: a chain never crosses a region boundary, and the regions,
the planner and the history speak of the chain's steps as before. Every PIPELINED edge that is not chained gets
the reason (:meth:`Chains.why_not`), which its consumer's task logs before reading the producer's scratch
partition from the store.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from airflow_region_failover.graph.ids import SubtaskId
from airflow_region_failover.graph.model import Distribution, Edge, Exchange, JobGraph

EdgeKey = tuple[str, str]
"""An edge as ``(source step, target step)``."""


@dataclass(frozen=True)
class Chain:
    """Steps run one after another in one task (``steps[0]`` is the head, ``steps[-1]`` the tail)."""

    steps: tuple[str, ...]

    @property
    def head(self) -> str:
        """The first step: it reads the chain's inputs."""
        return self.steps[0]

    @property
    def tail(self) -> str:
        """The last step: it writes the chain's outputs."""
        return self.steps[-1]

    def subtasks(self, index: int) -> tuple[SubtaskId, ...]:
        """Chain subtask ``index``: subtask ``index`` of every step, head first."""
        return tuple(SubtaskId(step, index) for step in self.steps)

    def __str__(self) -> str:
        return " -> ".join(self.steps)


@dataclass(frozen=True)
class Chains:
    """The chains of a graph (in topological order of their heads) and why each other PIPELINED edge is not
    chained."""

    chains: tuple[Chain, ...]
    reasons: Mapping[EdgeKey, str] = field(repr=False)
    _of: Mapping[str, Chain] = field(repr=False, compare=False)

    def of(self, step_id: str) -> Chain:
        """The chain containing ``step_id`` (``KeyError`` for an unknown step)."""
        return self._of[step_id]

    def chained(self, edge: Edge) -> bool:
        """True if ``edge`` lies inside a chain (its data never leaves the task)."""
        chain = self._of.get(edge.source)
        return chain is not None and len(chain.steps) > 1 and chain is self._of.get(edge.target)

    def why_not(self, edge: Edge) -> str | None:
        """Why the PIPELINED ``edge`` is not chained (``None`` for a chained or a BLOCKING edge)."""
        return self.reasons.get((edge.source, edge.target))


def compute_chains(graph: JobGraph, breaks: Mapping[EdgeKey, str] | None = None) -> Chains:
    """The chains of ``graph`` (module rule); ``breaks``: edges the caller refuses to chain, with the reason."""
    breaks = breaks or {}
    consumer_edges: dict[str, int] = {}
    input_edges: dict[str, int] = {}
    for edge in graph.edges:
        consumer_edges[edge.source] = consumer_edges.get(edge.source, 0) + 1
        input_edges[edge.target] = input_edges.get(edge.target, 0) + 1
    following: dict[str, str] = {}
    reasons: dict[EdgeKey, str] = {}
    for edge in graph.edges:
        if edge.exchange is not Exchange.PIPELINED:
            continue
        reason = _why_not(graph, edge, consumer_edges, input_edges) or breaks.get((edge.source, edge.target))
        if reason is None:
            following[edge.source] = edge.target
        else:
            reasons[(edge.source, edge.target)] = reason
    preceded = set(following.values())
    chains: list[Chain] = []
    of: dict[str, Chain] = {}
    for step in graph.steps:  # topological order: a head comes before the rest of its chain
        if step.id in preceded:
            continue
        members = [step.id]
        while members[-1] in following:
            members.append(following[members[-1]])
        chain = Chain(tuple(members))
        chains.append(chain)
        of.update((member, chain) for member in members)
    return Chains(tuple(chains), reasons, of)


def _why_not(graph: JobGraph, edge: Edge, consumer_edges: Mapping[str, int],
             input_edges: Mapping[str, int]) -> str | None:
    """Rules 2-3 for one PIPELINED edge: the reason it is not chainable, or ``None``."""
    if edge.distribution is not Distribution.POINTWISE:
        return f"{edge.distribution.value} exchange"
    source, target = graph.step(edge.source).parallelism, graph.step(edge.target).parallelism
    if source != target:
        return f"parallelism {source} -> {target}"
    if consumer_edges[edge.source] != 1:
        return f"producer has {consumer_edges[edge.source]} consumers"
    if input_edges[edge.target] != 1:
        return f"consumer has {input_edges[edge.target]} inputs"
    return None

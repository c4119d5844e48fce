"""Exchange plans: what each ``AUTO`` result of a graph becomes for one run, and the concrete graph that follows.

Rules:

* an edge declared ``exchange="AUTO"`` leaves the choice to the provider; edges of one result share it (one
  result, one exchange), so a plan decides per AUTO *result* (named like its edge, ``"<from>-><to>"``, unless the
  edge names it);
* an :class:`ExchangePlan` maps every AUTO result to :class:`Choice` ``BLOCKING`` (committed to the store, as
  declared BLOCKING edges are) or ``FUSED`` (its producer and consumer regions merge into one region: Flink's
  pipelined region). An AUTO result the plan does not name is ``BLOCKING`` — the conservative default (the run
  measures what a later choice needs, and a failure restarts the least);
* :func:`resolve` turns a graph with AUTO edges into a concrete one: a ``BLOCKING`` result's edges become
  BLOCKING, a ``FUSED`` one's PIPELINED (``cluster_by`` and ``columns``, which shape a persisted result, are
  dropped). Regions, restart sets, chains and rendering then follow the plan through the existing algorithms,
  with no special case. Edges declared BLOCKING or PIPELINED are never changed;
* a plan naming a result that is not AUTO in the graph is an error naming it (a stale plan of an edited DAG);
* a rendered job keeps what it declared (:class:`AutoDeclaration`: its AUTO results, those no plan may fuse and
  why, and the plan it rendered), so its concrete graph can be turned back into the declared one a planner costs
  (:func:`redeclare`);
* a job rendered :data:`PER_RUN` renders every fusable AUTO result FUSED (the tasks never change between runs) and
  runs each run under that run's own plan, fixed when the run starts (:func:`run_choices`: a result the rendered
  structure does not fuse is BLOCKING whatever the run's plan says; a result the run's plan does not name, or that
  is no longer AUTO, is BLOCKING).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from enum import Enum
from typing import Any

from airflow_region_failover.graph.elements import Exchange
from airflow_region_failover.graph.errors import GraphError
from airflow_region_failover.graph.model import JobGraph


class PerRun(Enum):
    """The render mode in which each run chooses its own plan (module rule); its one value is :data:`PER_RUN`."""

    PER_RUN = "per-run"


PER_RUN = PerRun.PER_RUN
"""``job.render(plan=PER_RUN)``: static maximal fusion, each run's plan chosen between runs (module rule)."""


class Choice(str, Enum):
    """What an AUTO result becomes in a plan."""

    BLOCKING = "BLOCKING"
    FUSED = "FUSED"


@dataclass(frozen=True)
class ExchangePlan:
    """Per AUTO result id, its :class:`Choice`; results not named are BLOCKING (module rule).

    JSON: ``{"choices": {"clean->join": "FUSED", "join->report": "BLOCKING"}}`` (:meth:`to_json`).
    """

    choices: Mapping[str, Choice] = field(default_factory=dict)

    def choice(self, result_id: str) -> Choice:
        """The choice for ``result_id`` (BLOCKING when not named)."""
        return self.choices.get(result_id, Choice.BLOCKING)

    def with_choice(self, result_id: str, choice: Choice) -> ExchangePlan:
        """This plan with ``result_id`` set to ``choice``."""
        return ExchangePlan({**self.choices, result_id: choice})

    @property
    def fused(self) -> tuple[str, ...]:
        """The results this plan fuses, sorted."""
        return tuple(sorted(r for r, c in self.choices.items() if c is Choice.FUSED))

    def to_json(self) -> dict[str, Any]:
        """The JSON form (choices sorted by result id)."""
        return {"choices": {r: self.choices[r].value for r in sorted(self.choices)}}

    @classmethod
    def from_json(cls, document: object) -> ExchangePlan:
        """Parse :meth:`to_json`'s form; :class:`GraphError` naming the offending entry."""
        if not isinstance(document, dict) or set(document) != {"choices"} or not isinstance(document["choices"],
                                                                                           dict):
            raise GraphError(f"exchange plan {document!r} must be {{\"choices\": {{<result>: \"BLOCKING\" | "
                             "\"FUSED\"}}}")
        choices: dict[str, Choice] = {}
        for result_id, value in document["choices"].items():
            if value not in {c.value for c in Choice}:
                raise GraphError(f"exchange plan: result {result_id!r} has choice {value!r}; use BLOCKING or FUSED")
            choices[str(result_id)] = Choice(value)
        return cls(choices)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, ExchangePlan):
            return NotImplemented
        return _normal(self) == _normal(other)

    def __hash__(self) -> int:
        return hash(tuple(sorted(_normal(self).items())))


def _normal(plan: ExchangePlan) -> dict[str, Choice]:
    """The plan without its BLOCKING entries (they equal the default): two plans that run alike are equal."""
    return {r: c for r, c in plan.choices.items() if c is Choice.FUSED}


def auto_results(graph: JobGraph) -> tuple[str, ...]:
    """The ids of the graph's AUTO results, in order of first declaration."""
    return tuple(r.id for r in graph.results if r.exchange is Exchange.AUTO)


def all_of(graph: JobGraph, choice: Choice, pinned: frozenset[str] = frozenset()) -> ExchangePlan:
    """The plan giving every AUTO result ``choice`` — except ``pinned`` ones, which stay BLOCKING."""
    return ExchangePlan({r: Choice.BLOCKING if r in pinned else choice for r in auto_results(graph)})


def resolve(graph: JobGraph, plan: ExchangePlan) -> JobGraph:
    """The concrete graph of ``graph`` under ``plan`` (module rules): no AUTO edge left."""
    auto = set(auto_results(graph))
    stale = sorted(set(plan.choices) - auto)
    if stale:
        known = ", ".join(sorted(auto)) or "none"
        raise GraphError(f"exchange plan names result {stale[0]!r}, which is not an AUTO result of this graph "
                         f"(AUTO results: {known}); plan again for the current DAG")
    edges = []
    for edge in graph.edges:
        if edge.exchange is Exchange.AUTO and plan.choice(edge.result) is Choice.FUSED:
            edge = replace(edge, exchange=Exchange.PIPELINED, cluster_by=(), columns=())
        elif edge.exchange is Exchange.AUTO:
            edge = replace(edge, exchange=Exchange.BLOCKING)
        edges.append(edge)
    return JobGraph.of(graph.steps, edges)


@dataclass(frozen=True)
class AutoDeclaration:
    """What a rendered job declared AUTO (module rule): ``results``, in declaration order; ``pinned``: those no plan
    may fuse, with the reason; ``plan``: the plan it rendered; ``columns``: the columns an AUTO result keeps as its
    edges declare them (:func:`declared_columns`) — dropped from a fused result's edges by :func:`resolve`, and
    still what a fused region keeps of it in memory.

    ``per_run``: the job was rendered :data:`PER_RUN` (``plan`` is then its static structure, every fusable AUTO
    result FUSED, and each run runs its own plan, :func:`run_choices`). ``deadline_seconds``: the run budget the
    DAG's deadline alerts declare (:mod:`~airflow_region_failover.rendering.deadline`), which the planner then
    meets with the highest probability instead of minimising the mean.

    JSON: ``{"results": [...], "pinned": {<result>: <reason>}, "plan": {"choices": {...}}, "columns": {<result>:
    [...]}, "per_run": true, "deadline_seconds": 1800.0}`` (``columns`` only when some result declares them,
    ``per_run`` and ``deadline_seconds`` only when set)."""

    results: tuple[str, ...] = ()
    pinned: Mapping[str, str] = field(default_factory=dict)
    plan: ExchangePlan = field(default_factory=ExchangePlan)
    columns: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    per_run: bool = False
    deadline_seconds: float | None = None

    def to_json(self) -> dict[str, Any]:
        """The JSON form."""
        body: dict[str, Any] = {"results": list(self.results), "pinned": dict(sorted(self.pinned.items())),
                                "plan": self.plan.to_json()}
        if self.columns:
            body["columns"] = {r: list(self.columns[r]) for r in sorted(self.columns)}
        if self.per_run:
            body["per_run"] = True
        if self.deadline_seconds is not None:
            body["deadline_seconds"] = self.deadline_seconds
        return body

    @classmethod
    def from_json(cls, document: object) -> AutoDeclaration:
        """Parse :meth:`to_json`'s form; :class:`GraphError` naming what is wrong."""
        if (not isinstance(document, dict) or not {"results", "pinned", "plan"} <= set(document)
                or not set(document) <= {"results", "pinned", "plan", "columns", "per_run", "deadline_seconds"}
                or not isinstance(document.get("per_run", False), bool)
                or not _budget(document.get("deadline_seconds"))
                or not isinstance(document["results"], list) or not isinstance(document["pinned"], dict)
                or not isinstance(document.get("columns", {}), dict)):
            raise GraphError(f"AUTO declaration {document!r} must be {{\"results\": [...], \"pinned\": {{...}}, "
                             "\"plan\": {...}}; re-render the DAG with this provider version")
        return cls(tuple(str(r) for r in document["results"]),
                   {str(r): str(why) for r, why in document["pinned"].items()},
                   ExchangePlan.from_json(document["plan"]),
                   {str(r): tuple(str(c) for c in cs) for r, cs in document.get("columns", {}).items()},
                   bool(document.get("per_run", False)),
                   None if document.get("deadline_seconds") is None else float(document["deadline_seconds"]))


def _budget(value: object) -> bool:
    """True for an absent deadline or a positive number of seconds."""
    return value is None or (isinstance(value, (int, float)) and not isinstance(value, bool) and value > 0)


def run_choices(declared: AutoDeclaration, plan: ExchangePlan) -> ExchangePlan:
    """What a run whose plan is ``plan`` runs of ``declared``'s AUTO results (module rule): FUSED only where both
    the run's plan and the rendered structure fuse it, else BLOCKING; every AUTO result named."""
    return ExchangePlan({r: Choice.FUSED if plan.choice(r) is Choice.FUSED and declared.plan.choice(r) is Choice.FUSED
                         else Choice.BLOCKING for r in declared.results})


def declared_columns(graph: JobGraph) -> dict[str, tuple[str, ...]]:
    """Per AUTO result of ``graph`` whose edges declare ``columns``, those columns (its edges agree: validation)."""
    return {e.result: e.columns for e in graph.edges if e.exchange is Exchange.AUTO and e.columns}


def redeclare(graph: JobGraph, declared: AutoDeclaration) -> JobGraph:
    """``graph`` (concrete, as rendered) with the edges of ``declared``'s results AUTO again: the graph a planner
    costs. A result it names that the graph lacks is an error naming it."""
    if not declared.results:
        return graph
    known = {r.id for r in graph.results}
    missing = [r for r in declared.results if r not in known]
    if missing:
        raise GraphError(f"AUTO result {missing[0]!r} is not a result of the rendered graph; re-render the DAG")
    auto = set(declared.results)
    return JobGraph.of(graph.steps, [replace(e, exchange=Exchange.AUTO) if e.result in auto else e
                                     for e in graph.edges])

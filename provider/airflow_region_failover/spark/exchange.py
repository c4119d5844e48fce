"""Inputs and outputs of one subtask: which partitions it reads, where they live, and what it returns.

Rules:

* a producer publishes each partition it wrote as a :class:`PartitionRef` (an XCom of its current try); a
  consumer reads exactly the refs its producers' current tries published. Airflow 3 deletes a task's XComs when
  its next try starts, and a consumer only runs once every producer it reads has succeeded, so after a restart
  the consumer reads the new try's output, never a stale one; the read is also pinned to the ref's attempt
  (:mod:`.store_io`). A missing ref is an :class:`InputUnavailable` naming the partition (the failover cause);
* BLOCKING partitions are committed store versions (attempt = the producer's try number); PIPELINED partitions
  are *scratch*: written under the producer try's own attempt, read only through that try's ref, retired when
  the producer's next try begins (the store's commit protocol) and swept by the store's life-cycle;
* a step function returns a DataFrame (every output result gets it), a mapping result name -> DataFrame (a
  default-named result ``"<from>-><to>"`` may also be keyed by the consumer step ``<to>``), or ``None`` when it
  produces nothing. A step without results that returns a DataFrame has it committed as its *sink* result,
  named like the step;
* a result whose edges declare ``columns`` keeps only those columns of what its producer returned, in that
  order (:func:`kept_frame`): every output is projected before anything writes it, and a declared column the
  step did not return is a :class:`StepOutputError` naming it.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from airflow_region_failover.exceptions import GraphError, InputUnavailable, StepOutputError
from airflow_region_failover.graph.ids import PartitionId, default_result_id
from airflow_region_failover.graph.model import Edge, Exchange, JobGraph, Result
from airflow_region_failover.store.dataplane.clustered import Clustering
from airflow_region_failover.store.dataplane.types import Cut, column
from airflow_region_failover.store.keys import AttemptId

if TYPE_CHECKING:
    from pyspark.sql import DataFrame


@dataclass(frozen=True)
class PartitionRef:
    """Where one partition written by one producer try lives (the XCom value: :meth:`to_json`, the exchange by
    its name)."""

    result: str
    index: int
    exchange: Exchange
    dag_id: str
    run_id: str
    attempt: int
    rows: int = -1

    @property
    def partition(self) -> PartitionId:
        """The partition id ``result#index``."""
        return PartitionId(self.result, self.index)

    @property
    def attempt_id(self) -> AttemptId:
        """The producer attempt this ref's partition was written by."""
        return AttemptId(self.dag_id, self.run_id, self.partition, self.attempt)

    def to_json(self) -> dict[str, Any]:
        """The XCom value."""
        return {"result": self.result, "index": self.index, "exchange": self.exchange.value, "dag_id": self.dag_id,
                "run_id": self.run_id, "attempt": self.attempt, "rows": self.rows}

    @classmethod
    def from_json(cls, value: object, *, partition: PartitionId) -> PartitionRef:
        """Parse an XCom value; :class:`InputUnavailable` for anything that is not a ref of ``partition``."""
        if not isinstance(value, dict):
            raise InputUnavailable(partition, "its producer published no location (XCom missing)")
        try:
            ref = cls(**{**value, "exchange": Exchange(value.get("exchange"))})
        except (TypeError, ValueError) as exc:
            raise InputUnavailable(partition, f"malformed location XCom ({exc})") from None
        if ref.partition != partition:
            raise InputUnavailable(partition, f"its producer published {ref.partition} instead")
        return ref


def _consumers(graph: JobGraph, result_id: str) -> tuple[Edge, ...]:
    """The consumer edges of ``result_id`` (none for a sink result, which the graph does not list)."""
    try:
        return graph.result(result_id).consumers
    except GraphError:
        return ()


def cut_of(graph: JobGraph, result_id: str) -> Cut | None:
    """How a partition of ``result_id`` is cut into subpartitions: by its keyed consumer edges (which agree,
    :mod:`..graph.validation`), or ``None`` when no consumer is keyed."""
    for edge in _consumers(graph, result_id):
        if edge.keyed:
            return Cut(edge.partition_by, edge.max_parallelism, graph.step(edge.target).parallelism,
                       where=f"step {edge.source!r}, {edge}")
    return None


def clustering_of(graph: JobGraph, result_id: str) -> Clustering | None:
    """How a partition of ``result_id`` is stored sorted in content-defined files: by the ``cluster_by`` of its
    consumer edges (which agree, :mod:`..graph.validation`), or ``None`` when none declares one."""
    for edge in _consumers(graph, result_id):
        if edge.cluster_by:
            return Clustering(edge.cluster_by, where=f"step {edge.source!r}, {edge}")
    return None


def kept_columns(graph: JobGraph, result_id: str) -> tuple[str, ...]:
    """The columns ``result_id`` keeps: the ``columns`` of its consumer edges (which agree,
    :mod:`..graph.validation`), or ``()`` (every column) when none declares them."""
    for edge in _consumers(graph, result_id):
        if edge.columns:
            return edge.columns
    return ()


def kept_frame(graph: JobGraph, step_id: str, result_id: str, frame: DataFrame) -> DataFrame:
    """``frame`` projected to the columns ``result_id`` keeps (module rule)."""

    columns = kept_columns(graph, result_id)
    if not columns:
        return frame
    returned = frame.columns
    missing = [c for c in columns if c not in returned]
    if missing:
        raise StepOutputError(f"step {step_id!r}: result {result_id!r} keeps columns {list(columns)}, but the step "
                              f"returned no column {missing[0]!r} (columns: {', '.join(returned)}); fix columns=[...] "
                              "on the result's edges or the step's output")
    return frame.select(*[column(c) for c in columns])


def sink_result(graph: JobGraph, step_id: str) -> Result | None:
    """The implicit BLOCKING result of a step without declared results (``None`` if it declares some)."""
    if graph.outputs(step_id):
        return None
    return Result(step_id, step_id, Exchange.BLOCKING, ())


def output_results(graph: JobGraph, step_id: str) -> tuple[Result, ...]:
    """The results ``step_id`` writes: its declared results, or its sink result."""
    declared = graph.outputs(step_id)
    sink = sink_result(graph, step_id)
    return declared if sink is None else (sink,)


def match_outputs(graph: JobGraph, step_id: str, returned: object) -> dict[str, DataFrame]:
    """Map what the step function returned onto its results, each projected to the columns it keeps (see the
    module rule); error names step/result."""
    return {result: kept_frame(graph, step_id, result, frame)
            for result, frame in _returned_outputs(graph, step_id, returned).items()}


def _returned_outputs(graph: JobGraph, step_id: str, returned: object) -> dict[str, DataFrame]:
    from pyspark.sql import DataFrame

    declared = graph.outputs(step_id)
    if returned is None:
        if declared:
            names = ", ".join(r.id for r in declared)
            raise StepOutputError(f"step {step_id!r} returned None but produces {names}; return a DataFrame or "
                                  "a dict of DataFrames keyed by result name")
        return {}
    if isinstance(returned, DataFrame):
        return {r.id: returned for r in output_results(graph, step_id)}
    if isinstance(returned, Mapping):
        return _match_mapping(step_id, declared, returned, DataFrame)
    raise StepOutputError(f"step {step_id!r} returned {type(returned).__name__}; return a DataFrame, a dict of "
                          "DataFrames keyed by result name, or None")


def _match_mapping(step_id: str, declared: tuple[Result, ...], returned: Mapping[Any, Any],
                   frame: type) -> dict[str, DataFrame]:
    aliases = {r.id: r.id for r in declared}
    for r in declared:
        for e in r.consumers:
            if r.id == default_result_id(e.source, e.target):
                aliases.setdefault(e.target, r.id)
    out: dict[str, DataFrame] = {}
    for key, value in returned.items():
        if key not in aliases:
            raise StepOutputError(f"step {step_id!r} returned key {key!r}; it produces "
                                  f"{', '.join(sorted(aliases)) or 'no results'}")
        if not isinstance(value, frame):
            raise StepOutputError(f"step {step_id!r}: value for {key!r} is {type(value).__name__}, not a DataFrame")
        out[aliases[key]] = value
    missing = [r.id for r in declared if r.id not in out]
    if missing:
        raise StepOutputError(f"step {step_id!r} returned no DataFrame for result {missing[0]!r}")
    return out


def check_sinks(graph: JobGraph) -> None:
    """A sink result is named like its step: refuse a graph where a declared result already has that name."""
    names = {r.id for r in graph.results}
    producers = {r.producer for r in graph.results}
    for step in graph.steps:
        if step.id not in producers and step.id in names:
            raise GraphError(f"step {step.id!r} has no results, so its returned DataFrame is stored as result "
                             f"{step.id!r}, but another step's result has that name; rename that result")

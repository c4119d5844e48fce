"""A small fluent builder for DAG authors; :meth:`JobGraphBuilder.build` validates everything at once."""

from __future__ import annotations

from typing import Any

from airflow_region_failover.graph.model import Distribution, Edge, Exchange, JobGraph, Step


class JobGraphBuilder:
    """Collects steps and edges in declaration order; ``build()`` returns a validated :class:`JobGraph`.

    >>> b = JobGraphBuilder()
    >>> b.step("extract", parallelism=2).step("load")
    ... # doctest: +ELLIPSIS
    <...>
    >>> b.edge("extract", "load", exchange="BLOCKING").build().subtask_count
    3
    """

    def __init__(self) -> None:
        self._steps: list[Step] = []
        self._edges: list[Edge] = []

    def step(self, step_id: str, *, parallelism: int = 1, deterministic: bool = False,
             rescalable: bool = False) -> JobGraphBuilder:
        """Declare a step."""
        self._steps.append(Step(step_id, parallelism, deterministic, rescalable))
        return self

    def edge(
        self,
        source: str,
        target: str,
        *,
        exchange: Exchange | str,
        distribution: Distribution | str | None = None,
        result: str | None = None,
        partition_by: tuple[str, ...] | list[str] = (),
        max_parallelism: int = 0,
        cluster_by: tuple[str, ...] | list[str] = (),
        columns: tuple[str, ...] | list[str] = (),
    ) -> JobGraphBuilder:
        """Declare that ``target`` consumes ``source``'s result ``result`` (default ``"<source>-><target>"``);
        ``distribution`` defaults to ``ALL_TO_ALL`` with ``partition_by`` and to ``BROADCAST`` without;
        ``columns`` are those the persisted result keeps (BLOCKING only)."""
        if distribution is None:
            distribution = Distribution.ALL_TO_ALL if partition_by else Distribution.BROADCAST
        self._edges.append(Edge(source, target, exchange, distribution, result or "",  # type: ignore[arg-type]
                                _tuple(partition_by), max_parallelism, _tuple(cluster_by), _tuple(columns)))
        return self

    def build(self) -> JobGraph:
        """Validate and return the graph; :class:`~.errors.GraphError` names the first offender."""
        return JobGraph.of(self._steps, self._edges)


def _tuple(columns: object) -> Any:
    """A list of column names as a tuple; anything else as given, for validation to name."""
    return tuple(columns) if isinstance(columns, (list, tuple)) else columns

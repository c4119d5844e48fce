"""Subtask expansion: which producer partitions each consumer subtask reads, never materialising N x M edges.

Flink's index mapping (``EdgeManagerBuildUtil``), with S producer and T consumer subtasks:

* ``ALL_TO_ALL`` and ``BROADCAST``: every consumer subtask reads from every producer partition — one *group* of
  S partitions consumed by all T subtasks (a keyed ``ALL_TO_ALL`` consumer reads only its subpartition of each,
  :mod:`.keygroups`; which bytes are read is the store's concern, which partitions is this module's);
* ``POINTWISE`` with S >= T: consumer j reads producers ``[j*S//T, (j+1)*S//T)`` — one group per consumer;
* ``POINTWISE`` with S < T: producer p feeds consumers ``[ceil(p*T/S), ceil((p+1)*T/S))`` — one group per
  producer.

A :class:`PartitionGroup` (Flink's ConsumedPartitionGroup / ConsumerVertexGroup pair) is a range of producer
partitions consumed by a range of consumer subtasks, every one of which reads every partition of the group.
An edge expands into O(S + T) group bounds however dense it is.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

from airflow_region_failover.graph.errors import GraphError
from airflow_region_failover.graph.ids import PartitionId, SubtaskId
from airflow_region_failover.graph.keygroups import key_group_range
from airflow_region_failover.graph.model import Distribution, Edge, JobGraph


@dataclass(frozen=True)
class PartitionGroup:
    """Producer partitions ``producers`` of an edge, each read by every consumer subtask in ``consumers``."""

    edge: Edge
    producers: range
    consumers: range


def _ceil_div(a: int, b: int) -> int:
    return -(-a // b)


def partition_groups(edge: Edge, producers: int, consumers: int) -> Iterator[PartitionGroup]:
    """The groups of ``edge`` for ``producers`` (S) and ``consumers`` (T) subtasks (see the module rule)."""
    for producer_range, consumer_range in group_bounds(edge, producers, consumers):
        yield PartitionGroup(edge, producer_range, consumer_range)


def group_bounds(edge: Edge, producers: int, consumers: int) -> Iterator[tuple[range, range]]:
    """The (producers, consumers) ranges of :func:`partition_groups`, without building group objects."""
    if edge.distribution is not Distribution.POINTWISE:
        yield range(producers), range(consumers)
    elif producers >= consumers:
        for j in range(consumers):
            yield range(j * producers // consumers, (j + 1) * producers // consumers), range(j, j + 1)
    else:
        for p in range(producers):
            yield range(p, p + 1), range(_ceil_div(p * consumers, producers), _ceil_div((p + 1) * consumers, producers))


def consumed_range(edge: Edge, producers: int, consumers: int, consumer: int) -> range:
    """The producer partition indices that consumer subtask ``consumer`` reads over ``edge``."""
    if not 0 <= consumer < consumers:
        raise GraphError(f"subtask {edge.target}#{consumer} does not exist: parallelism is {consumers}")
    if edge.distribution is not Distribution.POINTWISE:
        return range(producers)
    if producers >= consumers:
        return range(consumer * producers // consumers, (consumer + 1) * producers // consumers)
    # S < T: the producer p whose consumer range [ceil(p*T/S), ceil((p+1)*T/S)) holds `consumer`.
    return range(consumer * producers // consumers, consumer * producers // consumers + 1)


def consumed_partitions(graph: JobGraph, subtask: SubtaskId) -> dict[Edge, tuple[PartitionId, ...]]:
    """For each input edge of ``subtask``'s step, the partitions that subtask reads (in index order)."""
    consumers = graph.step(subtask.step).parallelism
    out: dict[Edge, tuple[PartitionId, ...]] = {}
    for edge in graph.inputs(subtask.step):
        producers = graph.step(edge.source).parallelism
        rng = consumed_range(edge, producers, consumers, subtask.index)
        out[edge] = tuple(PartitionId(edge.result, i) for i in rng)
    return out


def read_key_groups(graph: JobGraph, edge: Edge, consumer: int) -> range | None:
    """The key groups consumer subtask ``consumer`` reads over a keyed ``edge`` (``None``: whole partitions)."""
    if not edge.keyed:
        return None
    return key_group_range(edge.max_parallelism, graph.step(edge.target).parallelism, consumer)


def subtasks(graph: JobGraph) -> Iterator[SubtaskId]:
    """Every subtask of ``graph``, steps in topological order, indices ascending."""
    for step in graph.steps:
        for i in range(step.parallelism):
            yield SubtaskId(step.id, i)

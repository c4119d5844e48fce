"""How the members of a fused region read each other's DataFrames: which are persisted, and which keyed edges are
shuffled once for all their consumers (:mod:`.fused` runs the region).

Every BLOCKING result partition a member commits is written by its own Spark job; a member partition read over a
PIPELINED exchange is computed inside the job of every commit downstream of it (:func:`jobs_of`: the commits whose
lineage holds it). Rules:

* a keyed PIPELINED edge whose producers' partitions all feed one job is **shuffled once** (:func:`shared`) when
  Spark reuses exchanges (``spark.sql.exchange.reuse``, its default): its consumers read the union of the
  producers' partitions repartitioned by the key (Spark's ``hashpartitioning``, the partitioning a join or
  aggregation on the key asks for), each then keeping its key groups. The consumers' plans hold the same exchange
  of the same plan, so Spark computes it once in that job and a consumer joining or grouping on the key needs no
  exchange of its own. The exchange has one partition more than ``spark.sql.shuffle.partitions``
  (:func:`shared_partitions`): Spark drops a repartition whose child is already partitioned that way (a producer
  whose last exchange was by the same key), and each consumer would then compute that producer's last stage
  again. Over any other edge each consumer filters the producers' partitions itself (each keeps exactly the rows a
  subpartition would hold either way);
* a partition read by more than one member is **persisted** (memory, then local disk) when the commits downstream
  of it are more than one job — the block manager is what outlives a job — or when its step is not declared
  ``deterministic`` and its reads are not all through one shared exchange that Spark keeps (one whose key its
  producer did not read over a shared exchange itself): then it must be computed once whatever
  Spark's plan does (consumers of one try read the same rows). Otherwise it is left to Spark: a deterministic
  step recomputed costs its computation, where persisting costs encoding it into cached batches and scanning them
  once per consumer; and a persisted frame is a plan of its own, so no exchange above it is shared with another
  (``benchmarks/notes/2026-12-02-fused-region-breakdown.md``).
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from typing import Any

from airflow_region_failover.graph.ids import PartitionId, SubtaskId
from airflow_region_failover.graph.model import Edge, Exchange
from airflow_region_failover.graph.subtasks import consumed_partitions
from airflow_region_failover.spark.exchange import output_results


def readers_of(graph: Any, members: Sequence[SubtaskId],
               inside: frozenset[SubtaskId]) -> dict[PartitionId, tuple[SubtaskId, ...]]:
    """The members that read each member partition over a PIPELINED exchange."""
    readers: dict[PartitionId, list[SubtaskId]] = {}
    for member in members:
        for edge, parts in consumed_partitions(graph, member).items():
            if edge.exchange is not Exchange.PIPELINED:
                continue
            for p in parts:
                if SubtaskId(edge.source, p.index) in inside:
                    readers.setdefault(p, []).append(member)
    return {p: tuple(r) for p, r in readers.items()}


def jobs_of(graph: Any, members: Sequence[SubtaskId],
            readers: Mapping[PartitionId, Sequence[SubtaskId]]) -> dict[PartitionId, frozenset[PartitionId]]:
    """For each member partition read inside, the committed partitions (one Spark job each) whose lineage holds it
    (module rule). ``members`` are in topological order."""
    below: dict[SubtaskId, frozenset[PartitionId]] = {}
    jobs: dict[PartitionId, frozenset[PartitionId]] = {}
    for member in reversed(members):
        found: set[PartitionId] = set()
        for result in output_results(graph, member.step):
            partition = PartitionId(result.id, member.index)
            if result.exchange is Exchange.BLOCKING:
                found.add(partition)
            elif partition in readers:
                jobs[partition] = frozenset().union(*(below[r] for r in readers[partition]))
                found |= jobs[partition]
        below[member] = frozenset(found)
    return jobs


def persisted(graph: Any, partition: PartitionId, readers: Mapping[PartitionId, Sequence[SubtaskId]],
              jobs: Mapping[PartitionId, frozenset[PartitionId]], reuse: bool) -> bool:
    """Whether ``partition`` is persisted (module rule; ``reuse``: Spark's ``spark.sql.exchange.reuse``)."""
    if len(readers.get(partition, ())) <= 1:
        return False
    result = graph.result(partition.result)
    if len(jobs.get(partition, frozenset())) > 1:
        return True
    if graph.step(result.producer).deterministic:
        return False
    inside = [e for e in result.consumers if e.exchange is Exchange.PIPELINED]
    keys = {e.partition_by for e in graph.inputs(result.producer) if shared(graph, e, jobs, reuse)}
    once = all(shared(graph, e, jobs, reuse) and e.partition_by not in keys for e in inside)
    return not once


def shared(graph: Any, edge: Edge, jobs: Mapping[PartitionId, frozenset[PartitionId]], reuse: bool) -> bool:
    """Whether the consumers of keyed PIPELINED ``edge`` read one shuffle (module rule)."""
    return reuse and edge.keyed and edge.exchange is Exchange.PIPELINED and _one_job(graph, edge.result, jobs)


def _one_job(graph: Any, result: str, jobs: Mapping[PartitionId, frozenset[PartitionId]]) -> bool:
    """Whether every partition of ``result`` is read inside the same one job (or none)."""
    parallelism = graph.step(graph.result(result).producer).parallelism
    return len(frozenset().union(*(jobs.get(PartitionId(result, i), frozenset()) for i in range(parallelism)))) <= 1


def shared_partitions(shuffle_partitions: int) -> int:
    """The partitions of a shared exchange (module rule: one more than ``spark.sql.shuffle.partitions``)."""
    return shuffle_partitions + 1


def measured(graph: Any, members: Sequence[SubtaskId], jobs: Mapping[PartitionId, frozenset[PartitionId]],
             committed: Collection[PartitionId]) -> tuple[SubtaskId, ...]:
    """The members whose work the jobs of ``committed`` ran (what a failed try's clock measured up to its last
    commit, :mod:`.fused`): every BLOCKING output committed, every partition kept in memory read only by jobs that
    committed, and at least one of either."""
    done, found = frozenset(committed), []
    for member in members:
        outputs = [(r.exchange, PartitionId(r.id, member.index)) for r in output_results(graph, member.step)]
        blocking = [p for x, p in outputs if x is Exchange.BLOCKING]
        downstream = [jobs.get(p, frozenset()) for x, p in outputs if x is not Exchange.BLOCKING]
        if (blocking or any(downstream)) and all(p in done for p in blocking) and all(j <= done for j in downstream):
            found.append(member)
    return tuple(found)

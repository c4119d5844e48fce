"""Keeping a restarted consumer's committed result when its inputs came back byte-identical (DESIGN rule 2).

Flink restarts every consumer of a re-produced result, because a re-produced result may differ. Going beyond
Flink, a step may be declared ``deterministic`` (re-running it on the same inputs produces byte-identical output).
A subtask restarted under the ``region`` failover strategy (try > 1; ``full`` reruns everything, as asked) keeps
its committed outputs instead of recomputing when:

1. it exchanges data only through BLOCKING results (a PIPELINED input or output lives only within one region
   attempt, so it is recomputed with its region);
2. it reads at least one BLOCKING input, and every one of its outputs has a current committed version whose
   manifest records the input versions it was computed from;
3. every input's current version has the recorded content checksum (byte-identical), and every input whose
   attempt changed since (re-produced) was produced by a step declared ``deterministic``.

The task then republishes its kept outputs and ends without running Spark; its own consumers see unchanged
inputs and are kept in turn. Any doubt (no record, a manifest of an older writer, a changed checksum) means: run.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from airflow_region_failover.failover.options import FailoverStrategy
from airflow_region_failover.graph.ids import PartitionId, SubtaskId
from airflow_region_failover.graph.model import Edge, Exchange, JobGraph
from airflow_region_failover.spark.context import StepContext
from airflow_region_failover.spark.exchange import PartitionRef, output_results


def kept_outputs(io: Any, graph: JobGraph, subtask: SubtaskId, refs: Mapping[Edge, Sequence[PartitionRef]],
                 current: Iterable[Any], sctx: StepContext,
                 strategy: FailoverStrategy | str = FailoverStrategy.REGION) -> tuple[PartitionRef, ...] | None:
    """The refs of ``subtask``'s committed outputs if this try may keep them (module rule), else None.
    ``current``: the versions of the BLOCKING inputs this try would read; ``io`` answers ``committed``."""
    region = FailoverStrategy.parse(strategy) is FailoverStrategy.REGION
    if not region or sctx.try_number <= 1 or not _only_blocking(graph, subtask.step):
        return None
    if not any(refs.values()):
        return None
    manifests = [io.committed(sctx.dag_id, sctx.run_id, PartitionId(r.id, subtask.index))
                 for r in output_results(graph, subtask.step)]
    if not manifests or any(m is None for m in manifests):
        return None
    current = tuple(current)
    if not all(_unchanged(graph, m.inputs, current) for m in manifests):
        return None
    return tuple(PartitionRef(m.partition.result, m.partition.index, Exchange.BLOCKING.value, sctx.dag_id,
                              sctx.run_id, m.attempt, m.row_count) for m in manifests)


def _only_blocking(graph: JobGraph, step_id: str) -> bool:
    return all(e.exchange is Exchange.BLOCKING for e in graph.inputs(step_id)) and \
        all(r.exchange is Exchange.BLOCKING for r in output_results(graph, step_id))


def _unchanged(graph: JobGraph, recorded: Iterable[Any], current: Iterable[Any]) -> bool:
    """Rule 3 for one output: the recorded input versions match the current ones."""
    before = {v.partition: v for v in recorded}
    now = {v.partition: v for v in current}
    if set(before) != set(now):
        return False
    for partition, version in now.items():
        old = before[partition]
        if old.content_checksum != version.content_checksum:
            return False
        if old.attempt != version.attempt and not graph.step(graph.result(partition.result).producer).deterministic:
            return False
    return True

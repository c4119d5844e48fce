"""What a step function learns about the subtask it runs: :class:`StepContext` (its ``context`` argument).

Rule: a step function ``fn(spark, inputs, context)`` gets ``inputs`` keyed by input name (see
:func:`input_name`) and a :class:`StepContext` telling it its index, parallelism and the partitions it reads, so
it can compute and return its own partition. It must not write results itself: whatever it returns is persisted
by the operator.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from airflow_region_failover.checkpoint.plan import Epoch
from airflow_region_failover.graph.ids import PartitionId, SubtaskId, default_result_id
from airflow_region_failover.graph.model import Edge


def input_name(edge: Edge) -> str:
    """The key of ``edge``'s DataFrame in ``inputs``: the producer's step id when the result has its default
    name (``"<from>-><to>"``), else the result name."""
    return edge.source if edge.result == default_result_id(edge.source, edge.target) else edge.result


@dataclass(frozen=True)
class StepContext:
    """The subtask being run and where it stands (read-only).

    ``subtask``: ``step#index``; ``parallelism``: the step's subtask count; ``partitions``: per input name, the
    producer partitions this subtask reads (POINTWISE/ALL_TO_ALL mapping); ``dag_id``/``run_id``/``try_number``:
    the Airflow run and try; ``params``: the run's DAG params (e.g. ``fail_once``); ``airflow``: the full Airflow
    task context (empty outside Airflow); ``epoch``: in a checkpointed or sliced chain, the epoch being run (its
    ``index``, ``count`` and whether it is the ``last``), else ``None``; in a sliced chain ``subtask`` and
    ``parallelism`` are the epoch's virtual subtask's (:mod:`.sliced`).
    """

    subtask: SubtaskId
    parallelism: int
    deterministic: bool
    partitions: Mapping[str, tuple[PartitionId, ...]]
    dag_id: str = ""
    run_id: str = ""
    try_number: int = 1
    params: Mapping[str, Any] = field(default_factory=dict)
    airflow: Mapping[str, Any] = field(default_factory=dict, repr=False, compare=False)
    epoch: Epoch | None = None

    @property
    def step(self) -> str:
        """The step id."""
        return self.subtask.step

    @property
    def index(self) -> int:
        """This subtask's index in ``0 .. parallelism-1`` (the partition it writes)."""
        return self.subtask.index

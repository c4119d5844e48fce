"""Names the run-time layers share: task ids of subtasks and chains, the XCom keys of partitions, the operator's
name and the DAG param that carries the job.

Rules:

* The task id of subtask ``step#i`` is ``step.i`` (:func:`task_id_of`) for every parallelism and independent of
  the region numbering, so changing the graph elsewhere never renames a task.
* A chain of steps ``s1 -> ... -> sk`` (:mod:`~airflow_region_failover.graph.chains`) runs as one task per chain
  subtask, whose id names its steps: ``s1.s2....sk.i`` (e.g. ``gen_orders.clean_orders.0``); every subtask of it
  maps to that id (:class:`TaskNames`). A step on no chain keeps ``step.i``.
* Step ids never contain ``.``, so a task id splits exactly into its steps and index: :func:`subtasks_of` inverts
  both forms without the graph (``None`` for any other task id) and :func:`subtask_of` answers the first of them —
  the chain's head — which lies in the same failover region as every other member.
* A region's TaskGroup is ``r<n>`` and its display name says what it holds (:func:`region_label`).
* A fused region (:mod:`~airflow_region_failover.graph.fusion`) runs as one task, ``s1.s2....sk.i`` after its
  steps and its first step's lowest index; every subtask of it maps to that id.
* A producer publishes where its partition of ``result`` lives under the XCom key ``partition:<result>``
  (:func:`xcom_key`); a chain task publishes its tail's results; a fused region's task, which holds several
  partitions of one result, publishes each as ``partition:<result>:<i>`` (:meth:`TaskNames.xcom_key`; not ``#``:
  the Execution API carries the key in a URL path, where ``#`` would end it).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import cached_property

from airflow_region_failover.graph.chains import Chains
from airflow_region_failover.graph.errors import GraphError
from airflow_region_failover.graph.fusion import FusedRegion
from airflow_region_failover.graph.ids import SubtaskId
from airflow_region_failover.graph.regions import Region

OPERATOR_NAME = "RegionStepOperator"
"""The class name of the step operator, as Airflow records it in ``task_instance.operator``."""

JOB_PARAM = "region_failover_job"
"""The DAG param holding the job document (graph + options), readable by the scheduler and every worker."""

FAILED_SUBTASK = "region_failover_subtask"
"""The attribute a fused region's task sets on the exception a member raised: that member's ``step#i``."""

XCOM_PREFIX = "partition:"
"""XCom key prefix of the partition a task wrote: ``partition:<result>``."""

_STEP = r"[A-Za-z0-9_][A-Za-z0-9_-]*"
_TASK_ID = re.compile(rf"({_STEP}(?:\.{_STEP})*)\.(0|[1-9][0-9]*)\Z")


def task_id_of(subtask: SubtaskId) -> str:
    """The Airflow task id of an unchained ``subtask``: ``<step>.<index>`` (e.g. ``clean.0``)."""
    return f"{subtask.step}.{subtask.index}"


def subtasks_of(task_id: str) -> tuple[SubtaskId, ...] | None:
    """The subtasks a step task id names, head first (``a.b.0`` -> ``a#0, b#0``), or ``None`` for any other id.
    Graph-free: it does not check that the steps exist or form a chain (:meth:`TaskNames.subtasks` does)."""
    match = _TASK_ID.match(task_id)
    if match is None:
        return None
    index = int(match.group(2))
    return tuple(SubtaskId(step, index) for step in match.group(1).split("."))


def subtask_of(task_id: str) -> SubtaskId | None:
    """The (first) subtask a step task id names (inverse of :func:`task_id_of`), or ``None`` for any other id."""
    found = subtasks_of(task_id)
    return None if found is None else found[0]


@dataclass(frozen=True)
class TaskNames:
    """The task ids of one job's subtasks, chains and fused regions included (module rule)."""

    chains: Chains
    fused: tuple[FusedRegion, ...] = ()

    def __post_init__(self) -> None:
        chain_ids = {".".join(c.steps) for c in self.chains.chains}
        for region in self.fused:
            if region.task_id.rsplit(".", 1)[0] in chain_ids:
                raise GraphError(f"fused region {region.region.id} would take chain task id {region.task_id!r}; "
                                 "declare its exchanges BLOCKING or PIPELINED")

    @cached_property
    def _prefix(self) -> dict[str, str]:
        return {step: ".".join(chain.steps) for chain in self.chains.chains for step in chain.steps}

    @cached_property
    def _fused_of(self) -> dict[SubtaskId, FusedRegion]:
        return {member: region for region in self.fused for member in region.members}

    @cached_property
    def _fused_by_id(self) -> dict[str, FusedRegion]:
        return {region.task_id: region for region in self.fused}

    def task_id(self, subtask: SubtaskId) -> str:
        """The task running ``subtask``: ``<step>.<i>``, ``<s1>.<s2>...<sk>.<i>`` for a chain's subtask, or its
        fused region's task id."""
        region = self._fused_of.get(subtask)
        if region is not None:
            return region.task_id
        return f"{self._prefix[subtask.step]}.{subtask.index}"

    def is_fused(self, task_id: str) -> bool:
        """True if ``task_id`` is a fused region's task."""
        return task_id in self._fused_by_id

    def xcom_key(self, producer: SubtaskId, result: str) -> str:
        """The XCom key under which ``producer``'s task publishes its partition of ``result`` (module rule)."""
        return f"{xcom_key(result)}:{producer.index}" if producer in self._fused_of else xcom_key(result)

    def subtasks(self, task_id: str) -> tuple[SubtaskId, ...] | None:
        """The subtasks task ``task_id`` runs, head first (a fused region's task: all of them, in the order it runs
        them), or ``None`` if it is no task of this job's chains (the index is not checked against the
        parallelism)."""
        region = self._fused_by_id.get(task_id)
        if region is not None:
            return region.members
        found = subtasks_of(task_id)
        if found is None or found[0].step not in self._prefix:
            return None
        steps = tuple(s.step for s in found)
        if self.chains.of(steps[0]).steps != steps or found[0] in self._fused_of:
            return None
        return found

    def head(self, task_id: str) -> SubtaskId | None:
        """The first subtask task ``task_id`` runs (see :meth:`subtasks`)."""
        found = self.subtasks(task_id)
        return None if found is None else found[0]


def xcom_key(result: str) -> str:
    """The XCom key under which a producer task publishes its partition of ``result``."""
    return f"{XCOM_PREFIX}{result}"


LABEL_LIMIT = 80
"""Characters of a region's display name (:func:`region_label`)."""


def region_label(region: Region, limit: int = LABEL_LIMIT) -> str:
    """The group's display name: the region id and what it holds, per step its subtask indices as ranges, e.g.
    ``r3 · gen_orders#1 + clean_orders#1`` or ``r8 · join#0-3 + aggregate#0-1`` (cut with ``…`` past ``limit``
    characters). The group id stays ``r<n>``: only the label changes."""
    parts = []
    for step in region.steps:
        indices = sorted(s.index for s in region.subtasks if s.step == step)
        parts.append(f"{step}#{_ranges(indices)}")
    label = f"{region.id} · {' + '.join(parts)}"
    return label if len(label) <= limit else label[: limit - 1] + "…"


def _ranges(indices: list[int]) -> str:
    """``[0, 1, 2, 5]`` -> ``0-2,5``."""
    runs: list[list[int]] = []
    for i in indices:
        if runs and i == runs[-1][-1] + 1:
            runs[-1].append(i)
        else:
            runs.append([i])
    return ",".join(str(r[0]) if len(r) == 1 else f"{r[0]}-{r[-1]}" for r in runs)

"""Names the run-time layers share: task ids of subtasks, the XCom keys of partitions, the operator's name and the
DAG param that carries the job.

Rules: the task id of subtask ``step#i`` is ``step.i`` (:func:`task_id_of`) for every parallelism and
independent of the region numbering, so changing the graph elsewhere never renames a task; step ids never contain
``.``, so :func:`subtask_of` inverts it exactly and answers ``None`` for any other task id. A producer publishes
where its partition of ``result`` lives under the XCom key ``partition:<result>`` (:func:`xcom_key`).
"""

from __future__ import annotations

import re

from airflow_region_failover.graph.ids import SubtaskId

OPERATOR_NAME = "RegionStepOperator"
"""The class name of the step operator, as Airflow records it in ``task_instance.operator``."""

JOB_PARAM = "region_failover_job"
"""The DAG param holding the job document (graph + options), readable by the scheduler and every worker."""

XCOM_PREFIX = "partition:"
"""XCom key prefix of the partition a task wrote: ``partition:<result>``."""

_TASK_ID = re.compile(r"([A-Za-z0-9_][A-Za-z0-9_-]*)\.(0|[1-9][0-9]*)\Z")


def task_id_of(subtask: SubtaskId) -> str:
    """The Airflow task id of ``subtask``: ``<step>.<index>`` (e.g. ``clean.0``)."""
    return f"{subtask.step}.{subtask.index}"


def subtask_of(task_id: str) -> SubtaskId | None:
    """The subtask a task id names (inverse of :func:`task_id_of`), or ``None`` for any other task id."""
    match = _TASK_ID.match(task_id)
    if match is None:
        return None
    return SubtaskId(match.group(1), int(match.group(2)))


def xcom_key(result: str) -> str:
    """The XCom key under which a producer task publishes its partition of ``result``."""
    return f"{XCOM_PREFIX}{result}"

"""The step operator: one Airflow task runs one subtask of a job graph on Spark.

Rule: ``execute`` (1) pulls, for every partition the subtask reads, the location its producer's *current* try
pushed as an XCom (a restarted producer's new try deletes its old XComs when it starts, and this task only runs
after that try succeeded, so stale output is never read),
(2) gets a SparkSession (embedded / Spark Connect / cluster, :mod:`~airflow_region_failover.spark.session`),
(3) reads BLOCKING inputs from committed store partitions and PIPELINED inputs from the producer try's scratch
attempt, (4) calls the step function (or spark-submits the script), (5) writes each output partition under this
try's attempt number and pushes one XCom per result (:data:`XCOM_PREFIX` + result name) saying where it lives.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from airflow.sdk import BaseOperator

from airflow_region_failover.graph.ids import SubtaskId

if TYPE_CHECKING:
    from airflow.sdk import Context

    from airflow_region_failover.authoring import JobRuntime

#: XCom key prefix of the partition a task wrote: ``partition:<result>``.
XCOM_PREFIX = "partition:"


def xcom_key(result: str) -> str:
    """The XCom key under which a producer task publishes its partition of ``result``."""
    return f"{XCOM_PREFIX}{result}"


class RegionStepOperator(BaseOperator):  # type: ignore[misc]
    """Run subtask ``subtask`` (``"step#i"``) of ``runtime``'s job graph (built by ``RegionJob.render``)."""

    template_fields: Sequence[str] = ("subtask",)
    ui_color = "#f4a460"
    ui_fgcolor = "#000000"

    def __init__(self, *, subtask: str, runtime: JobRuntime, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.subtask = subtask
        self.runtime = runtime
        parsed = SubtaskId.parse(subtask)
        step = runtime.graph.step(parsed.step)
        self.doc_md = (f"Subtask `{parsed}` ({parsed.index + 1} of {step.parallelism}) of step `{step.id}`"
                       f"{' (deterministic)' if step.deterministic else ''}.")

    def execute(self, context: Context) -> Any:
        """Run the subtask; returns a summary (rows written per result) that Airflow stores as return value.

        A task restarted by region failover first honours its restart backoff delay: it is rescheduled to the
        restart time (``up_for_reschedule``, worker slot released) and runs when the scheduler starts it again.
        """
        from airflow_region_failover.spark.step import run_subtask

        self._wait_for_restart_time(context)
        return run_subtask(self.runtime, SubtaskId.parse(self.subtask), context)

    def _wait_for_restart_time(self, context: Context) -> None:
        import time
        from datetime import datetime, timedelta, timezone

        from airflow.sdk.exceptions import AirflowRescheduleException

        from airflow_region_failover.airflow.listener import SLEEP_BELOW_S, restart_delay_left

        wait = restart_delay_left(context["ti"])
        if wait <= 0:
            return
        self.log.info("region failover: %s waits %.1f s (restart backoff delay)", self.task_id, wait)
        if wait < SLEEP_BELOW_S:
            time.sleep(wait)
            return
        raise AirflowRescheduleException(reschedule_date=datetime.now(timezone.utc) + timedelta(seconds=wait))

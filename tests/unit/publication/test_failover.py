"""A publishing task that cannot read its sink partition is inside failover: it fails at once (no Airflow
retry reading the same bad partition again) naming the partition, the listener records it, and the decision
restarts that partition's producer together with the publishing task — backtracking, as for a step task.

    gen#0 -> clean#0 ==+==> report#0 --\\
    gen#1 -> clean#1 ==+==> report#1 ----> report.publish     report#1 is unreadable: restart {report#1, publish}
"""

from __future__ import annotations

from datetime import datetime, timezone
from types import SimpleNamespace
from typing import Any

import pytest
from airflow.sdk import TaskInstanceState
from airflow.sdk.exceptions import AirflowFailException
from airflow.sdk.execution_time.context import OutletEventAccessors

from airflow_region_failover.decisions.storage import RunLogs
from airflow_region_failover.exceptions import InputUnavailable
from airflow_region_failover.failover.run_log import FailureRecord
from airflow_region_failover.graph.ids import PartitionId
from airflow_region_failover.job import job_of
from airflow_region_failover.plugins import listener
from airflow_region_failover.plugins.clearing import handle_failure
from airflow_region_failover.publication import operator as publishing
from airflow_region_failover.store.config import StoreConfig
from airflow_region_failover.store.s3.clients import S3Access
from tests.support.fakes import MemoryObjects, services
from tests.unit.rendering.test_publish_rendering import build

BROKEN = PartitionId("report", 1)


def test_a_publish_failure_naming_its_sink_partition_restarts_that_partitions_producer() -> None:
    logs = RunLogs(MemoryObjects())  # type: ignore[arg-type]
    failure = FailureRecord("report.publish", -1, 1, f"input partition {BROKEN} is unavailable: object missing",
                            "worker", 100.0, cause=str(BROKEN))
    spec = job_of(build())
    handle_failure("publish_test", "run", failure, spec, services(logs), now=lambda: 100.0)
    decisions = logs.read("publish_test", "run").decisions
    assert [sorted(d.restart) for d in decisions] == [["report.1", "report.publish"]], decisions


def test_the_publishing_task_fails_at_once_naming_the_partition(monkeypatch: pytest.MonkeyPatch) -> None:
    """Airflow's retries (2 by default) would only read the same unreadable partition again before failover
    could restart its producer; the failure names the partition (the listener's cause)."""
    store = SimpleNamespace(config=StoreConfig(bucket="bkt", prefix="rf", access=S3Access()))
    monkeypatch.setattr(publishing, "default_store", lambda: store)
    monkeypatch.delenv("AIRFLOW__REGION_FAILOVER__PUBLISH_ROOT", raising=False)

    def unreadable(*args: Any, **kwargs: Any) -> Any:
        raise InputUnavailable(BROKEN, "object pre/cas/v1/ab/ab.parquet does not match its SHA-256")

    monkeypatch.setattr(publishing.tables, "publish", unreadable)
    run = SimpleNamespace(dag_id="publish_test", run_id="r", logical_date=datetime(2026, 1, 2, tzinfo=timezone.utc),
                          data_interval_end=None, run_after=None)
    with pytest.raises(Exception) as caught:
        build().get_task("report.publish").execute({"dag_run": run, "outlet_events": OutletEventAccessors(),
                                                    "inlet_events": {}})
    assert isinstance(caught.value, AirflowFailException), repr(caught.value)
    assert getattr(caught.value, "partition", None) == BROKEN


class RuntimeTaskInstance:
    """The worker's task instance of ``report.publish`` after its terminal failure (named as the Task SDK's: the
    listener tells the worker's from the scheduler's by the type name)."""

    def __init__(self) -> None:
        self.dag_id, self.run_id, self.task_id, self.map_index = "publish_test", "r", "report.publish", -1
        self.try_number, self.state = 1, TaskInstanceState.FAILED
        self.task = SimpleNamespace(dag=build())


def test_the_listener_records_a_publish_task_failure_naming_a_partition(monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[Any] = []
    monkeypatch.setattr(listener, "handle_failure", lambda dag_id, run_id, event, spec, *a, **k: calls.append(event))
    listener.FailoverListener().on_task_instance_failed(None, RuntimeTaskInstance(),
                                                        InputUnavailable(BROKEN, "object missing"))
    assert [(e.task_id, e.cause) for e in calls] == [("report.publish", str(BROKEN))]

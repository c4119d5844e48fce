"""Rendering a published sink: its publishing task, the parse-time errors, the job document, and the restart
set that takes the publishing task along with the sink's subtasks.

    gen#0 -> clean#0 ==+==> report#0 --\\
    gen#1 -> clean#1 ==+==> report#1 ----> report.publish  (outside the region groups)
"""

from __future__ import annotations

from typing import Any

import pytest
from airflow.sdk import DAG

from airflow_region_failover import RegionJob
from airflow_region_failover.exceptions import GraphError
from airflow_region_failover.failover.availability import KnownAvailability
from airflow_region_failover.failover.run_log import FailureRecord, RunLog
from airflow_region_failover.graph.ids import SubtaskId
from airflow_region_failover.job import JobSpec, job_of
from airflow_region_failover.naming import JOB_PARAM, subtasks_of
from airflow_region_failover.plugins.clearing import handler_of
from airflow_region_failover.publication.declaration import PublishMode
from airflow_region_failover.publication.operator import RegionPublishOperator


def noop(spark: Any, inputs: Any, context: Any) -> None:
    return None


def build(publish: str = "totals", mode: str = "append", on: str = "report", **dag_kwargs: Any) -> DAG:
    with DAG("publish_test", schedule=None, **dag_kwargs) as dag:
        job = RegionJob()
        published = {"publish": publish, "publish_mode": mode}
        job.step("gen", noop, parallelism=2)
        job.step("clean", noop, parallelism=2, **(published if on == "clean" else {}))
        job.step("report", noop, parallelism=2, **(published if on == "report" else {}))
        job.edge("gen", "clean", exchange="PIPELINED", distribution="POINTWISE")
        job.edge("clean", "report", exchange="BLOCKING")
        job.render()
    return dag


def test_a_published_sink_gets_one_publishing_task_after_all_its_subtasks() -> None:
    dag = build()
    task = dag.get_task("report.publish")
    assert isinstance(task, RegionPublishOperator)
    assert sorted(task.upstream_task_ids) == ["report.0", "report.1"]
    assert task.task_group is None or task.task_group.group_id is None, "outside the region groups"
    assert task.publication.table == "totals" and task.partitions == 2 and task.retries == 2
    assert subtasks_of(task.task_id) is None, "never mistaken for a subtask"


def test_publishing_task_takes_the_dags_default_retries() -> None:
    assert build(default_args={"retries": 5}).get_task("report.publish").retries == 5


def test_the_job_document_carries_the_publication() -> None:
    dag = build(mode="overwrite")
    spec = job_of(dag)
    assert spec is not None and spec.publication("report") is not None
    again = JobSpec.from_document(dag.params[JOB_PARAM])
    assert again.publications == spec.publications
    assert again.publications[0].mode is PublishMode.OVERWRITE


@pytest.mark.parametrize(("kwargs", "message"), [
    ({"on": "clean"}, "step 'clean' has outgoing edges, so it is no sink"),
    ({"publish": "bad-name"}, "step 'report': publish='bad-name' is not a table name"),
    ({"mode": "merge"}, "step 'report': publish_mode='merge' is unknown"),
])
def test_bad_publications_fail_at_parse_time_naming_the_step(kwargs: dict[str, Any], message: str) -> None:
    with pytest.raises(GraphError, match=message):
        build(**kwargs)


def test_a_restart_of_a_sink_subtask_takes_its_publishing_task_along() -> None:
    """report#1 fails -> restart {report#1} and report.publish (which its failure left upstream_failed)."""
    spec = job_of(build())
    assert spec is not None
    failure = FailureRecord("report.1", -1, 1, "boom", "worker", 100.0)
    plan = spec.plan(SubtaskId("report", 1), KnownAvailability())
    log, _ = handler_of(spec).handle(RunLog("publish_test", "run"), failure, plan, (), 100.0)
    decision = log.open_decision
    assert decision is not None and decision.restart == ("report.1", "report.publish")
    assert decision.reasons["report.publish"] == "failed"


def test_a_restart_elsewhere_leaves_the_publishing_task_alone() -> None:
    spec = job_of(build())
    assert spec is not None
    assert spec.followers(SubtaskId("gen", 0)) == ()
    assert spec.followers(SubtaskId("report", 0)) == ("report.publish",)

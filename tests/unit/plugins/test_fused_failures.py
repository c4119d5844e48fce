"""A failure of a fused region's task: what the failure handler reads and which subtask it restarts from.

    src#0,1 ==B==> [gen#0,1 --FUSED keyed--> agg#0,1] ==B==> sink#0      one task gen.agg.0; agg#1 raises
"""

from __future__ import annotations

import pytest

from airflow_region_failover import JobGraphBuilder, SubtaskId
from airflow_region_failover.failover.run_log import FailureRecord
from airflow_region_failover.graph.auto import AutoDeclaration, Choice, ExchangePlan, resolve
from airflow_region_failover.job import JobSpec
from airflow_region_failover.naming import FAILED_SUBTASK
from airflow_region_failover.plugins.clearing import failed_subtask, task_reads
from airflow_region_failover.plugins.listener import failure_event
from airflow_region_failover.spark.compute import naming_member

DECLARED = (JobGraphBuilder().step("src", parallelism=2).step("gen", parallelism=2).step("agg", parallelism=2)
            .step("sink", parallelism=1)
            .edge("src", "gen", exchange="BLOCKING", distribution="POINTWISE")
            .edge("gen", "agg", exchange="AUTO", partition_by=["k"])
            .edge("agg", "sink", exchange="BLOCKING", distribution="BROADCAST").build())
PLAN = ExchangePlan({"gen->agg": Choice.FUSED})
SPEC = JobSpec(resolve(DECLARED, PLAN), {}, auto=AutoDeclaration(("gen->agg",), {}, PLAN))


class TI:
    dag_id, run_id, task_id, try_number, map_index = "d", "r", "gen.agg.0", 1, -1


def test_the_task_reads_what_every_member_reads() -> None:
    assert [str(r.partition) for r in task_reads(SPEC, "gen.agg.0")] == ["src->gen#0", "src->gen#1"]
    assert [str(r.partition) for r in task_reads(SPEC, "sink.0")] == ["agg->sink#0", "agg->sink#1"]
    assert task_reads(SPEC, "sink.publish") == ()


def test_the_member_that_raised_is_the_failed_subtask_and_survives_the_record() -> None:
    with pytest.raises(RuntimeError) as raised, naming_member(SubtaskId("agg", 1)):
        raise RuntimeError("injected failure of agg#1")
    assert getattr(raised.value, FAILED_SUBTASK) == "agg#1"
    record = failure_event(TI(), raised.value, "worker")
    assert record.subtask == "agg#1" and FailureRecord.from_json(record.to_json()) == record
    assert failed_subtask(SPEC, record) == SubtaskId("agg", 1)


def test_without_a_named_member_or_with_a_stranger_the_task_head_is_the_failed_subtask() -> None:
    record = failure_event(TI(), RuntimeError("boom"), "worker")
    assert record.subtask is None and "subtask" not in record.to_json()
    assert failed_subtask(SPEC, record) == SubtaskId("gen", 0)
    stranger = FailureRecord.from_json({**record.to_json(), "subtask": "sink#0"})
    assert failed_subtask(SPEC, stranger) == SubtaskId("gen", 0)  # not a member of gen.agg.0: not trusted

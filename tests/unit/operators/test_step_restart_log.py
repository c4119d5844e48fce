"""The step operator reads its run's decision log once, and only on a try after the first
(:mod:`airflow_region_failover.operators.step`): the restart delay and the reuse rule both answer from that read::

    b#0 ==> c#0        b =BLOCKING=> c; c#0's task is the one that runs
"""

from __future__ import annotations

from typing import Any

import pytest

from airflow_region_failover import JobGraphBuilder
from airflow_region_failover.failover.run_log import Decision, DecisionStatus, RunLog
from airflow_region_failover.job import JobRuntime, JobSpec, StepImpl
from airflow_region_failover.operators import step
from airflow_region_failover.spark.ledger import TaskSummary
from airflow_region_failover.spark.run import restart_of

GRAPH = JobGraphBuilder().step("b").step("c").edge("b", "c", exchange="BLOCKING").build()
SUMMARY = {"subtask": "c#0", "attempt": 1, "rows": {}, "read": {"bytes": 0, "objects": 0, "partition_bytes": 0},
           "inputs": {}, "outputs": {}}
DECISION = Decision(1, DecisionStatus.APPLIED, 100.0, (), restart=("c.0",), reasons={"c.0": "consumer"},
                    apply_at=100.0, applied_at=101.0)
DOC = RunLog("rf", "r", decisions=(DECISION,), cleared_tries={"c.0": 1})


class TI:
    dag_id, run_id, task_id = "rf", "r", "c.0"

    def __init__(self, try_number: int) -> None:
        self.try_number = try_number


class CountingLogs:
    def __init__(self) -> None:
        self.reads = 0

    def read(self, dag_id: str, run_id: str) -> RunLog:
        self.reads += 1
        return DOC


def run(monkeypatch: pytest.MonkeyPatch, try_number: int) -> tuple[CountingLogs, list[Any]]:
    logs, handed = CountingLogs(), []

    def fake_run_chain(runtime: Any, members: Any, context: Any, run_log: RunLog | None = None,
                       listener: Any = None) -> TaskSummary:
        handed.append(run_log)
        return TaskSummary.from_json(SUMMARY)

    monkeypatch.setattr(step, "default_run_logs", lambda: logs)
    monkeypatch.setattr(step, "run_chain", fake_run_chain)
    monkeypatch.setattr(step.metrics, "emit_task", lambda *args: None)
    op = step.RegionStepOperator(task_id="c.0", subtask="c#0", runtime=JobRuntime(
        JobSpec(GRAPH, {}), {s: StepImpl(s, fn=lambda spark, inputs, ctx: None) for s in ("b", "c")}))
    op.execute({"ti": TI(try_number)})  # type: ignore[arg-type]
    return logs, handed


def test_a_first_try_reads_no_decision_log(monkeypatch: pytest.MonkeyPatch) -> None:
    logs, handed = run(monkeypatch, 1)
    assert logs.reads == 0 and handed == [None]


def test_a_restarted_try_reads_the_log_once_and_hands_it_to_the_run(monkeypatch: pytest.MonkeyPatch) -> None:
    logs, handed = run(monkeypatch, 2)
    assert logs.reads == 1 and handed == [DOC]


def test_the_run_answers_which_decision_restarted_it_from_the_log_it_was_handed() -> None:
    class Unreadable:
        def read(self, dag_id: str, run_id: str) -> RunLog:
            raise AssertionError("read again")

    assert restart_of(TI(2), Unreadable(), known=DOC) == DECISION  # type: ignore[arg-type]
    assert restart_of(TI(3), Unreadable(), known=DOC) is None  # type: ignore[arg-type]

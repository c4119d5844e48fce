"""The step operator reads its run's decision log once, and only on a try after the first
(:mod:`airflow_region_failover.decisions.try_log`): the restart delay and the reuse rule both answer from that read,
and a log that cannot be read makes the try wait and keep nothing::

    b#0 ==> c#0        b =BLOCKING=> c; c#0's task is the one that runs
"""

from __future__ import annotations

import threading
from typing import Any

import pytest

from airflow_region_failover import JobGraphBuilder
from airflow_region_failover.decisions import try_log
from airflow_region_failover.decisions.try_log import LogState, TryLog
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


def run(monkeypatch: pytest.MonkeyPatch, try_number: int) -> tuple[CountingLogs, list[TryLog]]:
    logs, handed = CountingLogs(), []

    def fake_run_chain(runtime: Any, members: Any, context: Any, run_log: TryLog | None = None,
                       listener: Any = None, looked_up: Any = None) -> TaskSummary:
        assert run_log is not None
        handed.append(run_log)
        return TaskSummary.from_json(SUMMARY)

    monkeypatch.setattr(try_log, "default_run_logs", lambda: logs)
    monkeypatch.setattr(step, "run_chain", fake_run_chain)
    monkeypatch.setattr(step.metrics, "emit_task", lambda *args: None)
    op = step.RegionStepOperator(task_id="c.0", subtask="c#0", runtime=JobRuntime(
        JobSpec(GRAPH, {}), {s: StepImpl(s, fn=lambda spark, inputs, ctx: None) for s in ("b", "c")}))
    op.execute({"ti": TI(try_number)})  # type: ignore[arg-type]
    return logs, handed


def test_a_first_try_reads_no_decision_log(monkeypatch: pytest.MonkeyPatch) -> None:
    logs, handed = run(monkeypatch, 1)
    assert logs.reads == 0 and handed == [TryLog("c.0", 1, LogState.FIRST_TRY)]


def test_a_restarted_try_reads_the_log_once_and_hands_it_to_the_run(monkeypatch: pytest.MonkeyPatch) -> None:
    logs, handed = run(monkeypatch, 2)
    assert logs.reads == 1 and handed == [TryLog("c.0", 2, LogState.READ, DOC)]


def test_the_run_answers_which_decision_restarted_it_from_the_log_it_was_handed() -> None:
    class Unreadable:
        def read(self, dag_id: str, run_id: str) -> RunLog:
            raise AssertionError("read again")

    assert restart_of(TI(2), Unreadable(), known=TryLog("c.0", 2, LogState.READ, DOC)) == DECISION  # type: ignore[arg-type]
    assert restart_of(TI(3), Unreadable(), known=TryLog("c.0", 3, LogState.READ, DOC)) is None  # type: ignore[arg-type]


FIXED_DELAY = {"restart-strategy.type": "fixed-delay", "restart-strategy.fixed-delay.attempts": "3",
               "restart-strategy.fixed-delay.delay": "1 s"}
B_DECISION = Decision(1, DecisionStatus.APPLIED, 100.0, (), restart=("b.0",), reasons={"b.0": "consumer"},
                      apply_at=100.0, applied_at=101.0)


class BTI(TI):
    task_id = "b.0"


class ReadableOnTheSecondRead:
    """S3 answers 503 to the first read of the log and serves it afterwards."""

    def __init__(self) -> None:
        self.reads = 0

    def read(self, dag_id: str, run_id: str) -> RunLog:
        self.reads += 1
        if self.reads == 1:
            raise OSError("503 Slow Down")
        return RunLog("rf", "r", decisions=(B_DECISION,), cleared_tries={"b.0": 1})


def test_a_try_facing_an_unreadable_log_neither_skips_the_wait_nor_keeps(monkeypatch: pytest.MonkeyPatch) -> None:
    """The try's one read of the log fails: it waits the strategy's first backoff (1 s) and keeps nothing — a
    second read that would succeed is never made, so the reuse rule cannot answer from it."""
    from airflow_region_failover.spark import run as spark_run

    logs, slept, started = ReadableOnTheSecondRead(), [], []

    def fake_run_chain(runtime: Any, members: Any, context: Any, run_log: Any = None,
                       listener: Any = None, looked_up: Any = None) -> TaskSummary:
        started.append(spark_run.start(runtime, members, context, None, run_log))  # b#0 reads nothing: no store
        return TaskSummary.from_json({**SUMMARY, "subtask": "b#0"})

    monkeypatch.setattr(try_log, "default_run_logs", lambda: logs)
    real_sleep, caller = step.time.sleep, threading.current_thread()

    def sleep(seconds: float) -> None:  # time.sleep is the process's: another thread alive (a session's stack) sleeps
        if threading.current_thread() is caller:
            slept.append(seconds)
        else:
            real_sleep(seconds)

    monkeypatch.setattr(step.time, "sleep", sleep)
    monkeypatch.setattr(step, "run_chain", fake_run_chain)
    monkeypatch.setattr(step.metrics, "emit_task", lambda *args: None)
    op = step.RegionStepOperator(task_id="b.0", subtask="b#0", runtime=JobRuntime(
        JobSpec(GRAPH, FIXED_DELAY), {s: StepImpl(s, fn=lambda spark, inputs, ctx: None) for s in ("b", "c")}))
    op.execute({"ti": BTI(2)})  # type: ignore[arg-type]
    assert (slept, started[0].restart, logs.reads) == ([1.0], None, 1)


def test_the_three_answers_of_the_reader_and_their_json_form() -> None:
    """First try: no wait, nothing kept; read: the log's answers; unreadable: the first backoff, nothing kept."""
    from airflow_region_failover.failover.options import parse_options

    config = parse_options(FIXED_DELAY)
    first = TryLog("c.0", 1, LogState.FIRST_TRY)
    read = TryLog("c.0", 2, LogState.READ, DOC)
    unreadable = TryLog("c.0", 2, LogState.UNREADABLE, error="OSError: 503")
    assert [t.wait(config, 200.0) for t in (first, read, unreadable)] == [0.0, 0.0, 1.0]
    assert [t.restart() for t in (first, read, unreadable)] == [None, DECISION, None]
    assert all(TryLog.from_json(t.to_json()) == t for t in (first, read, unreadable))
    with pytest.raises(ValueError, match="state 'unreadable' carries no log"):
        TryLog("c.0", 2, LogState.UNREADABLE, DOC)

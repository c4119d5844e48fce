"""The planner's run history read from the store and Airflow's metadata DB (plugins/run_history.py): what a task's
timeline says of persisting, reading back and compute, and the records of runs whose summaries, manifests and
tries are where a real run leaves them (moto's in-memory S3, a throw-away SQLite Airflow schema)."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import replace
from datetime import datetime, timedelta, timezone
from typing import Any

import pyarrow as pa
import pytest

from airflow_region_failover import timeline
from airflow_region_failover.graph.ids import PartitionId, SubtaskId
from airflow_region_failover.plugins.run_history import AirflowHistory, TaskTries, run_record, task_cost
from airflow_region_failover.spark.ledger import (
    CheckpointEntry,
    InputEntry,
    OutputEntry,
    ReadTotals,
    TaskLedger,
    TaskSummary,
)
from airflow_region_failover.store.keys import AttemptId
from airflow_region_failover.timeline import Span, Timeline
from tests.support.metadata import add_run, add_task, delete_dag
from tests.support.store import moto_store

DAG = "rf_advise"


def _summary(subtask: str, line: Timeline | None, outputs: dict[str, OutputEntry] | None = None,
             inputs: dict[str, InputEntry] | None = None, fetched: int = 0, chain: tuple[str, ...] = ()) -> TaskSummary:
    members = tuple(SubtaskId.parse(m) for m in (chain or (subtask,)))
    return TaskSummary(members, 1, {}, ReadTotals(fetched, 1, fetched), TaskLedger(inputs or {}, outputs or {}),
                       timeline=line)


def _line(seconds: float, spans: tuple[Span, ...] = (), **work: float) -> Timeline:
    return Timeline(1000.0, 1000.0, 1000.0 + seconds, spans, work)


def _out(size: int | None, kept: bool = False) -> OutputEntry:
    return OutputEntry(1, 10, kept, size)


def test_the_providers_writers_persist_their_work_over_the_writers_at_once() -> None:
    """encode 4 + hash 1 + upload 3 executor seconds by 2 writers at once: 4 s of a 10 s clock persist; the
    rest computes. Two outputs of one result share the seconds by bytes."""
    line = _line(10.0, (Span("job", 2.0, 6.0),), encode=4.0, hash=1.0, upload=3.0, writers=2.0)
    cost = task_cost(_summary("gen#0", line, {"gen->clean#0": _out(300), "gen->clean#1": _out(100)}), lambda p: None)
    assert cost.writes == {"gen->clean": (400, 4.0)}
    assert cost.compute == pytest.approx(6.0) and cost.computed


def test_sparks_own_writer_persists_its_driver_seconds_or_the_bytes_at_the_default_throughput() -> None:
    """``spark_writer``: the 20 s job reads, computes and encodes; 250 MB at 25 MB/s is 10 s of persisting, more
    than the driver's 3 s of hash and upload, so compute is the 30 s clock less 10 s."""
    line = _line(30.0, (Span("job", 5.0, 20.0),), spark_writer=1.0, encode=20.0, hash=1.0, upload=2.0, writers=1.0)
    cost = task_cost(_summary("join#0", line, {"j#0": _out(250_000_000)}), lambda p: None)
    assert cost.writes == {"j": (250_000_000, 10.0)}
    assert cost.compute == pytest.approx(20.0)
    small = task_cost(_summary("join#0", line, {"j#0": _out(1_000_000)}), lambda p: None)
    assert small.writes["j"][1] == pytest.approx(3.0)  # the driver's measured seconds


def test_reading_back_is_the_read_spans_and_the_fetched_bytes_split_over_the_inputs_by_bytes() -> None:
    """0.5 s of read spans and 40 MB fetched at 40 MB/s: 1.5 s, three quarters for the larger input."""
    line = _line(10.0, (Span("read", 1.0, 0.5), Span("read_probe", 1.0, 0.2)))
    inputs = {"a->c#0": InputEntry(1, 30, 1, False), "b->c#0": InputEntry(1, 10, 1, False)}
    cost = task_cost(_summary("c#0", line, inputs=inputs, fetched=40_000_000), lambda p: None)
    assert cost.reads == pytest.approx({"a->c": 1.125, "b->c": 0.375})
    assert cost.compute == pytest.approx(8.5)


def test_a_kept_try_measures_no_compute_and_its_step_is_left_out_of_the_run() -> None:
    """b#1 kept its committed output: step b has no complete measurement in this run; its bytes still count."""
    measured = _summary("b#0", _line(5.0), {"b->c#0": _out(10)})
    kept = _summary("b#1", _line(1.0), {"b->c#1": _out(20, kept=True)})
    record = run_record("r1", [TaskTries("b.0", 0, 5.0, measured), TaskTries("b.1", 1, 4.0, kept)],
                        lambda p: None, {"b": 2})
    assert record.steps == ()
    assert [(r.result, r.bytes) for r in record.results] == [("b->c", 30)]
    assert record.failures == {"b": 1} and record.task_seconds == 9.0


def test_a_checkpointed_try_records_one_checkpoints_seconds_outside_its_compute() -> None:
    """10 epochs, 4 checkpoints taking 0.5 + 0.5 + 1 + 2 s of a 20 s clock: C = 1 s per checkpoint, W = 16 s.
    A try that resumed after 5 of 10 epochs ran half the work: its compute counts double."""
    spans = tuple(Span("checkpoint", float(i), s) for i, s in enumerate((0.5, 0.5, 1.0, 2.0)))
    done = replace(_summary("sessions#0", _line(20.0, spans)), checkpoint=CheckpointEntry(10, 0, 0, 4, 100))
    cost = task_cost(done, lambda p: None)
    assert cost.checkpoint == pytest.approx(1.0) and cost.compute == pytest.approx(16.0)
    resumed = task_cost(replace(done, checkpoint=CheckpointEntry(10, 2, 5, 4, 100)), lambda p: None)
    assert resumed.compute == pytest.approx(32.0)
    record = run_record("r1", [TaskTries("sessions.0", 0, 20.0, done)], lambda p: None, {"sessions": 1})
    assert record.steps[0].checkpoint_seconds == pytest.approx(1.0)
    plain = task_cost(_summary("sessions#0", _line(20.0, spans)), lambda p: None)  # not checkpointed: no C
    assert plain.checkpoint is None and plain.compute == pytest.approx(20.0)
    assert run_record("r1", [TaskTries("sessions.0", 0, 20.0, _summary("sessions#0", _line(20.0)))],
                      lambda p: None, {"sessions": 1}).steps[0].checkpoint_seconds is None


def test_a_sliced_try_reads_its_inputs_again_each_epoch_and_records_one_read_of_them() -> None:
    """A sliced try of 4 epochs (resumed after 1): its 3 epochs each read the subtask's whole share of its input
    again — 3 s of read spans and 120 MB fetched at 40 MB/s, 6 s — so one read is 2 s; the other 4 s are what
    slicing costs (the epochs' C), in neither the input's read seconds nor the compute."""
    line = _line(30.0, tuple(Span("read", float(i), 1.0) for i in range(3)))
    inputs = {"a->join#0": InputEntry(1, 40_000_000, 1, False)}
    sliced = replace(_summary("join#0", line, inputs=inputs, fetched=120_000_000),
                     checkpoint=CheckpointEntry(4, 2, 1, 3, 10, sliced=True))
    cost = task_cost(sliced, lambda p: None)
    assert cost.reads == pytest.approx({"a->join": 2.0})
    assert cost.compute == pytest.approx((30.0 - 6.0) * 4 / 3)  # the whole step's work, as for a resumed try
    assert CheckpointEntry.from_json(sliced.checkpoint.to_json()) == sliced.checkpoint  # type: ignore[union-attr]
    checkpointed = task_cost(replace(sliced, checkpoint=CheckpointEntry(4, 2, 1, 3, 10)), lambda p: None)
    assert checkpointed.reads == pytest.approx({"a->join": 6.0})  # a checkpointed step reads each slice once
    assert "sliced" not in CheckpointEntry(4, 2, 1, 3, 10).to_json()  # the form of summaries before slicing


def test_a_chain_splits_its_compute_over_its_members_and_a_failure_counts_for_its_head() -> None:
    chain = _summary("clean#0", _line(8.0), chain=("gen#0", "clean#0"))
    record = run_record("r1", [TaskTries("gen.clean.0", 2, 20.0, chain)], lambda p: None, {"gen": 1, "clean": 1})
    assert [(s.step, s.subtask_seconds) for s in record.steps] == [("gen", (4.0,)), ("clean", (4.0,))]
    assert record.failures == {"gen": 2}


@pytest.fixture
def session(metadata_engine: Any) -> Iterator[Any]:
    from airflow.utils.session import create_session

    with create_session() as s:
        delete_dag(s, DAG)
    with create_session() as s:
        yield s


def _history_row(session: Any, run_id: str, task_id: str, try_number: int, state: str, duration: float) -> None:
    import uuid

    from airflow.models.taskinstancehistory import TaskInstanceHistory

    session.execute(TaskInstanceHistory.__table__.insert().values(
        task_instance_id=uuid.uuid4(), dag_id=DAG, run_id=run_id, task_id=task_id, map_index=-1,
        try_number=try_number, state=state, duration=duration, pool="default_pool", operator="RegionStepOperator"))


def _returned(session: Any, run_id: str, task_id: str, value: object, duration: float) -> None:
    from airflow.models.taskinstance import TaskInstance
    from airflow.models.xcom import XComModel

    session.query(TaskInstance).filter(TaskInstance.dag_id == DAG, TaskInstance.run_id == run_id,
                                       TaskInstance.task_id == task_id).update({"duration": duration})
    session.commit()
    XComModel.set("return_value", value, dag_id=DAG, task_id=task_id, run_id=run_id, session=session)
    session.commit()


def test_the_history_of_a_dag_from_its_summaries_manifests_and_tries(session: Any) -> None:
    """Two ended runs (and one still running, not read) of ``gen -> report``: the producer's summary carries a
    real write's timeline and no bytes (its manifest is read from the store); run r2's report failed once
    (a ``task_instance_history`` row) before its try that succeeded."""
    now = datetime.now(timezone.utc)
    table = pa.table({"k": list(range(20_000))})
    with moto_store() as store:
        for n, run_id in enumerate(("r1", "r2")):
            add_run(session, DAG, run_id, "success", now - timedelta(minutes=10 - n))
            add_task(session, DAG, run_id, "gen.0", "success", 1)
            add_task(session, DAG, run_id, "report.0", "success", 1 + n)
            session.commit()
            with timeline.measured() as clock:
                store.write_arrow(table, AttemptId(DAG, run_id, PartitionId("gen->report", 0), 1))
            line = clock.timeline()
            produced = _summary("gen#0", line, {"gen->report#0": OutputEntry(1, 20_000, False)})
            _returned(session, run_id, "gen.0", produced.to_json(), 3.0)
            read = _summary("report#0", _line(2.0, (Span("read", 0.1, 0.2),)),
                            inputs={"gen->report#0": InputEntry(1, 500, 1, False)}, fetched=500)
            _returned(session, run_id, "report.0", read.to_json(), 4.0)
        _history_row(session, "r2", "report.0", 1, "failed", 6.0)
        add_run(session, DAG, "r3", "running", None)
        session.commit()
        history = AirflowHistory(store, {"gen": 1, "report": 1}).history(DAG)
        newest = AirflowHistory(store, {"gen": 1, "report": 1}, window=1).history(DAG)
        size = store.manifest(DAG, "r1", PartitionId("gen->report", 0)).total_bytes
    assert [r.run_id for r in history.runs] == ["r1", "r2"] and [r.run_id for r in newest.runs] == ["r2"]
    first, second = history.runs
    assert [r.result for r in first.results] == ["gen->report"] and first.results[0].bytes == size > 0
    assert first.results[0].write_seconds is not None and first.results[0].read_seconds is not None
    assert {s.step for s in first.steps} == {"gen", "report"}
    assert (first.failures, first.task_seconds) == ({}, 7.0)
    assert (second.failures, second.task_seconds) == ({"report": 1}, 13.0)


def test_a_result_whose_bytes_are_unknown_is_not_measured_small() -> None:
    """b#1's summary has no bytes and its manifest is gone: the result is left out of the run, not counted 10."""
    first = _summary("b#0", _line(5.0), {"b->c#0": _out(10)})
    second = _summary("b#1", _line(5.0), {"b->c#1": _out(None)})
    record = run_record("r1", [TaskTries("b.0", 0, 5.0, first), TaskTries("b.1", 0, 5.0, second)],
                        lambda p: None, {"b": 2})
    assert record.results == () and [s.step for s in record.steps] == ["b"]


def test_each_run_is_read_with_the_plan_it_ran(session: Any) -> None:
    """Run r1 fixed the decision stored before it (``gen->report`` FUSED); r2 stored no plan (rendered before
    plans were stored): it ran the job's rendered plan."""
    from airflow_region_failover.decisions.plans import Plans
    from airflow_region_failover.graph.auto import Choice, ExchangePlan
    from airflow_region_failover.planning.stored import PlanDecision

    now = datetime.now(timezone.utc)
    fused = ExchangePlan({"gen->report": Choice.FUSED})
    with moto_store() as store:
        for n, run_id in enumerate(("r1", "r2")):
            add_run(session, DAG, run_id, "success", now - timedelta(minutes=10 - n))
            add_task(session, DAG, run_id, "gen.report.0", "success", 1)
            session.commit()
            _returned(session, run_id, "gen.report.0", _summary("gen#0", _line(2.0)).to_json(), 2.0)
        plans = Plans(store.objects)
        plans.decide_next(DAG, PlanDecision("d1", fused, "switches", 1.0, "r0"))
        assert plans.fix(DAG, "r1").plan == fused
        history = AirflowHistory(store, {"gen": 1, "report": 1}).history(DAG)
        rendered = AirflowHistory(store, {"gen": 1, "report": 1}, rendered=fused).history(DAG)
    assert [r.plan for r in history.runs] == [fused, ExchangePlan()]
    assert [r.plan for r in rendered.runs] == [fused, fused]


def test_a_resumed_fused_try_measures_no_compute_but_its_writes_count() -> None:
    """gen.agg.0's try 2 kept gen's committed partition and recomputed agg's: its clock measured agg alone, so it is
    no measurement of the two members' compute (split evenly it would halve agg's); agg's write seconds count."""
    line = _line(6.0, (Span("job", 1.0, 4.0),), encode=1.0, hash=0.5, upload=0.5, writers=1.0)
    resumed = _summary("gen#0", line, {"gen->agg#0": _out(10, kept=True), "agg->sink#0": _out(30)},
                       chain=("gen#0", "agg#0"))
    cost = task_cost(resumed, lambda p: None)
    assert not cost.computed and cost.writes == {"gen->agg": (10, 0.0), "agg->sink": (30, 2.0)}
    record = run_record("r1", [TaskTries("gen.agg.0", 1, 9.0, resumed)], lambda p: None, {"gen": 1, "agg": 1})
    assert record.steps == () and {r.result for r in record.results} == {"gen->agg", "agg->sink"}


def test_a_fused_tasks_failure_counts_for_the_member_that_raised(session: Any) -> None:
    """gen.agg.0 runs ``gen#0 -> agg#0`` in one task; its try 1 failed in agg#0 (the decision's failure names it):
    the failure counts for agg, not for the task's first step — the planner protects what such a failure would
    make recompute. A failed try the decision log does not name counts for the head, as a chain's."""
    from airflow_region_failover.decisions.storage import RunLogs
    from airflow_region_failover.failover.run_log import Decision, DecisionStatus, FailureRecord, RunLog

    now = datetime.now(timezone.utc)
    line = _line(4.0)
    with moto_store() as store:
        for n, run_id in enumerate(("r1", "r2")):
            add_run(session, DAG, run_id, "success", now - timedelta(minutes=10 - n))
            add_task(session, DAG, run_id, "gen.agg.0", "success", 2)
            _history_row(session, run_id, "gen.agg.0", 1, "failed", 1.0)
            session.commit()
            _returned(session, run_id, "gen.agg.0", _summary("gen#0", line, chain=("gen#0", "agg#0")).to_json(), 4.0)
        failure = FailureRecord("gen.agg.0", -1, 1, "KeyError: 'k'", "", 1.0, subtask="agg#0")
        decided = RunLog(DAG, "r1", decisions=(Decision(1, DecisionStatus.APPLIED, 1.0, (failure,)),))
        RunLogs(store.objects).update(DAG, "r1", lambda log: (decided, None))
        history = AirflowHistory(store, {"gen": 1, "agg": 1}).history(DAG)
    assert [r.failures for r in history.runs] == [{"agg": 1}, {"gen": 1}]

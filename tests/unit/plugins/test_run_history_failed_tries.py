"""What a fused task's tries measured when some failed (plugins/run_history.py, decisions/failed_tries.py).

    gen#0 ==B==> agg#0 ==B==> (sink)        one fused task gen.agg.0: try 1 commits gen->agg#0, then agg#0 fails;
                                            try 2 keeps gen#0's region and runs agg#0
"""

from __future__ import annotations

from dataclasses import replace
from datetime import datetime, timedelta, timezone
from typing import Any

from airflow_region_failover.decisions.failed_tries import FailedTries
from airflow_region_failover.graph.ids import SubtaskId
from airflow_region_failover.planning.history import FailedTry
from airflow_region_failover.plugins.run_history import AirflowHistory, TaskTries, run_record, task_cost, tries_of
from airflow_region_failover.spark.ledger import CheckpointEntry, OutputEntry, ReadTotals, TaskLedger, TaskSummary
from airflow_region_failover.timeline import Span, Timeline
from tests.support.metadata import add_run, add_task
from tests.support.store import moto_store
from tests.unit.plugins.test_run_history import DAG, _history_row, _returned, session  # noqa: F401 - the fixture

GEN, AGG = SubtaskId("gen", 0), SubtaskId("agg", 0)
TASK = "gen.agg.0"


def _line(seconds: float, write_seconds: float) -> Timeline:
    return Timeline(1000.0, 1000.0, 1000.0 + seconds, (Span("job", 0.0, seconds),),
                    {"encode": write_seconds, "hash": 0.0, "upload": 0.0, "writers": 1.0})


def _summary(attempt: int, members: tuple[SubtaskId, ...], outputs: dict[str, OutputEntry], line: Timeline,
             resumed: tuple[SubtaskId, ...] = ()) -> TaskSummary:
    return TaskSummary(members, attempt, {}, ReadTotals(0, 0, 0), TaskLedger({}, outputs), timeline=line,
                       resumed=resumed)


FAILED = _summary(1, (GEN,), {"gen->agg#0": OutputEntry(1, 10, False, 1000)}, _line(7.0, 2.0))
"""Try 1's record: gen#0 measured (7 s, 2 s of them writing 1000 bytes), then agg#0 failed."""
RESUMED = _summary(2, (GEN, AGG), {"gen->agg#0": OutputEntry(1, 10, True, 1000),
                                   "agg->sink#0": OutputEntry(2, 5, False, 500)}, _line(4.0, 1.0), resumed=(GEN,))
"""Try 2: kept gen#0's commit, ran agg#0 (4 s, 1 s writing)."""


def test_a_try_that_kept_some_regions_measures_the_members_it_ran() -> None:
    cost = task_cost(RESUMED, lambda p: None)
    assert cost.computed and cost.members == (AGG,) and cost.compute == 3.0
    assert cost.written == {next(iter(cost.written)): 1.0} and str(next(iter(cost.written))) == "agg->sink#0"


def test_a_member_a_later_try_kept_is_measured_by_the_failed_try_that_committed_it() -> None:
    record = run_record("r1", [TaskTries(TASK, 1, 11.0, RESUMED, (FAILED,))], lambda p: None, {"gen": 1, "agg": 1})
    assert {s.step: s.subtask_seconds for s in record.steps} == {"gen": (5.0,), "agg": (3.0,)}
    results = {r.result: (r.bytes, r.write_seconds) for r in record.results}
    assert results == {"gen->agg": (1000, 2.0), "agg->sink": (500, 1.0)}  # bytes once, gen->agg's write from try 1
    assert record.failures == {"gen": 1}  # the decision log names no member here: the task's first step


def test_without_the_failed_tries_record_the_kept_member_is_unmeasured() -> None:
    record = run_record("r1", [TaskTries(TASK, 1, 11.0, RESUMED)], lambda p: None, {"gen": 1, "agg": 1})
    assert [s.step for s in record.steps] == ["agg"]


def test_a_run_whose_task_never_succeeded_is_read_from_its_failed_tries(session: Any) -> None:  # noqa: F811
    """r1 failed: its one task has no summary, only try 1's record in the store — the run still measures gen."""
    with moto_store() as store:
        add_run(session, DAG, "r1", "failed", datetime.now(timezone.utc) - timedelta(minutes=5))
        add_task(session, DAG, "r1", TASK, "failed", 1)
        session.commit()
        FailedTries(store.objects).keep(DAG, "r1", TASK, 1, FAILED.to_json())
        store.objects.put(store.objects.layout.failed_try(DAG, "r1", TASK, 2), b"{not json")  # skipped, logged
        history = AirflowHistory(store, {"gen": 1, "agg": 1}).history(DAG)
    assert [r.run_id for r in history.runs] == ["r1"]
    assert {s.step: s.subtask_seconds for s in history.runs[0].steps} == {"gen": (5.0,)}


def test_the_record_round_trips_and_keeping_never_raises() -> None:
    with moto_store() as store:
        tries = FailedTries(store.objects)
        tries.keep(DAG, "r1", TASK, 1, FAILED.to_json())
        tries.keep(DAG, "r1", TASK, 0, FAILED.to_json())  # no try 0: logged, not raised
        found = tries.of_run(DAG, "r1")
        layout = store.objects.layout
        assert layout.failed_try(DAG, "r1", TASK, 1).startswith(f"{layout.failover_root}/runs/")
    assert list(found) == [TASK] and [TaskSummary.from_json(b) for b in found[TASK]] == [FAILED]


def test_each_failed_try_records_its_seconds_and_how_far_into_the_attempt_it_failed(session: Any) -> None:  # noqa: F811
    """gen.agg.0 failed twice (30 s, then 60 s — killed, as by a steady clock) before a 120 s try succeeded: the
    failures count for gen (the task's first step; no decision names a member) with a quarter and a half of an
    attempt lost; the run's task seconds are all three tries'."""
    with moto_store() as store:
        add_run(session, DAG, "r1", "success", datetime.now(timezone.utc) - timedelta(minutes=5))
        add_task(session, DAG, "r1", TASK, "success", 3)
        _history_row(session, "r1", TASK, 2, "failed", 60.0)
        _history_row(session, "r1", TASK, 1, "failed", 30.0)
        session.commit()
        _returned(session, "r1", TASK, RESUMED.to_json(), 120.0)
        (run,) = AirflowHistory(store, {"gen": 1, "agg": 1}).history(DAG).runs
    assert run.failures == {"gen": 2} and run.task_seconds == 210.0
    assert run.failed_tries == {"gen": (FailedTry(30.0, 0.25), FailedTry(60.0, 0.5))}


def test_a_try_longer_than_the_one_that_succeeded_lost_one_attempt_and_epochs_lose_no_share() -> None:
    """A failed try longer than the successful one (which resumed kept members) lost at most one attempt; a task
    that ran in epochs lost what followed its last checkpoint, which its try's time does not say; in a run whose
    task never succeeded an attempt's length is unknown (a try killed at 80 s is no late failure)."""
    tries = tries_of(TASK, [(2, "success", 40.0), (1, "failed", 90.0)], RESUMED)
    assert tries.failed_tries() == (FailedTry(90.0, 1.0),)
    sliced = tries_of(TASK, [(2, "success", 40.0), (1, "failed", 90.0)],
                      replace(RESUMED, checkpoint=CheckpointEntry(4, 1, 1, 2, 1000, sliced=True)))
    assert sliced.failed_tries() == (FailedTry(90.0, None),)
    never = tries_of(TASK, [(1, "failed", 20.0), (2, "failed", 80.0)], None)
    assert never.failed == 2 and never.failed_tries() == (FailedTry(20.0), FailedTry(80.0))

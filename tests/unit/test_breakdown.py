"""Where a run's time goes (``benchmarks/_breakdown.py``): the critical path of a run and its cut into categories,
on made-up task timelines::

    gen#0 --+
            +--> join --> report        gen#0 ends last of the two: the path is gen#0 -> join -> report
    gen#1 --+
"""

from __future__ import annotations

import pytest

from airflow_region_failover.timeline import Span, Timeline
from benchmarks._breakdown import (
    AIRFLOW_START,
    COMMIT,
    ENCODE,
    END,
    HASH,
    QUEUED,
    READ_COMPUTE,
    RUN_END,
    SCHEDULING,
    SETUP,
    SPARK_WRITER,
    STARTUP,
    UPLOAD,
    TaskTry,
    app_breakdown,
    compare,
    critical_path,
    markdown,
    overhead,
    run_breakdown,
)


def line(start: float, job: float, work: dict[str, float], parsed: float = 0.5) -> Timeline:
    """A task clock started at ``start`` (epoch s) with 1 s of set-up, one write (its job ``job`` s) and 0.25 s of
    commit, ended 0.25 s later; its DAG file parsed ``parsed`` s before the clock started."""
    spans = (Span("airflow_start", -parsed, parsed), Span("job", 1.0, job), Span("write", 0.9, job + 0.4),
             Span("commit", 1.0 + job + 0.05, 0.25))
    return Timeline(start - 2.0, start, start + 1.0 + job + 0.5, spans, work)


def tasks() -> dict[str, TaskTry]:
    return {
        "gen.0": TaskTry("gen.0", 100.0, 101.0, 113.0, (), line(102.0, 10.0, {"encode": 4.0, "writers": 2.0})),
        "gen.1": TaskTry("gen.1", 100.0, 101.0, 108.0, (), None),
        "join": TaskTry("join", 114.0, 114.5, 126.5, ("gen.0", "gen.1"),
                        line(115.0, 10.0, {"encode": 2.0, "hash": 1.0, "upload": 3.0, "writers": 2.0})),
        "report": TaskTry("report", 127.0, 127.0, 131.0, ("join",), line(127.5, 2.0, {"encode": 0.5, "writers": 1})),
    }


def test_the_critical_path_steps_back_to_the_upstream_that_ended_last() -> None:
    assert [t.task_id for t in critical_path(tasks())] == ["gen.0", "join", "report"]


def test_the_run_is_cut_into_categories_that_add_up_to_its_wall_time() -> None:
    got = run_breakdown(tasks(), 99.0, 132.0)
    assert sum(got.values()) == pytest.approx(132.0 - 99.0)
    assert got[SCHEDULING] == pytest.approx(1.0 + 1.0 + 0.5)  # run start -> gen.0 queued; join; report
    assert got[QUEUED] == pytest.approx(1.0 + 0.5)
    assert got[STARTUP] == pytest.approx(0.5 + 0.0 + 0.0) and got[AIRFLOW_START] == pytest.approx(1.5)
    assert got[ENCODE] == pytest.approx(4.0 / 2 + 2.0 / 2 + 0.5) and got[HASH] == pytest.approx(0.5)
    assert got[UPLOAD] == pytest.approx(1.5)
    assert got[READ_COMPUTE] == pytest.approx(22.0 - got[ENCODE] - got[HASH] - got[UPLOAD])
    assert got[COMMIT] == pytest.approx(0.75) and got[RUN_END] == pytest.approx(1.0)
    assert got[SETUP] == pytest.approx(3 * 1.25)
    assert got[END] == pytest.approx((113.0 - 113.5) + (126.5 - 126.5) + (131.0 - 131.0))


def test_the_writers_parts_never_exceed_their_job() -> None:
    fast = {"x": TaskTry("x", 0.0, 0.0, 10.0, (), line(1.0, 1.0, {"encode": 50.0, "upload": 50.0, "writers": 1}))}
    got = run_breakdown(fast, 0.0, 10.0)
    assert got[ENCODE] + got[UPLOAD] == pytest.approx(1.0) and got[READ_COMPUTE] == pytest.approx(0.0)


def test_the_application_is_cut_the_same_way_and_compared_category_by_category() -> None:
    app = app_breakdown(line(10.0, 20.0, {"encode": 0.2, "writers": 1}, parsed=0.0), 32.0)
    assert app[STARTUP] == pytest.approx(2.0) and sum(app.values()) == pytest.approx(32.0 - 8.0)
    rows = compare(run_breakdown(tasks(), 99.0, 132.0), app)
    assert [r[0] for r in rows][:2] == [SCHEDULING, QUEUED]
    assert all(r[3] == pytest.approx(r[1] - r[2]) for r in rows)
    table = markdown(rows, 33.0, 24.0)
    assert "| **wall time** | **33.0** | **24.0** | **+9.0** |" in table and "100.0 % explained" in table


def test_a_step_task_overhead_is_its_start_to_its_first_job_and_its_last_write_to_its_end() -> None:
    join = tasks()["join"]
    assert overhead(join) == pytest.approx((115.0 + 1.0 - 114.5) + (126.5 - (115.0 + 0.9 + 10.4)))
    assert overhead(tasks()["gen.1"]) is None


def test_a_write_by_sparks_own_writer_is_one_job_less_the_drivers_hash_and_upload() -> None:
    spark = {"x": TaskTry("x", 0.0, 0.0, 20.0, (), line(1.0, 12.0, {"encode": 11.0, "hash": 0.5, "upload": 1.5,
                                                                    "writers": 1, "spark_writer": 1}))}
    got = run_breakdown(spark, 0.0, 20.0)
    assert got[SPARK_WRITER] == pytest.approx(10.0) and got[HASH] == pytest.approx(0.5)
    assert got[UPLOAD] == pytest.approx(1.5) and got.get(ENCODE, 0.0) == 0.0 and got.get(READ_COMPUTE, 0.0) == 0.0
    assert sum(got.values()) == pytest.approx(20.0)

"""A task's timeline (:mod:`airflow_region_failover.timeline`): spans on the current clock, nested and repeated,
executor work summed by kind, nothing recorded without a clock, and the record's JSON form."""

from __future__ import annotations

import contextvars
import json
import os
import time

import pytest

from airflow_region_failover import timeline
from airflow_region_failover.timeline import Clock, Span, Timeline, Waited


def test_spans_nest_and_repeat_on_the_current_clock_in_the_order_they_end() -> None:
    with timeline.measured(Clock(now=50.0, process_started=49.0)) as clock:
        with timeline.phase("write"), timeline.phase("job"):
            time.sleep(0.01)
        with timeline.phase("write"):
            time.sleep(0.005)
        timeline.add_work({"encode": 1.0, "upload": 2.0})
        timeline.add_work({"encode": 0.5})
        assert timeline.current() is clock
    got = clock.timeline()
    assert timeline.current() is None, "the clock is current only inside the block"
    assert [s.name for s in got.spans] == ["job", "write", "write"]
    job, first = got.spans[0], got.spans[1]
    assert job.seconds >= 0.01 and first.start <= job.start and first.end >= job.end
    assert got.total("write") == pytest.approx(first.seconds + got.spans[2].seconds)
    assert got.first("write") == first and got.last("write") == got.spans[2] and got.first("commit") is None
    assert got.work == {"encode": 1.5, "upload": 2.0}
    assert (got.process_started, got.started) == (49.0, 50.0) and got.ended >= 50.01


def test_without_a_clock_a_phase_records_nothing_and_raises_what_the_block_raised() -> None:
    def outside() -> None:
        assert timeline.current() is None
        with pytest.raises(KeyError), timeline.phase("lookup"):
            raise KeyError("x")
        timeline.add_work({"encode": 1.0})
        assert timeline.current() is None

    contextvars.copy_context().run(outside)


def test_a_span_that_raised_is_still_recorded() -> None:
    with timeline.measured() as clock, pytest.raises(RuntimeError), timeline.phase("compute"):
        raise RuntimeError("step failed")
    assert [s.name for s in clock.timeline().spans] == ["compute"]


def test_the_json_form_is_plain_and_reads_back() -> None:
    record = Timeline(10.0, 11.0, 15.5, (Span("lookup", 0.1, 0.2), Span("job", 1.0, 3.25)), {"wait": 4.0})
    body = record.to_json()
    assert body == {"process_started": 10.0, "started": 11.0, "ended": 15.5,
                    "spans": [["lookup", 0.1, 0.2], ["job", 1.0, 3.25]], "work": {"wait": 4.0}}
    assert Timeline.from_json(json.loads(json.dumps(body))) == record


def test_the_process_start_is_read_from_the_os_and_lies_before_now() -> None:
    started = timeline.process_start(os.getpid())
    assert started <= time.time() and started > time.time() - 24 * 3600


def test_waited_counts_the_seconds_spent_waiting_for_each_item() -> None:
    def slow() -> object:
        for item in range(2):
            time.sleep(0.01)
            yield item

    waited = Waited(iter(slow()))
    assert list(waited) == [0, 1] and waited.seconds >= 0.02

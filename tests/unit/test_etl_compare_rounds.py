"""How ``benchmarks/bench_etl_compare.py`` (and ``bench_breakdown.py``) order, warm up and report their runs
(``_etl_runs.rotated`` and ``warm_up_size``, ``step_spans``, ``rounds_table``, ``_etl_record.etl_record``): no
configuration always runs first, every one is warmed up at full scale first, the spread of the rounds and each step's
span are printed, and ``--record`` writes the rounds as a record that loads."""

from __future__ import annotations

import argparse
import json
import sys
from datetime import datetime, timezone
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))  # the scripts import their siblings

from _etl_record import etl_record
from _etl_runs import rotated, warm_up_size
from _etl_stack import TINY_ORDERS, size_of
from _record import dumps, from_json, load
from bench_breakdown import write_record
from bench_etl_compare import phases, phases_table, rounds_table, step_spans


def test_each_round_rotates_the_configurations_so_that_each_runs_first_once() -> None:
    configs = ("ours", "app", "plain")
    rounds = [rotated(configs, r) for r in range(4)]
    assert rounds[:3] == [("ours", "app", "plain"), ("app", "plain", "ours"), ("plain", "ours", "app")]
    assert rounds[3] == configs, "round 4 starts the cycle again"
    assert rotated(("ours",), 5) == ("ours",)
    assert [rotated(("ours", "app"), pair) for pair in range(3)] == [("ours", "app"), ("app", "ours"), ("ours", "app")]


def test_the_warm_up_is_the_first_size_and_none_when_that_is_tiny() -> None:
    first = size_of("5", 217.9)
    warm = warm_up_size("auto", first, 217.9)
    assert warm is not None and warm["label"] == "warm"
    assert (warm["orders"], warm["customers"]) == (first["orders"], first["customers"])
    assert warm_up_size("auto", size_of("tiny"), 217.9) is None, "a first size of tiny is its own warm-up"
    assert warm_up_size("none", first, 217.9) is None
    chosen = warm_up_size("tiny", first, 217.9)
    assert chosen is not None and chosen["orders"] == TINY_ORDERS and chosen["label"] == "warm"
    assert warm_up_size("1", first, 217.9) == {**size_of("1", 217.9), "label": "warm"}


def test_a_runs_steps_span_their_subtasks_tries_and_skip_a_try_that_did_not_run() -> None:
    """ours, one late failure of aggregate#0::

        gen.0, gen.1 --> join.0 --> aggregate.0 (fails, then succeeds), aggregate.1 --> report.0
    """
    def attempt(task_id: str, started: float, ended: float, state: str = "success") -> dict[str, object]:
        return {"task_id": task_id, "try": 1, "state": state, "queued": started, "started": started, "ended": ended}

    timeline = [attempt("gen.clean.1", 0.5, 20.0), attempt("gen.clean.0", 0.4, 30.0), attempt("join.0", 30.2, 90.0),
                attempt("aggregate.0", 90.3, 99.0, "failed"), attempt("aggregate.1", 90.3, 98.0),
                attempt("report.0", 99.5, 99.5, "upstream_failed"), attempt("aggregate.0", 100.5, 104.0),
                attempt("report.0", 104.3, 105.0)]
    assert step_spans(timeline) == {"gen.clean": (0.4, 30.0), "join": (30.2, 90.0), "aggregate": (90.3, 104.0),
                                    "report": (104.3, 105.0)}
    plain = [attempt("gen_orders", 1.0, 10.0), attempt("join", 10.5, 50.0)]
    assert list(step_spans(plain)) == ["gen_orders", "join"], "(b)'s task ids are its steps"


def test_the_rounds_table_pairs_each_configurations_nth_run() -> None:
    runs = [{"size": "5gb", "fail": True, "config": c, "wall_s": w}
            for c, w in (("ours", 200.0), ("app", 300.0), ("plain", 400.0), ("app", 310.0), ("plain", 390.0),
                         ("ours", 195.0))]
    rows = rounds_table(runs, ("ours", "app", "plain")).splitlines()
    assert rows[0] == "| size | failure | round | ours s | app s | plain s | ours ÷ app | ours ÷ plain |"
    assert rows[2] == "| 5gb | yes | 1 | 200.0 | 300.0 | 400.0 | 0.67 | 0.50 |"
    assert rows[3] == "| 5gb | yes | 2 | 195.0 | 310.0 | 390.0 | 0.63 | 0.50 |", "round 2 ran app, plain, ours"


def test_a_run_is_cut_into_its_three_phases_and_the_time_between_them() -> None:
    """(b), one late failure::

        gen_orders --> clean_orders --+
        gen_lineitem --> clean_lineitem --> join --> aggregate (fails, retried) --> report
    """
    def attempt(task_id: str, started: float, ended: float, state: str = "success") -> dict[str, object]:
        return {"task_id": task_id, "try": 1, "state": state, "queued": started, "started": started, "ended": ended}

    timeline = [attempt("gen_orders", 1.0, 10.0), attempt("gen_lineitem", 1.0, 80.0),
                attempt("clean_orders", 10.5, 85.0), attempt("clean_lineitem", 80.5, 170.0),
                attempt("join", 171.0, 300.0), attempt("aggregate", 300.5, 311.0, "failed"),
                attempt("aggregate", 312.0, 321.0), attempt("report", 321.5, 322.5)]
    cut = phases({"timeline": timeline, "wall_s": 323.0})
    assert cut == {"generation": 170.0, "join": 129.0, "aggregate, failure, report": 22.0, "between": 2.0}
    table = phases_table([{"config": "plain", "timeline": timeline, "wall_s": 323.0}], ("app", "plain"))
    assert table.splitlines()[2] == "| generation | 170.0 |", "(a) has no phases: it is one application"


def test_a_configuration_whose_steps_share_a_task_has_no_phases() -> None:
    """fused: the whole ETL one task (``gen_customer.[...].report.0``), so no join, aggregate or report task of its
    own; the table leaves it out (it raised KeyError: 'join' after every run of the 1 GB benchmark had ended)."""
    whole = "gen_customer.gen_orders.gen_lineitem.clean_orders.clean_lineitem.join.aggregate.report.0"
    fused = {"config": "fused", "wall_s": 51.0, "timeline": [
        {"task_id": whole, "try": 1, "state": "success", "queued": 0.4, "started": 0.5, "ended": 50.0}]}
    plain = {"config": "plain", "wall_s": 10.0, "timeline": [
        {"task_id": t, "try": 1, "state": "success", "queued": a, "started": a, "ended": a + 1.0}
        for t, a in (("gen_orders", 1.0), ("join", 3.0), ("aggregate", 5.0), ("report", 7.0))]}
    app = {"config": "app", "wall_s": 36.0, "timeline": {"spans": []}}  # (a)'s own phases: not an Airflow run
    table = phases_table([fused, plain, app], ("fused", "plain", "app"))
    assert table.splitlines()[0] == "| phase | plain, each run s |"


def test_the_record_of_a_run_holds_each_rounds_wall_times_and_ratios_and_loads_back() -> None:
    runs = [{"size": "5gb", "config": c, "fail": True, "wall_s": w}
            for c, w in (("ours", 187.3), ("app", 312.3), ("plain", 326.3), ("app", 321.8), ("plain", 312.4),
                         ("ours", 184.3))]
    sizes = [{"label": "5gb", "orders": 22_946_000, "customers": 2_294_600, "gb": 0.563}]
    meta = {"question": "q", "command": "python bench_etl_compare.py", "date": "2026-11-29", "time_utc": "11:26–12:22",
            "commit": "eeabcfd", "machine": "2 CPUs", "load": "load average 0.1 / 0.1 / 0.1"}
    record = etl_record("2026-11-29-etl-compare-5gb", runs, sizes, meta)
    assert [r.label for r in record.rounds] == ["5gb, round 1 (ours, app, plain)", "5gb, round 2 (app, plain, ours)"]
    assert record.values("ours_fail_s") == [187.3, 184.3]
    assert record.values("ours_over_app_fail") == [0.6, 0.573]
    assert record.values("ours_over_plain_fail") == [0.574, 0.59]
    assert {f.of for f in record.figures} == {"ours_fail_s", "app_fail_s", "ours_over_app_fail", "ours_over_plain_fail"}
    assert "22,946,000 orders" in record.data_size and "0.563 GB" in record.data_size
    assert from_json(json.loads(dumps(record)), "a record") == record


def test_the_breakdowns_record_keeps_each_pairs_order_and_loads(tmp_path: Path) -> None:
    size = {"label": "5gb", "orders": 22_946_000, "customers": 2_294_600}
    figures = [{"size": size, "ours": [{"wall_s": 178.8}, {"wall_s": 173.0}],
                "app": [{"wall_s": 144.3}, {"wall_s": 149.1}]}]
    args = argparse.Namespace(started=datetime(2026, 11, 29, 12, 49, tzinfo=timezone.utc), load_at_start="load 0.1")
    write_record(tmp_path / "2026-11-29-breakdown-5gb.json", args, figures, [size])
    record = load(tmp_path / "2026-11-29-breakdown-5gb.json")
    assert [r.label for r in record.rounds] == ["5gb, round 1 (ours, app)", "5gb, round 2 (app, ours)"]
    assert record.values("ours_over_app") == [1.239, 1.16] and record.script == "benchmarks/bench_breakdown.py"


def test_the_auto_configurations_record_sets_it_against_the_application_and_the_models_prediction() -> None:
    def run(config: str, fail: bool, wall: float, expected: float | None = None) -> dict[str, object]:
        predicted = None if expected is None else {"chosen": {"expected_s": expected, "spread_s": 1.0}}
        return {"size": "1gb", "config": config, "fail": fail, "wall_s": wall, "predicted": predicted}

    runs = [run("auto", False, 50.0, 45.0), run("app", False, 40.0), run("auto", True, 60.0, 66.0),
            run("app", True, 80.0)]
    runs[0]["plan"], runs[2]["plan"], runs[0]["decision"] = ["a->b", "b->c"], [], "switches: saves 9 s"
    meta = {"question": "q", "command": "c", "date": "2026-12-03", "time_utc": "08:00–08:30", "commit": "x",
            "machine": "2 CPUs", "load": "quiet"}
    record = etl_record("2026-12-03-auto-1gb", runs, [{"label": "1gb", "orders": 1, "customers": 1}], meta)
    assert record.values("auto_over_app") == [1.25] and record.values("auto_over_app_fail") == [0.75]
    assert record.values("auto_predicted_s") == [45.0] and record.values("auto_predicted_fail_s") == [66.0]
    assert record.values("auto_predicted_over_measured") == [0.9]
    assert record.values("auto_predicted_over_measured_fail") == [1.1]
    assert {"auto_over_app", "auto_predicted_over_measured_fail"} <= {f.of for f in record.figures}
    assert record.remarks.endswith("The auto runs' plans — without a failure, after a quiet history: fused a->b, "
                                   "b->c (1 run(s); the decision: switches: saves 9 s); with the late failure, after "
                                   "late failures: fused nothing (every AUTO result BLOCKING) (1 run(s)).")


def test_a_round_of_auto_ours_and_the_application_gives_auto_s_expected_time_over_the_better_of_the_two() -> None:
    """E(r) = (1 − r)·T(no failure) + r·T(late failure); at r = 0.2: auto 0.8·50 + 0.2·60 = 52, ours 0.8·60 +
    0.2·62 = 60.4, (a) 0.8·40 + 0.2·80 = 48 → 52 / 48."""
    walls = {("auto", False): 50.0, ("ours", False): 60.0, ("app", False): 40.0, ("auto", True): 60.0,
             ("ours", True): 62.0, ("app", True): 80.0}
    runs = [{"size": "5gb", "config": c, "fail": f, "wall_s": w} for (c, f), w in walls.items()]
    meta = {"question": "q", "command": "c", "date": "2026-12-03", "time_utc": "17:00", "commit": "x",
            "machine": "2 CPUs", "load": "quiet"}
    record = etl_record("2026-12-03-auto-5gb", runs, [{"label": "5gb", "orders": 1, "customers": 1}], meta)
    assert record.values("auto_expected_over_best_r0") == [1.25]
    assert record.values("auto_expected_over_best_r0.2") == [round(52 / 48, 3)]
    assert record.values("auto_expected_over_best_r0.5") == [round(55 / 60, 3)], "ours is the better at r = 0.5"
    assert "ETL 5gb, expected time E(r) at r = 0.05 of runs with a late failure: auto ÷ min(ours, (a) one Spark " \
           "application)" in {f.name for f in record.figures}
    without_ours = [r for r in runs if r["config"] != "ours"]
    assert not etl_record("x", without_ours, [{"label": "5gb", "orders": 1, "customers": 1}], meta).values(
        "auto_expected_over_best_r0"), "no E(r) without the round's all-BLOCKING runs"

"""Region vs full restart of the example ETL on a real Airflow 3 + Spark Connect + SeaweedFS, in one session.

``python benchmarks/bench_recovery_e2e.py [--repeat N] [--record PATH]``

One stack serves every run: a baseline run without failure, then ``fail_once`` runs (``aggregate#0`` fails on its
first try — a late step) of ``tpch_etl`` (region failover) and of ``tpch_etl_full`` (the same file with
``failover_strategy="full"``), interleaved. Reported per strategy (median over repeats):

* wall time of the run (trigger -> success) and recovery time (failure -> run success);
* Spark work: task-seconds of all task tries, and task-seconds rerun after the failure (tries started after it);
* failure -> clear latency (failure recorded -> REST clear returned) from the failover history.
The ratio columns are full / region in the same session, so machine load affects both sides alike. ``--record
PATH``: the medians as a record (``_record.py``: one round, ``<variant>_<figure>``), for ``benchmarks/results/``.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import _repo_path  # noqa: F401 - puts the repository root on sys.path
from _side_by_side import side_by_side, timed_run, timestamp, variant

NAMES = {"wall_s": "wall_s", "recovery_s": "recovery_s", "task_s": "task_s", "rerun_task_s": "rerun_task_s",
         "tasks_rerun": "tasks_cleared", "clear_latency_s": "clear_latency_s"}
"""Each measured figure's name in a record."""


def full_variant(target: Path) -> Path:
    """Copy of the example ETL under dag id ``tpch_etl_full`` with the ``full`` failover strategy."""
    return variant(target, "tpch_etl_full", 'failover_strategy="region"', 'failover_strategy="full"', "full-strategy")


def tries_of(api: Any, dag_id: str, run_id: str) -> list[dict[str, Any]]:
    """Every try of every task instance (``/tries`` endpoint), with start/end timestamps."""
    out = []
    for ti in api.task_instances(dag_id, run_id):
        page = api.get(f"/dags/{dag_id}/dagRuns/{run_id}/taskInstances/{ti['task_id']}/tries")
        for attempt in page["task_instances"]:
            start, end = timestamp(attempt.get("start_date")), timestamp(attempt.get("end_date"))
            if start and end:
                out.append({"task": ti["task_id"], "try": attempt["try_number"], "start": start, "end": end})
    return out


def measure(api: Any, logs: Any, dag_id: str, fail: bool) -> dict[str, float]:
    """Run once and return the figures of one run."""
    run_id, wall = timed_run(api, dag_id, {"fail_once": fail})
    tries = tries_of(api, dag_id, run_id)
    figures = {"wall_s": wall, "task_s": sum(t["end"] - t["start"] for t in tries), "tasks_rerun": 0.0,
               "rerun_task_s": 0.0, "recovery_s": 0.0, "clear_latency_s": 0.0}
    decisions = [d for d in logs.read(dag_id, run_id)["decisions"] if d["status"] == "applied"]
    if decisions:
        failed_at = decisions[0]["failures"][0]["at"]
        after = [t for t in tries if t["start"] > failed_at]
        run_end = max(t["end"] for t in tries)
        figures.update(tasks_rerun=float(len(decisions[0]["restart"])),
                       rerun_task_s=sum(t["end"] - t["start"] for t in after),
                       recovery_s=run_end - failed_at,
                       clear_latency_s=float(decisions[0]["restarting_time_s"]))
    return figures


def table(results: dict[str, list[dict[str, float]]]) -> str:
    """Markdown table: medians per variant and full/region ratios."""
    med = {k: {f: statistics.median(r[f] for r in v) for f in v[0]} for k, v in results.items()}
    rows = ["| figure | baseline (no failure) | region | full | full / region |", "|---|---:|---:|---:|---:|"]
    names = {"wall_s": "run wall time (s)", "recovery_s": "failure -> run success (s)",
             "task_s": "Spark work: task-seconds, all tries", "rerun_task_s": "task-seconds rerun after the failure",
             "tasks_rerun": "tasks cleared", "clear_latency_s": "failure -> clear returned (s)"}
    for key, label in names.items():
        base, reg, full = med["baseline"][key], med["region"][key], med["full"][key]
        ratio = f"{full / reg:.2f}x" if reg else "-"
        rows.append(f"| {label} | {base:.1f} | {reg:.1f} | {full:.1f} | {ratio} |")
    return "\n".join(rows)


def write_record(path: Path, results: dict[str, list[dict[str, float]]], started: datetime, load: str) -> None:
    """``--record``: the medians per variant as one round of a record, the figures region's and full's."""
    from _record import SCHEMA, Figure, Record, Round, Value, git_commit, load_average, this_machine, write

    med = {k: {f: statistics.median(r[f] for r in v) for f in v[0]} for k, v in results.items()}
    values = tuple(Value(f"{variant}_{NAMES[f]}", float(x)) for variant, figures in med.items()
                   for f, x in figures.items() if f in NAMES)
    figures = tuple(Figure(f"Recovery end to end, {variant}: {label}", unit, 1 if unit == "s" else 0,
                           f"{variant}_{name}", None, None, False, None)
                    for variant in ("region", "full")
                    for name, label, unit in (("recovery_s", "failure → run success", "s"),
                                              ("tasks_cleared", "tasks cleared", "tasks")))
    runs = len(next(iter(results.values())))
    write(path, Record(SCHEMA, path.stem, "After one late failure, how long do region failover and a full restart "
                       "take to success, and what do they rerun?", "benchmarks/bench_recovery_e2e.py",
                       " ".join(["python", *sys.argv]), f"{started:%Y-%m-%d}",
                       f"{started:%H:%M}–{datetime.now(timezone.utc):%H:%M}", git_commit(),
                       "the example ETL tpch_etl at its default size", this_machine(),
                       f"{load} at the start, {load_average()} at the end",
                       (Round(f"medians of {runs} run(s) per variant", values),), figures, None, None, ""))
    print(f"record: {path}")


def main(argv: list[str] | None = None) -> int:
    """Start the stack, run the variants, print (and optionally record) the figures."""
    from airflow_region_failover.decisions.storage import RunLogs

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeat", type=int, default=1)
    parser.add_argument("--record", type=Path, help="write the medians as a record (benchmarks/_record.py) to this "
                                                    "file, e.g. benchmarks/results/YYYY-MM-DD-recovery-e2e.json")
    args = parser.parse_args(argv)
    from _record import load_average

    started, load = datetime.now(timezone.utc), load_average()
    with side_by_side("bench-recovery-", full_variant, ("tpch_etl", "tpch_etl_full")) as (api, store):
        logs = RunLogs(store.objects)
        results: dict[str, list[dict[str, float]]] = {"baseline": [], "region": [], "full": []}
        for _ in range(args.repeat):
            results["baseline"].append(measure(api, logs, "tpch_etl", fail=False))
            results["region"].append(measure(api, logs, "tpch_etl", fail=True))
            results["full"].append(measure(api, logs, "tpch_etl_full", fail=True))
            print(json.dumps({k: v[-1] for k, v in results.items()}), flush=True)
        text = table(results)
        print(text)
        if args.record:
            write_record(args.record, results, started, load)
        return 0


if __name__ == "__main__":
    sys.exit(main())

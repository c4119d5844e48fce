"""Operator chaining's effect on the example ETL: task count and no-failure wall time, before and after, side by side.

``python benchmarks/bench_chaining.py [--repeat N]``

One stack (Airflow 3, SQLite + LocalExecutor, a Spark Connect server on ``local[2]``, SeaweedFS — the demo's) serves
two DAGs of the same file, ``dags/tpch_etl.py``: ``tpch_etl`` as it is (``gen_orders -> clean_orders`` and
``gen_lineitem -> clean_lineitem`` chained: one task per chain subtask, the interior DataFrame passed in memory)
and ``tpch_etl_unchained``, the same file with ``RegionJob(..., chaining=False)``, which renders and runs exactly
as the provider did before chaining (one task per subtask; ``gen_*`` write their PIPELINED partitions to the store
as scratch, ``clean_*`` read them back). Runs without failure alternate between the two (unchained first), N each.

Reported per DAG (median over the runs): step tasks, wall time from trigger to the run's success, the summed task
durations (task-seconds), and the scratch partitions of the chained results left in the store (``gen_*->clean_*``:
written by the unchained run, none by the chained one). The ratio is unchained / chained, in the same session.
"""

from __future__ import annotations

import argparse
import json
import statistics
from pathlib import Path
from typing import Any

import _repo_path  # noqa: F401 - puts the repository root on sys.path
from _side_by_side import side_by_side, timed_run, timestamp, variant

CHAINED, UNCHAINED = "tpch_etl", "tpch_etl_unchained"
INTERIOR = ("gen_orders->clean_orders", "gen_lineitem->clean_lineitem")


def unchained_variant(target: Path) -> Path:
    """Copy of the example ETL under dag id ``tpch_etl_unchained`` with ``RegionJob(chaining=False)``."""
    return variant(target, UNCHAINED, 'job = RegionJob(failover_strategy="region",',
                   'job = RegionJob(chaining=False, failover_strategy="region",', "unchained")


def measure(api: Any, store: Any, dag_id: str) -> dict[str, float]:
    """One run without failure: its figures."""
    run_id, wall = timed_run(api, dag_id, {"fail_once": False})
    instances = api.task_instances(dag_id, run_id)
    spans = [(timestamp(ti.get("start_date")), timestamp(ti.get("end_date"))) for ti in instances]
    durations = [end - start for start, end in spans if start and end]
    scratch = sum(len(store.partitions(dag_id, run_id, result)) for result in INTERIOR)
    return {"tasks": float(len(instances)), "wall_s": wall, "task_s": sum(durations),
            "median_task_s": statistics.median(durations), "scratch_partitions": float(scratch)}


def table(results: dict[str, list[dict[str, float]]]) -> str:
    """Markdown table: medians per DAG and the unchained / chained ratio."""
    med = {k: {f: statistics.median(r[f] for r in v) for f in v[0]} for k, v in results.items()}
    names = {"tasks": "step tasks", "wall_s": "run wall time, no failure (s)", "task_s": "task-seconds",
             "median_task_s": "median task (s)", "scratch_partitions": "scratch partitions of gen_* -> clean_*"}
    rows = ["| figure | before: unchained | after: chained | before / after |", "|---|---:|---:|---:|"]
    for key, label in names.items():
        before, after = med[UNCHAINED][key], med[CHAINED][key]
        ratio = f"{before / after:.2f}x" if after else "-"
        rows.append(f"| {label} | {before:.1f} | {after:.1f} | {ratio} |")
    return "\n".join(rows)


def main(argv: list[str] | None = None) -> int:
    """Start the stack, alternate the two DAGs' runs, print the figures."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeat", type=int, default=2, help="runs of each DAG (default 2)")
    args = parser.parse_args(argv)
    results: dict[str, list[dict[str, float]]] = {UNCHAINED: [], CHAINED: []}
    with side_by_side("bench-chaining-", unchained_variant, (UNCHAINED, CHAINED)) as (api, store):
        for _ in range(args.repeat):
            for dag_id in results:  # unchained first, then chained: alternating
                results[dag_id].append(measure(api, store, dag_id))
                print(json.dumps({dag_id: results[dag_id][-1]}), flush=True)
        print(table(results))
        return 0


if __name__ == "__main__":
    raise SystemExit(main())

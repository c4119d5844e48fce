"""Preloading step tasks' imports into the Celery worker (``plugins/preload.py``), measured on the
production-like stack (``devtools/production.py``: PostgreSQL, Redis, CeleryExecutor with one worker of
concurrency 6, two schedulers, a Spark standalone cluster with Spark Connect, SeaweedFS) in one command.

``python benchmarks/bench_worker_preload.py [--runs N] [--rounds R]``

Each round starts the stack twice, one after the other: with Airflow's default Celery configuration, then with
``[celery] celery_config_options = airflow_region_failover.operators.preload.CELERY_CONFIG`` (the order alternates
between rounds). On each, N runs of ``rf_e2e_region`` (9 step tasks, no failure; the store's I/O through the
session, as the e2e tests run it) are triggered together. Reported per configuration: the wall time from the
first trigger to the last run's success, the sum of the task durations Airflow records (task-seconds), and the
median task duration. The ratio is default / preload, measured side by side in the same session.
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

import _repo_path  # noqa: F401 - puts the repository root on sys.path

ROOT = Path(__file__).resolve().parents[1]
DEFAULT = "airflow.providers.celery.executors.default_celery.DEFAULT_CELERY_CONFIG"
PRELOAD = "airflow_region_failover.operators.preload.CELERY_CONFIG"
DAG_ID = "rf_e2e_region"


def measure(config: str, runs: int, work: Path) -> dict[str, float]:
    """Start the stack with Celery configuration ``config``, run ``runs`` runs together, stop it."""
    from airflow_region_failover.standalone.platform import merged_dags_folder
    from devtools.production import ProductionStack

    dags = merged_dags_folder(work / "dags", ROOT / "tests" / "e2e" / "dags" / "rf_e2e.py")
    env = {"AIRFLOW__CELERY__CELERY_CONFIG_OPTIONS": config, "AIRFLOW__REGION_FAILOVER__STORE_SPARK_IO": "driver"}
    with ProductionStack(dags_folder=dags, work_dir=work, pythonpath=(str(ROOT),), extra_env=env) as stack:
        assert stack.airflow is not None
        with stack.airflow.client() as api:
            api.wait_for_dag(DAG_ID, timeout=300)
            started = time.monotonic()
            run_ids = [api.trigger(DAG_ID, {}) for _ in range(runs)]
            states = [api.final_state(DAG_ID, run_id, timeout=1800) for run_id in run_ids]
            wall = time.monotonic() - started
            if set(states) != {"success"}:
                raise SystemExit(f"runs ended {states} with {config}: see {work}")
            durations = [float(ti["duration"]) for run_id in run_ids for ti in api.task_instances(DAG_ID, run_id)]
    return {"wall_s": wall, "task_s": sum(durations), "median_task_s": statistics.median(durations),
            "tasks": float(len(durations))}


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=3, help="runs triggered together on each stack (default 3)")
    parser.add_argument("--rounds", type=int, default=1, help="stack pairs, the order alternating (default 1)")
    args = parser.parse_args(argv)
    results: dict[str, list[dict[str, float]]] = {DEFAULT: [], PRELOAD: []}
    with tempfile.TemporaryDirectory(prefix="rf-bench-preload-") as tmp:
        for round_ in range(args.rounds):
            order = (DEFAULT, PRELOAD) if round_ % 2 == 0 else (PRELOAD, DEFAULT)
            for config in order:
                name = "preload" if config == PRELOAD else "default"
                result = measure(config, args.runs, Path(tmp) / f"round{round_ + 1}-{name}")
                results[config].append(result)
                print(f"round {round_ + 1}: {name}: {_row(result)}", flush=True)
    print(f"\n{args.runs} runs x 9 tasks per stack, {args.rounds} round(s); medians over rounds")
    print(f"{'':10s} {'wall s':>8s} {'task-s':>8s} {'median task s':>14s}")
    med = {c: {k: statistics.median(r[k] for r in rs) for k in rs[0]} for c, rs in results.items()}
    for name, config in (("default", DEFAULT), ("preload", PRELOAD)):
        m = med[config]
        print(f"{name:10s} {m['wall_s']:8.1f} {m['task_s']:8.1f} {m['median_task_s']:14.2f}")
    d, p = med[DEFAULT], med[PRELOAD]
    print(f"{'ratio':10s} {d['wall_s'] / p['wall_s']:8.2f} {d['task_s'] / p['task_s']:8.2f} "
          f"{d['median_task_s'] / p['median_task_s']:14.2f}   (default / preload)")


def _row(result: dict[str, Any]) -> str:
    return (f"wall {result['wall_s']:.1f} s, {result['task_s']:.1f} task-s over {int(result['tasks'])} tasks, "
            f"median task {result['median_task_s']:.2f} s")


if __name__ == "__main__":
    main()

"""Python daemons per Spark executor on a long-lived Spark Connect server, after N step tasks with the store's
executor-side I/O (the default), on the production-like stack (``devtools/production.py``: PostgreSQL, Redis,
CeleryExecutor, two schedulers, a Spark standalone cluster of two one-core executors with Spark Connect, SeaweedFS).

``python benchmarks/bench_daemons.py [--tasks 1000] [--parallelism 25] [--stock-connect]``

The DAG ``rf_daemons``: ``a`` (P subtasks, each writing 10,000 rows) -BLOCKING POINTWISE-> ``b`` (P subtasks, each
reading its partition and writing it again): 2 x P step tasks per run, every store read and write a Spark job whose
tasks run this provider's Python on the executors. Runs follow one another until ``--tasks`` step tasks ran; after
each run, per executor (a ``CoarseGrainedExecutorBackend`` JVM): its Python daemons (``pyspark.daemon`` processes
whose parent is the executor) and its idle workers (their children), with their resident memory; the median
step task duration, and the median step task overhead (``_breakdown.overhead``: Airflow's start of the task to its
first Spark job, plus its last write's end to Airflow's end of the task). ``--stock-connect``: Spark's stock Spark
Connect server class (a daemon per session), for comparison; the provider's server (``standalone/connect_server.py``)
is the default.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import _repo_path  # noqa: F401 - puts the repository root on sys.path
from _etl_stack import run_on

DAG_ID = "rf_daemons"
DAG = '''
from datetime import datetime
from airflow.sdk import DAG
from airflow_region_failover import RegionJob

ROWS = 10_000


def write(spark, inputs, context):
    return spark.range(context.index * ROWS, (context.index + 1) * ROWS).withColumnRenamed("id", "n")


def rewrite(spark, inputs, context):
    return inputs["a"]


with DAG(dag_id="rf_daemons", schedule=None, start_date=datetime(2026, 1, 1), catchup=False, max_active_runs=1):
    job = RegionJob()
    job.step("a", write, parallelism=PARALLELISM)
    job.step("b", rewrite, parallelism=PARALLELISM)
    job.edge("a", "b", exchange="BLOCKING", distribution="POINTWISE")
    job.render()
'''


def executors() -> dict[int, dict[str, float]]:
    """Per executor JVM (pid): its Python daemons, their idle workers, and their resident MB."""
    import psutil

    out = {}
    for proc in psutil.process_iter(["pid", "cmdline"]):
        if "CoarseGrainedExecutorBackend" not in " ".join(proc.info["cmdline"] or []):
            continue
        try:
            daemons = [c for c in proc.children() if "pyspark.daemon" in " ".join(c.cmdline())]
            workers = [w for d in daemons for w in d.children()]
            rss = sum(p.memory_info().rss for p in [*daemons, *workers]) / 1e6
        except psutil.Error:
            continue
        out[proc.pid] = {"daemons": len(daemons), "workers": len(workers), "mb": round(rss, 1)}
    return out


def durations(api: Any, run_id: str) -> tuple[list[float], list[float]]:
    """The run's task durations and step task overheads (s)."""
    from _breakdown import overhead
    from bench_breakdown import tasks_of

    took = [float(ti["duration"]) for ti in api.task_instances(DAG_ID, run_id) if ti.get("duration")]
    return took, [o for t in tasks_of(api, DAG_ID, run_id).values() if (o := overhead(t)) is not None]


def measure(args: argparse.Namespace, stack: Any, work: Path) -> int:
    """On the started stack: runs of the DAG one after another until ``--tasks`` step tasks ran, a table row each."""
    assert stack.airflow is not None
    done, started = 0, time.monotonic()
    with stack.airflow.client() as api:
        api.wait_for_dag(DAG_ID, timeout=300)
        while done < args.tasks:
            run_id = api.trigger(DAG_ID, {})
            state = api.final_state(DAG_ID, run_id, timeout=3600, poll=1.0)
            if state != "success":
                raise SystemExit(f"run {run_id} ended {state}; see {work}")
            took, overheads = durations(api, run_id)
            done += len(took)
            found = executors()
            cells = [", ".join(str(e[k]) for e in found.values()) for k in ("daemons", "workers", "mb")]
            print(f"| {done} | {time.monotonic() - started:.0f} | {statistics.median(took):.1f} | "
                  f"{statistics.median(overheads) if overheads else float('nan'):.2f} | " + " | ".join(cells)
                  + " |", flush=True)
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tasks", type=int, default=1000, help="step tasks to run in all (default 1000)")
    parser.add_argument("--parallelism", type=int, default=25, help="subtasks per step (default 25)")
    parser.add_argument("--stock-connect", action="store_true", help="Spark's stock Connect server class")
    args = parser.parse_args(argv)
    from airflow_region_failover.standalone.processes import stop_on_signals
    from devtools.production import ProductionStack

    stop_on_signals()
    work = Path(tempfile.mkdtemp(prefix="rf-bench-daemons-"))
    (work / "dags").mkdir()
    (work / "dags" / "rf_daemons.py").write_text(DAG.replace("PARALLELISM", str(args.parallelism)))
    stack = ProductionStack(dags_folder=work / "dags", work_dir=work, shared_workers=not args.stock_connect)
    server = "Spark's stock server class" if args.stock_connect else "the provider's server (shared workers)"
    print(f"Spark Connect: {server}; {2 * args.parallelism} step tasks per run", flush=True)
    print("| step tasks | elapsed s | median task s | median overhead s | daemons per executor | idle workers per "
          "executor | daemon + worker MB per executor |\n|---:|---:|---:|---:|---|---|---|", flush=True)
    return run_on(stack, lambda: measure(args, stack, work))


if __name__ == "__main__":
    sys.exit(main())

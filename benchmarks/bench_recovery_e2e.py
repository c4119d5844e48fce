"""Region vs full restart of the example ETL on a real Airflow 3 + Spark Connect + SeaweedFS, in one session.

``python benchmarks/bench_recovery_e2e.py [--repeat N] [--write-readme]``

One stack serves every run: a baseline run without failure, then ``fail_once`` runs (``aggregate#0`` fails on its
first try — a late step) of ``tpch_etl`` (region failover) and of ``tpch_etl_full`` (the same file with
``failover_strategy="full"``), interleaved. Reported per strategy (median over repeats):

* wall time of the run (trigger -> success) and recovery time (failure -> run success);
* Spark work: task-seconds of all task tries, and task-seconds rerun after the failure (tries started after it);
* failure -> clear latency (failure recorded -> REST clear returned) from the failover history.
The ratio columns are full / region in the same session, so machine load affects both sides alike.
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import sys
import tempfile
import time
from datetime import datetime
from pathlib import Path
from typing import Any

import _repo_path  # noqa: F401 - puts the repository root on sys.path
from airflow_region_failover.store.dataplane.s3a import with_jars

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "benchmarks" / "README.md"
BEGIN, END = "<!-- bench_recovery_e2e:begin -->", "<!-- bench_recovery_e2e:end -->"


def full_variant(target: Path) -> Path:
    """Copy of the example ETL under dag id ``tpch_etl_full`` with the ``full`` failover strategy."""
    text = (ROOT / "dags" / "tpch_etl.py").read_text()
    changed = text.replace('dag_id="tpch_etl"', 'dag_id="tpch_etl_full"').replace(
        'failover_strategy="region"', 'failover_strategy="full"')
    if changed.count("tpch_etl_full") != 1 or 'failover_strategy="full"' not in changed:
        raise SystemExit("dags/tpch_etl.py changed shape: cannot derive the full-strategy variant")
    path = target / "tpch_etl_full.py"
    path.write_text(changed)
    return path


def _ts(value: str | None) -> float | None:
    return datetime.fromisoformat(value.replace("Z", "+00:00")).timestamp() if value else None


def tries_of(api: Any, dag_id: str, run_id: str) -> list[dict[str, Any]]:
    """Every try of every task instance (``/tries`` endpoint), with start/end timestamps."""
    out = []
    for ti in api.task_instances(dag_id, run_id):
        page = api.get(f"/dags/{dag_id}/dagRuns/{run_id}/taskInstances/{ti['task_id']}/tries")
        for attempt in page["task_instances"]:
            start, end = _ts(attempt.get("start_date")), _ts(attempt.get("end_date"))
            if start and end:
                out.append({"task": ti["task_id"], "try": attempt["try_number"], "start": start, "end": end})
    return out


def measure(api: Any, logs: Any, dag_id: str, fail: bool) -> dict[str, float]:
    """Run once and return the figures of one run."""
    t0 = time.time()
    run_id = api.trigger(dag_id, {"fail_once": fail})
    state = api.final_state(dag_id, run_id, timeout=1800)
    wall = time.time() - t0
    if state != "success":
        raise SystemExit(f"{dag_id} run {run_id} ended {state}")
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


def write_readme(text: str) -> None:
    """Replace (or append) this benchmark's section of benchmarks/README.md; nothing else is touched."""
    readme = README.read_text() if README.exists() else "# Benchmarks\n"
    section = f"{BEGIN}\n{text}\n{END}"
    if BEGIN in readme and END in readme:
        head, rest = readme.split(BEGIN, 1)
        readme = head + section + rest.split(END, 1)[1]
    else:
        readme = readme.rstrip("\n") + "\n\n" + section + "\n"
    README.write_text(readme)


def main(argv: list[str] | None = None) -> int:
    """Start the stack, run the variants, print (and optionally record) the figures."""
    from airflow_region_failover.decisions.storage import RunLogs
    from airflow_region_failover.standalone.airflow_stack import AirflowStack
    from airflow_region_failover.standalone.platform import merged_dags_folder, platform_env
    from airflow_region_failover.standalone.seaweedfs import SeaweedFS
    from airflow_region_failover.standalone.spark_connect import SparkConnectServer
    from airflow_region_failover.store.result_store import ResultStore

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeat", type=int, default=1)
    parser.add_argument("--write-readme", action="store_true")
    args = parser.parse_args(argv)
    work = Path(tempfile.mkdtemp(prefix="bench-recovery-"))
    dags = merged_dags_folder(work / "dags", ROOT / "dags" / "tpch_etl.py", full_variant(work))
    s3 = SeaweedFS(bucket="region-failover", data_dir=work / "s3")
    spark = SparkConnectServer(work / "sc", cores=2, conf=with_jars({}))  # the s3a jars, as `standalone` does
    stack = None
    try:
        endpoint, spark_url = s3.start(), spark.start()
        stack = AirflowStack(dags_folder=dags, home=work / "airflow", extra_env=platform_env(endpoint, spark_url))
        stack.start()
        store = ResultStore.from_endpoint(endpoint.endpoint_url, endpoint.access_key, endpoint.secret_key,
                                          endpoint.bucket)
        logs = RunLogs(store.objects)
        results: dict[str, list[dict[str, float]]] = {"baseline": [], "region": [], "full": []}
        with stack.client() as api:
            for dag_id in ("tpch_etl", "tpch_etl_full"):
                api.wait_for_dag(dag_id, timeout=300)
            for _ in range(args.repeat):
                results["baseline"].append(measure(api, logs, "tpch_etl", fail=False))
                results["region"].append(measure(api, logs, "tpch_etl", fail=True))
                results["full"].append(measure(api, logs, "tpch_etl_full", fail=True))
                print(json.dumps({k: v[-1] for k, v in results.items()}), flush=True)
        text = table(results)
        print(text)
        if args.write_readme:
            write_readme(_section(text, args.repeat))
        return 0
    finally:
        if stack is not None:
            stack.stop()
        spark.cleanup()
        s3.cleanup()
        shutil.rmtree(work, ignore_errors=True)


def _section(text: str, repeat: int) -> str:
    return (
        "## Recovery end to end: region vs full restart (bench_recovery_e2e.py)\n\n"
        "Example ETL `tpch_etl` (14 tasks) on a real Airflow 3.3.2 (SQLite, LocalExecutor), one Spark Connect "
        "server (`local[2]`) and SeaweedFS, all on this 2-core machine shared with other jobs; `fail_once` makes "
        "`aggregate#0` (a late step) fail on its first try. `full` is the same DAG with "
        f"`failover_strategy=\"full\"`. Medians of {repeat} run(s) per column, same session.\n\n" + text + "\n\n"
        "Spark work = the summed duration of task tries (each try is one Spark Connect session doing that "
        "subtask's reads, compute and writes). The failure -> clear latency covers the worker recording the "
        "decision in S3, the 1 s merge window, the failed task process exiting, Airflow marking the downstream "
        "tasks `upstream_failed` and the scheduler's watcher (polling every 1 s) clearing through the REST API; "
        "the fixed-delay backoff (`1 s`) is then waited by the restarted task itself.\n"
    )


if __name__ == "__main__":
    sys.exit(main())

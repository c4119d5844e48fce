"""Where the time goes: the example ETL as ours (region failover) and as (a) one Spark application, side by side on
``bench_etl_compare.py``'s stack, cut into what each task did and what each kind of process burnt.

``python benchmarks/bench_breakdown.py [--sizes 1,5] [--repeat N] [--warm-up SIZE] [--same-salt] [--json FILE]
[--record PATH]``

After one warm-up run of each at the first size (``--warm-up``, as ``bench_etl_compare.py``'s: a fresh stack's
first tasks and first Spark jobs pay one-off costs, and its shared JVM reaches its steady state only at full scale),
per size ``--repeat`` pairs of runs without failure, ours then (a) in odd pairs and (a) then ours in even ones (so
that neither always runs first: :func:`_etl_runs.rotated`), each with a new DAG param ``salt`` (no run finds
its outputs already in the content-addressed store; ``--same-salt``: every run the same salt, the scheduled-run
case). Printed per size:

* **a timeline per task** of ours' first run: queued -> started, Airflow's start to the task's clock (process
  start, imports, DAG parse), then the task's own spans (``timeline`` in its summary: store checks, XCom pulls,
  manifests, run log, Spark session, plan, each write's begin / Spark job / commit) and the Spark job's executor
  seconds (writers waiting for their input rows, encoding, hashing, uploading), and its end;
* **the critical path** of each ours run and (a)'s run cut into the same categories (``_breakdown.py``), the
  difference per category and the share of the gap it explains;
* **CPU seconds per process kind** (Airflow, Spark JVM, Python workers, S3 server, (a)'s client) of each run;
* **the step task overhead** (Airflow's start of the task to its first Spark job, plus its last write's end to
  Airflow's end of the task): median and spread over every task of every ours run;
* **the physically necessary cost**: (a)'s wall, plus the bytes ours committed and read moved at the raw speed of the
  same server (boto3, 16 MiB objects on 4 threads, measured in the same session), plus Airflow's scheduling
  between the dependent tasks of the critical path (upstream done -> queued; not the wait for a free slot).

``--json``: every figure and timeline; ``--record PATH``: each pair's wall times and ours ÷ (a) as a record
(``_record.py``, built by ``_etl_record.py``), for ``benchmarks/results/``.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import _repo_path  # noqa: F401 - puts the repository root on sys.path
from _breakdown import SCHEDULING, TaskTry, app_breakdown, compare, critical_path, markdown, overhead, run_breakdown
from _etl_record import etl_record
from _etl_runs import _ts, ours_variant, rotated, run_airflow, run_app, step_timeline, warm_up, warm_up_size
from _etl_stack import (
    KINDS,
    Salts,
    add_stack_arguments,
    parse_sizes,
    run_on,
    size_of,
    stack_from,
    write_json,
)
from _etl_store import committed_bytes
from _record import git_commit, load_average, this_machine, write
from airflow_region_failover.timeline import Timeline

MiB = 1024 * 1024


def tasks_of(api: Any, dag_id: str, run_id: str) -> dict[str, TaskTry]:
    """Every task instance of the run with its upstream tasks and, for a step task, its timeline."""
    upstream: dict[str, list[str]] = {}
    for task in api.get(f"/dags/{dag_id}/tasks")["tasks"]:
        for down in task.get("downstream_task_ids", []):
            upstream.setdefault(down, []).append(task["task_id"])
    out = {}
    for ti in api.task_instances(dag_id, run_id):
        task_id = ti["task_id"]
        out[task_id] = TaskTry(task_id, _ts(ti.get("queued_when")), _ts(ti["start_date"]) or 0.0,
                               _ts(ti["end_date"]) or 0.0, tuple(upstream.get(task_id, ())),
                               step_timeline(api, dag_id, run_id, task_id))
    return out


def summaries_read_bytes(api: Any, dag_id: str, run_id: str, task_ids: list[str]) -> int:
    """Bytes the run's step tasks read from the store (their summaries' ``read.bytes``)."""
    total = 0
    for task_id in task_ids:
        try:
            value = api.get(f"/dags/{dag_id}/dagRuns/{run_id}/taskInstances/{task_id}/xcomEntries/return_value")
        except Exception:
            continue
        body = json.loads(value["value"]) if isinstance(value["value"], str) else value["value"]
        total += int(body.get("read", {}).get("bytes", 0)) if isinstance(body, dict) else 0
    return total


def raw_speed(store: Any, megabytes: int = 256, threads: int = 4) -> tuple[float, float]:
    """MB/s of plain boto3 PUTs and GETs of ``megabytes`` in 16 MiB objects on ``threads`` threads, same server."""
    import os

    client, bucket = store.objects.client, store.layout.bucket
    body = os.urandom(16 * MiB)
    keys = [f"raw-speed/{time.time_ns()}-{i}" for i in range(max(1, megabytes // 16))]

    def timed(fn: Callable[[str], Any]) -> float:
        started = time.perf_counter()
        with ThreadPoolExecutor(threads) as pool:
            list(pool.map(fn, keys))
        return len(keys) * 16 * MiB / 1e6 / (time.perf_counter() - started)

    up = timed(lambda k: client.put_object(Bucket=bucket, Key=k, Body=body))
    down = timed(lambda k: client.get_object(Bucket=bucket, Key=k)["Body"].read())
    client.delete_objects(Bucket=bucket, Delete={"Objects": [{"Key": k} for k in keys]})
    return up, down


def task_table(tasks: dict[str, TaskTry], run_started: float) -> str:
    """One row per task of a run: when it was queued, started and ended, and its measured phases (seconds)."""
    names = ("airflow_start", "restart_wait", "store_open", "xcom", "manifests", "run_log", "session", "define",
             "begin", "job", "commit", "publish", "ledger")
    lines = ["| task | queued | started | startup | " + " | ".join(names) + " | work: wait/encode/hash/upload | "
             "end | ended |", "|---" * (len(names) + 7) + "|"]
    for task in sorted(tasks.values(), key=lambda t: t.started):
        line, queued = task.timeline, (task.queued or task.started) - run_started
        cells = [task.task_id, f"{queued:.1f}", f"{task.started - run_started:.1f}"]
        if line is None:
            cells += ["-"] * (len(names) + 3)
        else:
            work = "/".join(f"{line.work.get(k, 0.0):.1f}" for k in ("wait", "encode", "hash", "upload"))
            cells += [f"{line.started - task.started:.1f}", *(f"{line.total(n):.2f}" for n in names), work,
                      f"{task.ended - line.ended:.1f}"]
        lines.append("| " + " | ".join([*cells, f"{task.ended - run_started:.1f}"]) + " |")
    return "\n".join(lines)


def run_ours(stack: Any, api: Any, dag_id: str, salt: int, timeout: float) -> dict[str, Any]:
    """One ours run without failure: wall, CPU by kind, its tasks and the bytes it committed and read."""
    mark = stack.cpu.mark()
    run = run_airflow(api, dag_id, False, timeout, salt)
    run["cpu"], run["airflow_roles"] = stack.cpu.since(mark)
    info = api.dag_run(dag_id, run["run_id"])
    run["run_started"], run["run_ended"] = _ts(info["start_date"]), _ts(info["end_date"])
    run["tasks"] = tasks_of(api, dag_id, run["run_id"])
    run["committed_bytes"], _ = committed_bytes(stack.store, dag_id, run["run_id"])
    run["read_bytes"] = summaries_read_bytes(api, dag_id, run["run_id"], list(run["tasks"]))
    run["breakdown"] = run_breakdown(run["tasks"], run["run_started"], run["run_ended"])
    return run


def run_app_measured(stack: Any, size: dict[str, Any], salt: int, procs: list[Any]) -> dict[str, Any]:
    """One (a) run without failure: wall, CPU by kind (its client process counted as ``app``), breakdown."""
    mark = stack.cpu.mark()
    run = run_app(stack.spark_url, stack.s3_env, size["label"], size["orders"], size["customers"], False, procs,
                  salt, watch=lambda pid: stack.cpu.watch(pid, "app"))
    run["cpu"], run["airflow_roles"] = stack.cpu.since(mark)
    line = Timeline.from_json(run["timeline"])
    run["breakdown"] = app_breakdown(line, run["ended"])
    return run


def report_size(size: dict[str, Any], ours: list[dict[str, Any]], apps: list[dict[str, Any]],
                raw: tuple[float, float]) -> dict[str, Any]:
    """Print the size's tables and return its figures."""
    first = ours[0]
    print(f"\n## {size['label']}: {size['orders']:,} orders; ours committed {first['committed_bytes'] / 1e9:.2f} GB "
          f"and read back {first['read_bytes'] / 1e9:.2f} GB\n")
    print("### Timeline per task (ours, first run; seconds from the run's start, phases in seconds)\n")
    print(task_table(first["tasks"], first["run_started"]))
    for i, (mine, theirs) in enumerate(zip(ours, apps, strict=False)):
        print(f"\n### Critical path, run pair {i + 1}: "
              f"{' -> '.join(t.task_id for t in critical_path(mine['tasks']))}\n")
        print(markdown(compare(mine["breakdown"], theirs["breakdown"]), mine["wall_s"], theirs["wall_s"]))
    print("\n### CPU seconds per process kind\n")
    print("| run | wall s | " + " | ".join(KINDS) + " | total |\n|---" * 1 + "|---:" * (len(KINDS) + 2) + "|")
    for name, runs in (("ours", ours), ("(a)", apps)):
        for run in runs:
            cpu = run["cpu"]
            print(f"| {name} | {run['wall_s']:.1f} | " + " | ".join(f"{cpu[k]:.1f}" for k in KINDS)
                  + f" | {sum(cpu.values()):.1f} |")
    print("\n### Airflow's CPU seconds by process role\n")
    names = sorted({r for run in (*ours, *apps) for r in run["airflow_roles"]})
    print("| run | " + " | ".join(names) + " |\n|---" + "|---:" * len(names) + "|")
    for name, runs in (("ours", ours), ("(a)", apps)):
        for run in runs:
            print(f"| {name} | " + " | ".join(f"{run['airflow_roles'].get(r, 0.0):.1f}" for r in names) + " |")
    overheads = [o for run in ours for t in run["tasks"].values() if (o := overhead(t)) is not None]
    if overheads:
        print(f"\nstep task overhead (start -> first Spark job + last write -> end): median "
              f"{statistics.median(overheads):.2f} s, min {min(overheads):.2f}, max {max(overheads):.2f} over "
              f"{len(overheads)} tasks")
    gaps = [r["breakdown"].get(SCHEDULING, 0.0) for r in ours]
    necessary = [a["wall_s"] + r["committed_bytes"] / 1e6 / raw[0] + r["read_bytes"] / 1e6 / raw[1] + gap
                 for a, r, gap in zip(apps, ours, gaps, strict=False)]
    shown = {name: ", ".join(f"{v:.1f} s" for v in values) for name, values in
             (("necessary", necessary), ("ours", [r["wall_s"] for r in ours]), ("app", [a["wall_s"] for a in apps]))}
    print(f"physically necessary ((a) + committed at {raw[0]:.0f} MB/s up + read at {raw[1]:.0f} MB/s down + Airflow "
          f"scheduling on the critical path): {shown['necessary']}; ours {shown['ours']}; (a) {shown['app']}")
    return {"size": size, "raw_mb_s": raw, "task_overhead_s": overheads, "necessary_s": necessary,
            "ours": [_plain(r) for r in ours], "app": [_plain(a) for a in apps]}


def _plain(run: dict[str, Any]) -> dict[str, Any]:
    """A run as JSON (tasks with their timelines)."""
    out = {k: v for k, v in run.items() if k != "tasks"}
    if "tasks" in run:
        out["tasks"] = {t.task_id: {"queued": t.queued, "started": t.started, "ended": t.ended,
                                    "timeline": t.timeline.to_json() if t.timeline else None}
                        for t in run["tasks"].values()}
    return out


def measure(args: argparse.Namespace, stack: Any, procs: list[Any], salts: Salts, warm: dict[str, Any] | None,
            sizes: list[dict[str, Any]]) -> int:
    """On the started stack: one warm-up pair at ``warm`` (none if ``None``), then ``--repeat`` pairs (ours, (a);
    then (a), ours) per size, each size reported; every figure written to ``--json``."""
    figures = []
    raw = raw_speed(stack.store)
    print(f"raw boto3 speed of the server: {raw[0]:.0f} MB/s up, {raw[1]:.0f} MB/s down", flush=True)
    with stack.airflow.client() as api:
        if warm is not None:
            warm_up(api, stack, procs, warm["dag_id"], warm, salts)
        for size in sizes:
            api.wait_for_dag(size["dag_id"], timeout=300)
            ours, apps = [], []
            for pair in range(args.repeat):
                for config in rotated(("ours", "app"), pair):
                    if config == "ours":
                        ours.append(run_ours(stack, api, size["dag_id"], salts.next(), args.timeout))
                    else:
                        apps.append(run_app_measured(stack, size, salts.next(), procs))
                print(json.dumps({"size": size["label"], "ours_wall_s": ours[-1]["wall_s"],
                                  "app_wall_s": apps[-1]["wall_s"]}), flush=True)
            figures.append(report_size(size, ours, apps, raw))
    write_json(args.json, figures)
    if args.record:
        write_record(Path(args.record), args, figures, sizes)
    return 0


def write_record(path: Path, args: argparse.Namespace, figures: list[dict[str, Any]],
                 sizes: list[dict[str, Any]]) -> None:
    """``--record``: each pair's wall times and ours ÷ (a) as a record (``_etl_record.py``), the start as
    :func:`main` noted it in ``args.started``."""
    runs = [{"size": f["size"]["label"], "config": config, "fail": False, "wall_s": f[config][number]["wall_s"]}
            for f in figures for number in range(min(len(f["ours"]), len(f["app"])))
            for config in rotated(("ours", "app"), number)]
    end = datetime.now(timezone.utc)
    meta = {"question": f"Without a failure at {', '.join(s['label'] for s in sizes)}, how long does ours take "
                        "against (a) one Spark application?",
            "command": " ".join(["python", *sys.argv]), "date": f"{args.started:%Y-%m-%d}",
            "time_utc": f"{args.started:%H:%M}–{end:%H:%M}", "commit": git_commit(), "machine": this_machine(),
            "load": f"{args.load_at_start} at the start, {load_average()} at the end"}
    write(path, etl_record(path.stem, runs, sizes, meta, "benchmarks/bench_breakdown.py"))
    print(f"record: {path}", flush=True)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", type=parse_sizes, default=["1"], help="comma-separated GB targets (default 1)")
    parser.add_argument("--repeat", type=int, default=1, help="run pairs per size (default 1)")
    parser.add_argument("--same-salt", action="store_true", help="every run the same salt (the shared-store case)")
    parser.add_argument("--json", help="write every figure and timeline to this file")
    parser.add_argument("--record", help="write the pairs' record (benchmarks/_record.py) to this file, e.g. "
                                         "benchmarks/results/YYYY-MM-DD-breakdown-5gb.json")
    parser.add_argument("--timeout", type=float, default=7200.0, help="per run, seconds")
    parser.add_argument("--warm-up", default="auto",
                        help="size of the warm-up pair (not measured): 'tiny', a GB target, 'none', or 'auto' "
                             "(default: the first size; none when that is tiny)")
    add_stack_arguments(parser)
    args = parser.parse_args(argv)
    args.started, args.load_at_start = datetime.now(timezone.utc), load_average()
    stack, procs, salts = stack_from(args), [], Salts(same=args.same_salt)
    sizes = [size_of(wanted, args.bytes_per_order) for wanted in args.sizes]
    warm = warm_up_size(args.warm_up, sizes[0], args.bytes_per_order)
    for size in [*([warm] if warm else []), *sizes]:
        size["dag_id"] = ours_variant(stack.dags, size["label"], size["orders"], size["customers"])
    return run_on(stack, lambda: measure(args, stack, procs, salts, warm, sizes), procs)


if __name__ == "__main__":
    sys.exit(main())

"""The example ETL at several sizes: region failover vs one Spark application vs plain Airflow, on one stack.

``python benchmarks/bench_etl_compare.py [--sizes tiny,1,5] [--repeat N]
[--configs ours,fused,mixed,auto,app,plain,plain_store]
[--history N] [--warm-up SIZE] [--json FILE] [--record PATH]``

One SeaweedFS, one Spark Connect server (``local[2]``) and one Airflow 3 (SQLite, LocalExecutor) are started once
and serve every run. Per size, three configurations of ``dags/tpch_etl.py`` (generators -> clean -> join ->
aggregate -> report), each run without failure and with one late failure (``aggregate`` fails on its first try):

* **ours**: a copy of the DAG file with ``CUSTOMERS``/``ORDERS`` replaced and dag id ``tpch_etl_<size>``
  (region failover, 12 step tasks); the failure is DAG param ``fail_once`` (``aggregate#0``'s first try).
* **fused** / **mixed**: the same DAG with its BLOCKING edges declared ``exchange="AUTO"`` and rendered under a
  fixed plan (:data:`_etl_runs.FUSED_PLANS`): ``fused`` fuses every one (one failover region, one task running
  the whole ETL in one Spark session), ``mixed`` fuses the generators into the join and commits the join's and
  the aggregate's outputs.
* **auto**: the same AUTO edges rendered ``PER_RUN``: each run runs the plan the provider chose from the DAG's runs
  before it, after ``--history`` unmeasured runs (``_etl_auto.py``: a quiet history for the run without failure, a
  history of late failures for the run with one; each run records its plan and the model's prediction).
* **app** = (a): the same functions as one Spark job in one Spark Connect session, run as one application
  process (``python _etl_runs.py _app ...``, what a spark-submit'd script would be); only the final report
  is persisted, through ``ResultStore.write`` to the same bucket (intermediates live in Spark's shuffle files).
  The failure: a Python UDF applied to the aggregate's output raises on the first attempt, i.e. after the
  generation, join and aggregation stages ran; the application then fails as a whole and is run again from
  scratch after 1 s (as a scheduler's retry of the one task would).
* **plain** = (b): ``etl_plain_airflow.py`` (next to this file), one ``@task.pyspark`` task per step with
  ``retries=1``, each persisting its whole output with Spark's own ``df.write.parquet("s3a://...")`` (S3A's default
  committer) and reading its inputs whole with ``spark.read.parquet`` — what a Spark user writes; the failure makes
  ``aggregate`` fail on its first try and Airflow retries that task.
* Where ours' and (b)'s failure fires (``--fail-at``): ``start``, as ``aggregate`` starts (the DAGs' own
  ``fail_once``, the default), or ``end``, at the end of its job, after its aggregation ran: a UDF on its output, as
  (a)'s failure (:data:`_etl_runs.FAIL_AT_END`), so that all three lose the same progress.
* **plain_store** = (b) on the provider's store: the same DAG persisting through ``ResultStore.write`` and reading
  through ``ResultStore.read`` instead (the baseline before hadoop-aws was reachable; not in the default configs).

**Warm-up and order.** Before the measured runs, one run of every measured configuration, without failure, at the
first size (``--warm-up``; none when that is ``tiny``, its own warm-up), not measured. The three configurations
share the stack's one Spark Connect JVM, and it is not at its steady state until it has run each one's jobs at full
scale: on 2026-11-29, after a warm-up at a fifth of the size, ours' first 5 GB run still spent 22 CPU s or more
compiling (``jstat -compiler``) against 13 and 11 in the next two, grew its heap from 4.4 to 6.9 GB with 5 s of
concurrent marking (none after), and used 341 JVM CPU s against 307
(``benchmarks/notes/2026-11-29-jvm-warm-up.md``). Round ``r`` runs the configurations in their order rotated by ``r``
(:func:`_etl_runs.rotated`), so that what is left of that drift is not charged to whichever configuration always runs
first, as it charged ours before.

Figures per (size, config): wall time of a run without failure and its task-seconds (Airflow: the summed
duration of all task tries; app: the application process's lifetime), wall time with the failure. Sizes: ``tiny``
is the DAG's defaults (2,000 customers, 20,000 orders); a number ``N`` is a scale: ``ORDERS`` = N GB over the bytes
ours commits per order at ``tiny`` (or ``--bytes-per-order``), ``CUSTOMERS`` = ORDERS / 10 (``_etl_stack.size_of``:
at scale Parquet compresses better, and ours commits ~0.11 GB per unit of scale). The committed bytes of every run
are printed. Ratios ours / app and ours / plain, and the size at which ours' failure wall time overtakes each
baseline (linear interpolation between measured sizes, or a linear fit beyond them) follow, then each round side
by side (:func:`rounds_table`: the spread a median hides), per Airflow configuration each step's span in each run
(:func:`step_spans`), and each run cut into its three phases in a row (:func:`phases`). Each run's CPU seconds by
kind of process (``_etl_stack.CpuSampler``: Airflow, Spark JVM, Python workers, S3 server, (a)'s client) are printed
with it. ``--json``: every run with its tries' timeline (queued, started, ended, from the trigger) and ours' step
tasks' own phases. ``--record PATH``: the run's record (``_record.py``, built by ``_etl_record.py``: each round's
wall times and ratios, the command, date and time, commit, machine and load average at the start and the end), for
``benchmarks/results/`` (name it ``YYYY-MM-DD-topic.json``; the page ``docs/performance.md`` is generated from there).
"""

from __future__ import annotations

import argparse
import itertools
import json
import statistics
import subprocess
import sys
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import _repo_path  # noqa: F401 - puts the repository root on sys.path
from _etl_auto import HISTORY_RUNS, AutoRuns, variants
from _etl_record import etl_record
from _etl_runs import (
    FUSED_PLANS,
    PLAIN,
    auto_variant,
    ours_variant,
    plain_variant,
    rotated,
    run_airflow,
    run_app,
    step_timelines,
    warm_up_each,
    warm_up_size,
)
from _etl_stack import Salts, add_stack_arguments, parse_sizes, run_on, size_of, stack_from, write_json
from _etl_store import committed_bytes, report_rows
from _record import git_commit, load_average, this_machine, write

CONFIGS = ("ours", *FUSED_PLANS, "auto", "app", *PLAIN)
DEFAULT_CONFIGS = ("ours", "app", "plain")


# -- output -------------------------------------------------------------------------------------------------------
def _med(runs: list[dict[str, Any]], key: str) -> float:
    return statistics.median(r[key] for r in runs)


def _cell(runs: list[dict[str, Any]] | None, key: str) -> str:
    return f"{_med(runs, key):.1f}" if runs else "-"


def _ratio(ours: list[dict[str, Any]] | None, other: list[dict[str, Any]] | None) -> str:
    return f"{_med(ours, 'wall_s') / _med(other, 'wall_s'):.2f}x" if ours and other else "-"


def table(sizes: list[dict[str, Any]], results: dict[tuple[str, str, bool], list[dict[str, Any]]],
          configs: tuple[str, ...]) -> str:
    """Markdown table: per size and config, medians and the ours / config ratios."""
    names = {"ours": "ours (region failover)", "fused": "ours, AUTO plan: all fused",
             "mixed": "ours, AUTO plan: generators fused into the join",
             "auto": "ours, AUTO: the plan chosen from its history", "app": "(a) one Spark application",
             "plain": "(b) plain Airflow, Spark's s3a writer", "plain_store": "(b) plain Airflow on our store"}
    rows = ["| size | GB committed | orders | config | no-failure wall s | task-s | failure wall s | "
            "failure task-s | ours / config, no failure | ours / config, failure |",
            "|---|---:|---:|---|---:|---:|---:|---:|---:|---:|"]
    for size in sizes:
        label = size["label"]
        for config in configs:
            ok, bad = results.get((label, config, False)), results.get((label, config, True))
            if not ok and not bad:
                continue
            ours_ok, ours_bad = results.get((label, "ours", False)), results.get((label, "ours", True))
            cells = [_cell(ok, "wall_s"), _cell(ok, "task_s"), _cell(bad, "wall_s"), _cell(bad, "task_s")]
            ratios = [_ratio(ours_ok, ok), _ratio(ours_bad, bad)] if config != "ours" else ["-", "-"]
            rows.append(f"| {label} | {size.get('gb', float('nan')):.3f} | {size['orders']:,} | {names[config]} | "
                        + " | ".join(cells) + " | " + " | ".join(ratios) + " |")
    return "\n".join(rows)


def rounds_table(runs: list[dict[str, Any]], configs: tuple[str, ...]) -> str:
    """Markdown table: per size, failure and round, each configuration's wall time and ours ÷ each other one (the
    spread a median hides)."""
    others = [c for c in configs if c != "ours"]
    head = "| size | failure | round | " + " | ".join(f"{c} s" for c in configs)
    head += "".join(f" | ours ÷ {c}" for c in others if "ours" in configs) + " |"
    rows = [head, "|---|---|---:|" + "---:|" * (len(configs) + (len(others) if "ours" in configs else 0))]
    seen: dict[tuple[str, bool, str], int] = {}
    table_rows: dict[tuple[str, bool, int], dict[str, float]] = {}
    for run in runs:
        key = (run["size"], run["fail"], run["config"])
        number = seen[key] = seen.get(key, 0) + 1
        table_rows.setdefault((run["size"], run["fail"], number), {})[run["config"]] = run["wall_s"]
    for (size, fail, number), walls in table_rows.items():
        cells = [f"{walls[c]:.1f}" if c in walls else "-" for c in configs]
        if "ours" in configs:
            cells += [f"{walls['ours'] / walls[c]:.2f}" if "ours" in walls and c in walls else "-" for c in others]
        rows.append(f"| {size} | {'yes' if fail else 'no'} | {number} | " + " | ".join(cells) + " |")
    return "\n".join(rows)


NOT_RUN = ("upstream_failed", "skipped", "removed")


def step_spans(timeline: list[dict[str, Any]]) -> dict[str, tuple[float, float]]:
    """Each step's first start and last end over its tasks' tries (seconds from the trigger), in order of first
    start: a task id without its subtask index (``join.1`` -> ``join``; a chain keeps its steps' names). A try that
    did not run (``upstream_failed``, ``skipped``) has no span."""
    spans: dict[str, tuple[float, float]] = {}
    for attempt in sorted(timeline, key=lambda t: t["started"]):
        if attempt.get("state") in NOT_RUN:
            continue
        head, _, index = attempt["task_id"].rpartition(".")
        step = head if head and index.isdigit() else attempt["task_id"]
        lo, hi = spans.get(step, (attempt["started"], attempt["ended"]))
        spans[step] = (min(lo, attempt["started"]), max(hi, attempt["ended"]))
    return spans


def steps_table(runs: list[dict[str, Any]], config: str) -> str:
    """Markdown table: per run of the Airflow ``config``, each step's first start and last end (:func:`step_spans`)."""
    mine = [run for run in runs if run["config"] == config and run.get("timeline")]
    if not mine:
        return ""
    names = list(step_spans(mine[0]["timeline"]))
    rows = [f"| {config}: run | wall s | " + " | ".join(names) + " |", "|---|---:|" + "---|" * len(names)]
    for number, run in enumerate(mine, 1):
        spans = step_spans(run["timeline"])
        cells = [f"{spans[n][0]:.1f}-{spans[n][1]:.1f}" if n in spans else "-" for n in names]
        rows.append(f"| {run['size']} {'failure' if run['fail'] else 'no failure'} #{number} | {run['wall_s']:.1f} | "
                    + " | ".join(cells) + " |")
    return "\n".join(rows)


PHASES = ("generation", "join", "aggregate, failure, report")


def phases(run: dict[str, Any]) -> dict[str, float]:
    """An Airflow run of the ETL cut into its three phases in a row (seconds): the trigger to the last generator's or
    cleaner's end, the join's span, the aggregate's first start to the report's end; ``between`` is the rest of the
    wall time (Airflow's scheduling between the phases, the run's end)."""
    spans = step_spans(run["timeline"])
    generation = max(end for step, (_, end) in spans.items() if step.startswith(("gen", "clean")))
    cut = {"generation": generation, "join": spans["join"][1] - spans["join"][0],
           "aggregate, failure, report": spans["report"][1] - spans["aggregate"][0]}
    return {**cut, "between": run["wall_s"] - sum(cut.values())}


def phases_table(runs: list[dict[str, Any]], configs: tuple[str, ...]) -> str:
    """Markdown table: per phase (:func:`phases`), each Airflow configuration's seconds in each of its runs; a
    configuration whose join, aggregate or report shares a task with another step (a fused plan) has no phases."""
    timed = [run for run in runs if run["config"] != "app" and run.get("timeline")]
    alone = {run["config"] for run in timed if {"join", "aggregate", "report"} <= set(step_spans(run["timeline"]))}
    airflow = [c for c in configs if c != "app" and c in alone]
    cut = {c: [phases(run) for run in timed if run["config"] == c] for c in airflow}
    rows = ["| phase | " + " | ".join(f"{c}, each run s" for c in airflow) + " |", "|---|" + "---|" * len(airflow)]
    for name in (*PHASES, "between"):
        rows.append(f"| {name} | " + " | ".join(" / ".join(f"{p[name]:.1f}" for p in cut[c]) for c in airflow) + " |")
    return "\n".join(rows)


def crossover(sizes: list[dict[str, Any]], results: dict[tuple[str, str, bool], list[dict[str, Any]]],
              baseline: str) -> str:
    """Where ours' failure wall time drops below ``baseline``'s, in GB committed."""
    points = [(s["gb"], _med(results[(s["label"], "ours", True)], "wall_s")
               - _med(results[(s["label"], baseline, True)], "wall_s"))
              for s in sizes if (s["label"], "ours", True) in results and (s["label"], baseline, True) in results]
    if not points:
        return f"{baseline}: not measured"
    points.sort()
    shown = ", ".join(f"{gb:.2f} GB: {d:+.1f} s" for gb, d in points)
    if points[0][1] < 0:
        return f"ours is faster than {baseline} on a failure already at the smallest size ({shown})"
    for (g0, d0), (g1, d1) in itertools.pairwise(points):
        if d1 < 0 <= d0:
            return (f"ours overtakes {baseline} on a failure at ~{g0 + (g1 - g0) * d0 / (d0 - d1):.2f} GB committed "
                    f"(linear interpolation; ours - {baseline} failure wall: {shown})")
    if len(points) >= 2:
        n = len(points)
        mx, my = sum(g for g, _ in points) / n, sum(d for _, d in points) / n
        slope = sum((g - mx) * (d - my) for g, d in points) / max(sum((g - mx) ** 2 for g, _ in points), 1e-12)
        if slope < 0:
            return (f"ours does not overtake {baseline} within the measured sizes; a linear fit puts the crossover "
                    f"at ~{mx - my / slope:.2f} GB committed (ours - {baseline} failure wall: {shown})")
    return f"ours does not overtake {baseline} on a failure at the measured sizes, nor on their trend ({shown})"


def measure(args: argparse.Namespace, stack: Any, procs: list[subprocess.Popen[bytes]],
            sizes: list[dict[str, Any]], configs: tuple[str, ...], warm: dict[str, Any] | None) -> int:
    """After the ``warm`` up (:func:`warm_up_each`), run every (size, config, failure) combination on the started
    stack, print the table."""
    failures = [{"no": False, "yes": True}[f] for f in args.failures.split(",")]
    salts = Salts(same=args.same_salt)
    results: dict[tuple[str, str, bool], list[dict[str, Any]]] = {}
    runs: list[dict[str, Any]] = []
    with stack.airflow.client() as api:
        if warm is not None:
            warm_up_each(api, stack, procs, warm, configs, salts)
        auto = AutoRuns(api, stack, args.timeout)
        for size in sizes:
            label, orders, customers = size["label"], size["orders"], size["customers"]
            dag_ids = size["dag_ids"]
            for config in ("ours", *FUSED_PLANS, *PLAIN, "auto", "auto_failing"):
                if config.removesuffix("_failing") in configs:
                    api.wait_for_dag(dag_ids[config], timeout=300)
            print(f"== size {label}: {orders:,} orders, {customers:,} customers", flush=True)
            if "auto" in configs:
                auto.history(dag_ids, args.history, salts)
            for round_number in range(args.repeat):
                for fail in failures:
                    for config in rotated(configs, round_number):
                        salt, mark = salts.next(), stack.cpu.mark()
                        if config == "app":
                            run = run_app(stack.spark_url, stack.s3_env, label, orders, customers, fail, procs,
                                          salt, watch=lambda pid: stack.cpu.watch(pid, "app"))
                        elif config == "auto":
                            run = auto.run(dag_ids["auto_failing" if fail else "auto"], fail, salt)
                        else:
                            run = run_airflow(api, dag_ids[config], fail, args.timeout, salt)
                        run["cpu"], run["airflow_roles"] = stack.cpu.since(mark)
                        run["committed_bytes"], per_result = committed_bytes(stack.store, run["dag_id"],
                                                                             run["run_id"])
                        if config == "ours":  # each step task's own phases (its summary's timeline), for --json
                            run["steps"] = step_timelines(api, run)
                        results.setdefault((label, config, fail), []).append(run)
                        runs.append({"size": label, "config": config, "fail": fail, "salt": salt, **run})
                        write_json(args.json, runs)  # after every run: a long measurement that stops keeps its runs
                        shown = {k: v for k, v in run.items() if k not in ("timeline", "steps")}  # in --json
                        print(json.dumps({"size": label, "config": config, "fail": fail, "salt": salt, **shown,
                                          "committed_by_result": per_result}), flush=True)
            ours_ok = results.get((label, "ours", False)) or results.get((label, "ours", True))
            if ours_ok:
                size["gb"] = _med(ours_ok, "committed_bytes") / 1e9
                print(f"{label}: {_med(ours_ok, 'committed_bytes') / orders:.1f} bytes committed per order "
                      f"(sizing used {args.bytes_per_order})", flush=True)
            last = {c: results[(label, c, failures[-1])][-1] for c in configs}
            check = {c: report_rows(stack.store, run["dag_id"], run["run_id"]) for c, run in last.items()}
            same = all(rows == next(iter(check.values())) for rows in check.values())
            print(f"reports of {', '.join(configs)} at {label} agree: {'yes' if same else 'NO'}", flush=True)
    print(table(sizes, results, configs))
    print(rounds_table(runs, configs))
    for config in configs:
        if config != "app":
            print(steps_table(runs, config))
    if any(c != "app" for c in configs):
        print(phases_table(runs, configs))
    if "ours" in configs:
        for baseline in (c for c in configs if c != "ours"):
            print(crossover(sizes, results, baseline))
    if args.record:
        write_record(Path(args.record), args, runs, sizes, configs)
    return 0


def write_record(path: Path, args: argparse.Namespace, runs: list[dict[str, Any]], sizes: list[dict[str, Any]],
                 configs: tuple[str, ...]) -> None:
    """``--record``: this run's record, the start as :func:`main` noted it in ``args.started``."""
    started, load, end = args.started, args.load_at_start, datetime.now(timezone.utc)
    meta = {"question": f"The example ETL at {', '.join(s['label'] for s in sizes)}: ours against "
                        f"{', '.join(c for c in configs if c != 'ours')}, failures {args.failures}, at {args.fail_at}",
            "command": " ".join(["python", *sys.argv]), "date": started.strftime("%Y-%m-%d"),
            "time_utc": f"{started:%H:%M}–{end:%H:%M}", "commit": git_commit(), "machine": this_machine(),
            "load": f"{load} at the start, {load_average()} at the end"}
    write(path, etl_record(path.stem, runs, sizes, meta))
    print(f"record: {path}", flush=True)


# -- main ---------------------------------------------------------------------------------------------------------
def main(argv: list[str] | None = None) -> int:
    """Start the stack once, run every (size, config, failure) combination, print the table."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", type=parse_sizes, default=["tiny", "1", "5"],
                        help="comma-separated: 'tiny' (the DAG's defaults) or a scale N (N GB over the bytes ours "
                             "commits per order at tiny; ours commits ~0.11 GB per unit at scale; default tiny,1,5)")
    parser.add_argument("--configs", default=",".join(DEFAULT_CONFIGS),
                        help=f"subset of {','.join(CONFIGS)} (default {','.join(DEFAULT_CONFIGS)})")
    parser.add_argument("--repeat", type=int, default=1, help="runs per (size, config, failure) (default 1)")
    parser.add_argument("--history", type=int, default=HISTORY_RUNS,
                        help=f"auto: unmeasured runs of each auto DAG before the measured ones (default "
                             f"{HISTORY_RUNS})")
    parser.add_argument("--failures", default="no,yes", choices=["no,yes", "no", "yes"],
                        help="runs without a failure, with one late failure, or both (default)")
    parser.add_argument("--fail-at", default="start", choices=["start", "end"],
                        help="where ours' and (b)'s injected failure fires: as aggregate starts (default) or at the "
                             "end of its job, after its aggregation ran, as (a)'s does")
    parser.add_argument("--same-salt", action="store_true",
                        help="give every run the same salt (the scheduled-run case: a run finds the outputs of the "
                             "runs before it in the content-addressed store); default: a new salt per run")
    parser.add_argument("--warm-up", default="auto",
                        help="size of the warm-up runs (one per configuration, not measured): 'tiny', a GB target, "
                             "'none', or 'auto' (default: the first size; none when that is tiny)")
    parser.add_argument("--json", help="write every run (with its tries' timeline: queued, started, ended) to this "
                                       "file")
    parser.add_argument("--record", help="write the run's record (benchmarks/_record.py) to this file, e.g. "
                                         "benchmarks/results/YYYY-MM-DD-etl-compare-5gb.json")
    add_stack_arguments(parser)
    parser.add_argument("--timeout", type=float, default=7200.0, help="per run, seconds")
    args = parser.parse_args(argv)
    args.started, args.load_at_start = datetime.now(timezone.utc), load_average()
    configs = tuple(c for c in CONFIGS if c in args.configs.split(","))
    stack, procs = stack_from(args), []
    sizes = [size_of(wanted, args.bytes_per_order) for wanted in args.sizes]
    for size in sizes:  # every DAG file is written before Airflow starts
        size["dag_ids"] = {"ours": ours_variant(stack.dags, size["label"], size["orders"], size["customers"],
                                                fail_at=args.fail_at),
                           **{c: plain_variant(stack.dags, size["label"], size["orders"], size["customers"], c,
                                               args.fail_at) for c in PLAIN},
                           **{c: auto_variant(stack.dags, size["label"], size["orders"], size["customers"], c,
                                              args.fail_at) for c in FUSED_PLANS},
                           **variants(stack.dags, size, args.fail_at)}
    warm = warm_up_size(args.warm_up, sizes[0], args.bytes_per_order)
    if warm is not None:
        warm["dag_ids"] = {"ours": ours_variant(stack.dags, "warm", warm["orders"], warm["customers"]),
                           **{c: plain_variant(stack.dags, "warm", warm["orders"], warm["customers"], c)
                              for c in PLAIN},
                           **{c: auto_variant(stack.dags, "warm", warm["orders"], warm["customers"], c)
                              for c in FUSED_PLANS},
                           "auto": variants(stack.dags, warm, "start")["auto"]}
    return run_on(stack, lambda: measure(args, stack, procs, sizes, configs, warm), procs)


if __name__ == "__main__":
    sys.exit(main())

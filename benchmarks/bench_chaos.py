"""Repeated failures: the example ETL with a failure every T seconds, ours (region failover) against (a) one Spark
application rerun whole on each failure, with the same failure clock, on ``bench_etl_compare.py``'s stack.

``python benchmarks/bench_chaos.py [--sizes 5] [--intervals 60,120,240] [--configs ours,app] [--history K]
[--plot FILE]``

After one unmeasured run of each at the tiny size, per size, first each configuration's failure-free run (its wall
time W), then per interval T and configuration one run with a failure every T seconds from its start, until a
correct report or 3 x W ("did not finish"):

* **ours**: the ETL with a fixed-delay restart strategy of 1,000 attempts (the example's 3 would end the run after
  its third failure; Flink's experiment, too, restarted without a bound); every T s a running step task, picked at
  random, is killed (SIGKILL of its task process: its Spark Connect client dies mid-work, Airflow's supervisor
  reports it failed, the scheduler's watcher records the failure and clears its region). If no step task is
  running at that moment, the first one to run is killed;
* **(a)**: the application process (``_etl_runs.py _app``) is killed every T s and started again after 1 s,
  from scratch, until an attempt finishes.

With ``--history K`` (default 1), each ours measurement at T follows K unmeasured ours runs with the same failure
clock, each started once the scheduler stored its decision after the run before (``_etl_auto.AutoRuns``): the
planner has then seen failures come every T seconds, and the measured run runs the epochs it chose for the ETL's
sliced chains (``docs/user/auto-plans.md``; every step but the report is ``rescalable``), recorded with the run.
With ``--history 0`` the protocol is the one before sliced chains.

Every run has its own salt (no run finds its outputs in the store). A finished run's report is checked against the
failure-free run's. Printed: a table per size (completion time, failures injected, x W) and the PNG plot —
failure interval on x, completion time on y, one line per configuration, dashed: each failure-free time; a run that
did not finish is drawn at 3 x W with a cross.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import _repo_path  # noqa: F401 - puts the repository root on sys.path
from _etl_runs import S3_ENV, _app_command, ours_variant, run_app, warm_up
from _etl_stack import Salts, add_stack_arguments, parse_sizes, run_on, size_of, stack_from, write_json
from _etl_store import report_rows
from airflow_region_failover.naming import OPERATOR_NAME

PLOT = Path("chaos.png")  # in the current directory; the docs' plot is drawn from the run's record
ATTEMPTS = 1000
GIVE_UP = 3.0


class Killer:
    """Every ``interval`` s from ``start``, SIGKILL one running step task of the run, picked at random (module
    rule); the times and tasks it killed are in ``killed``."""

    def __init__(self, api: Any, dag_id: str, interval: float, seed: int) -> None:
        self.api, self.dag_id, self.interval = api, dag_id, interval
        self.random = random.Random(seed)
        self.run_id = ""
        self.killed: list[tuple[float, str]] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="chaos", daemon=True)

    def start(self, run_id: str) -> None:
        self.run_id, self.started = run_id, time.time()
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=30)

    def _run(self) -> None:
        due = self.started + self.interval
        while not self._stop.wait(max(0.0, due - time.time())):
            while not self._stop.is_set() and not self._kill_one():
                self._stop.wait(0.5)
            due += self.interval

    def _kill_one(self) -> bool:
        running = [ti for ti in self.api.task_instances(self.dag_id, self.run_id)
                   if ti.get("state") == "running" and ti.get("operator") == OPERATOR_NAME and ti.get("pid")]
        if not running:
            return False
        victim = self.random.choice(running)
        try:
            os.kill(int(victim["pid"]), signal.SIGKILL)
        except ProcessLookupError:
            return False
        self.killed.append((time.time() - self.started, victim["task_id"]))
        print(f"  killed {victim['task_id']} (try {victim['try_number']}, pid {victim['pid']}) at "
              f"{self.killed[-1][0]:.0f} s", flush=True)
        return True


def run_ours_chaos(api: Any, dag_id: str, interval: float, salt: int, limit: float) -> dict[str, Any]:
    """One ours run with the failure clock; ``wall_s`` None when it did not finish within ``limit`` s."""
    killer = Killer(api, dag_id, interval, seed=salt)
    started = time.time()
    run_id = api.trigger(dag_id, {"fail_once": False, "salt": salt})
    killer.start(run_id)
    try:
        state = api.final_state(dag_id, run_id, timeout=limit)
    except TimeoutError:
        state = "did not finish"
        api.call("PATCH", f"/dags/{dag_id}/dagRuns/{run_id}", json={"state": "failed"})
    finally:
        killer.stop()
    wall = time.time() - started
    return {"run_id": run_id, "dag_id": dag_id, "state": state, "failures": len(killer.killed),
            "wall_s": wall if state == "success" else None, "killed": killer.killed}


def run_ours_planned(api: Any, auto: Any, dag_id: str, interval: float, salt: int, limit: float) -> dict[str, Any]:
    """:func:`run_ours_chaos` once the decision after the DAG's run before is stored, with the epochs its run's plan
    fixed for each sliced chain (``epochs``) and the model's prediction of the run on the history before it
    (``predicted``: the declared plan's expected completion time at the failure rates that history measured)."""
    auto.wait_for_decision(dag_id)
    predicted = auto.predicted(dag_id)
    run = run_ours_chaos(api, dag_id, interval, salt, limit)
    run["predicted"] = predicted
    auto.last[dag_id] = run["run_id"]
    fixed = auto.plans.of_run(dag_id, run["run_id"])
    run["epochs"] = {} if fixed is None else {s: c.epochs for s, c in sorted(fixed.epochs.items())}
    return run


def run_app_chaos(stack: Any, size: dict[str, Any], interval: float, salt: int, limit: float,
                  procs: list[subprocess.Popen[bytes]]) -> dict[str, Any]:
    """(a) with the failure clock: each attempt is killed at the next tick, the next starts 1 s later."""
    dag_id, run_id = f"etl_one_app_{size['label']}", f"app_{int(time.time() * 1000)}"
    started, attempt, killed = time.time(), 1, 0
    due = started + interval
    while time.time() - started < limit:
        proc = subprocess.Popen(_app_command(stack.spark_url, dag_id, run_id, size["orders"], size["customers"],
                                             attempt, salt, False),
                                env={**os.environ, S3_ENV: stack.s3_env}, stdout=subprocess.DEVNULL,
                                stderr=subprocess.PIPE)
        procs.append(proc)
        try:
            proc.wait(timeout=max(0.0, min(due, started + limit) - time.time()))
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        procs.remove(proc)
        if proc.returncode == 0:
            return {"dag_id": dag_id, "run_id": run_id, "state": "success", "failures": killed,
                    "wall_s": time.time() - started, "tries": attempt}
        if proc.returncode != -signal.SIGKILL:
            raise SystemExit(f"(a) attempt {attempt} failed on its own: {proc.stderr.read().decode()[-2000:]}"
                             if proc.stderr else f"(a) attempt {attempt} failed on its own")
        killed += time.time() - started < limit
        print(f"  killed (a) attempt {attempt} at {time.time() - started:.0f} s", flush=True)
        attempt, due = attempt + 1, due + interval
        time.sleep(1.0)
    return {"dag_id": dag_id, "run_id": run_id, "state": "did not finish", "failures": killed, "wall_s": None,
            "tries": attempt}


def plot(path: Path, size: str, intervals: list[float], base: dict[str, float],
         results: dict[tuple[str, float], dict[str, Any]]) -> None:
    """The plot of the module rule."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    names = {"ours": "ours (region failover)", "app": "(a) one Spark application, rerun whole"}
    intervals = sorted(intervals)
    fig, ax = plt.subplots(figsize=(7, 4.5))
    for config, color in (("ours", "tab:blue"), ("app", "tab:orange")):
        if config not in base:
            continue
        ys = [results[(config, t)]["wall_s"] or GIVE_UP * base[config] for t in intervals]
        ax.plot(intervals, ys, marker="o", color=color, label=names[config])
        for t, y in zip(intervals, ys, strict=True):
            if results[(config, t)]["wall_s"] is None:
                ax.plot([t], [y], marker="x", markersize=12, color=color)
                ax.annotate("did not finish", (t, y), textcoords="offset points", xytext=(5, 5), fontsize=8)
        ax.axhline(base[config], linestyle="--", color=color, linewidth=1,
                   label=f"{names[config].split(' (')[0] if config == 'ours' else '(a)'} without failure")
    ax.set_xlabel("failure interval T (s): one failure every T seconds")
    ax.set_ylabel("completion time (s)")
    ax.set_title(f"Example ETL at {size} with repeated failures")
    ax.set_xticks(intervals)
    ax.legend(fontsize=8)
    ax.grid(alpha=0.3)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    print(f"plot: {path}")


def replot(figures_json: Path, path: Path) -> int:
    """The plot of each size in ``figures_json`` (what ``--json`` wrote) drawn again to ``path``."""
    for figure in json.loads(figures_json.read_text()):
        runs = {(key.split("@")[0], float(key.split("@")[1])): run for key, run in figure["runs"].items()}
        plot(path, figure["size"]["label"], sorted({t for _, t in runs}), figure["base"], runs)
    return 0


def measure(args: argparse.Namespace, stack: Any, procs: list[Any], sizes: list[dict[str, Any]],
            intervals: list[float], configs: list[str], warm: dict[str, Any]) -> int:
    """On the started stack, after the ``warm`` up (:func:`~_etl_runs.warm_up`: without it the first
    failure-free run, the divisor of every ratio, paid the fresh stack's one-off costs), per size: each config once
    without failure, then under failures every interval; a table and a plot per size, every figure written to
    ``--json``."""
    from _etl_auto import AutoRuns

    figures, salts = [], Salts()
    with stack.airflow.client() as api:
        warm_up(api, stack, procs, warm["dag_id"], warm, salts)
        auto = AutoRuns(api, stack, 7200.0)
        for size in sizes:
            api.wait_for_dag(size["dag_id"], timeout=300)
            base, results, reports, histories = {}, {}, {}, []
            for config in configs:
                salt = salts.next()
                run = (auto.run(size["dag_id"], False, salt) if config == "ours" else
                       run_app(stack.spark_url, stack.s3_env, size["label"], size["orders"], size["customers"],
                               False, procs, salt))
                base[config] = run["wall_s"]
                reports[config] = report_rows(stack.store, run["dag_id"], run["run_id"])
                print(f"{size['label']} {config} without failure: {run['wall_s']:.1f} s", flush=True)
            for interval in intervals:
                for config in configs:
                    limit = GIVE_UP * base[config]
                    for number in range(args.history if config == "ours" else 0):
                        past = run_ours_planned(api, auto, size["dag_id"], interval, salts.next(), limit)
                        histories.append({"interval_s": interval, **past})
                        print(json.dumps({"size": size["label"], "history": number + 1, "interval_s": interval,
                                          "state": past["state"], "failures": past["failures"],
                                          "epochs": past["epochs"]}), flush=True)
                    salt = salts.next()
                    run = (run_ours_planned(api, auto, size["dag_id"], interval, salt, limit) if config == "ours"
                           else run_app_chaos(stack, size, interval, salt, limit, procs))
                    if run["state"] == "success":
                        run["report_ok"] = report_rows(stack.store, run["dag_id"], run["run_id"]) == reports[
                            config]
                    results[(config, interval)] = run
                    shown = f"{run['wall_s']:.1f} s" if run["wall_s"] else "did not finish in 3x"
                    print(json.dumps({"size": size["label"], "config": config, "interval_s": interval,
                                      "result": shown, "failures": run["failures"],
                                      "report_ok": run.get("report_ok"), "epochs": run.get("epochs"),
                                      "predicted": {k: v for k, v in (run.get("predicted") or {}).items()
                                                    if k not in ("history", "job")}}), flush=True)
            print("\n| size | config | without failure s | T s | completion s | failures | x without | report |"
                  "\n|---|---|---:|---:|---:|---:|---:|---|")
            for (config, interval), run in results.items():
                wall = run["wall_s"]
                print(f"| {size['label']} | {config} | {base[config]:.1f} | {interval:.0f} | "
                      f"{f'{wall:.1f}' if wall else 'did not finish in 3x'} | {run['failures']} | "
                      f"{f'{wall / base[config]:.2f}' if wall else '-'} | "
                      f"{'correct' if run.get('report_ok') else '-'} |")
            plot(args.plot, size["label"], intervals, base, results)
            figures.append({"size": size, "base": base, "runs": {f"{c}@{t:.0f}": r
                                                                 for (c, t), r in results.items()},
                            "history": histories})
    write_json(args.json, figures)
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", type=parse_sizes, default=["5"], help="comma-separated GB targets (default 5)")
    parser.add_argument("--intervals", default="60,120,240", help="failure intervals in seconds (default 60,120,240)")
    parser.add_argument("--configs", default="ours,app", help="subset of ours,app")
    parser.add_argument("--plot", type=Path, default=PLOT,
                        help=f"PNG to write (default {PLOT.name} in the current directory)")
    parser.add_argument("--json", help="write every figure to this file")
    parser.add_argument("--history", type=int, default=1,
                        help="unmeasured ours runs with the same failure clock before each measured one (default 1)")
    parser.add_argument("--replot", type=Path, help="draw the plot again from a --json file of an earlier run")
    add_stack_arguments(parser)
    args = parser.parse_args(argv)
    if args.replot:
        return replot(args.replot, args.plot)
    intervals = [float(t) for t in args.intervals.split(",")]
    configs = [c for c in ("ours", "app") if c in args.configs.split(",")]
    stack, procs = stack_from(args), []
    sizes = [size_of(wanted, args.bytes_per_order) for wanted in args.sizes]
    for size in sizes:
        size["dag_id"] = ours_variant(stack.dags, size["label"], size["orders"], size["customers"], "tpch_chaos",
                                      ATTEMPTS)
    warm = size_of("tiny")
    warm["dag_id"] = ours_variant(stack.dags, "warm", warm["orders"], warm["customers"], "tpch_chaos", ATTEMPTS)
    return run_on(stack, lambda: measure(args, stack, procs, sizes, intervals, configs, warm), procs)


if __name__ == "__main__":
    sys.exit(main())

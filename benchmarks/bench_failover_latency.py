"""Failure -> clear applied, hop by hop: the example ETL (``tpch_etl``, tiny) with ``fail_once`` run N times on
``bench_etl_compare.py``'s stack (SeaweedFS, Spark Connect, Airflow 3 with LocalExecutor and its scheduler's
watcher).

``python benchmarks/bench_failover_latency.py [--runs 12] [--sizes tiny]``

Each run's ``aggregate#0`` raises on its first try; the failover loop records the failure in the worker (the
listener), a scheduler's watcher claims the decision once due and clears the region through the REST API. Read
back from each run's decision log (:mod:`airflow_region_failover.failover.run_log`), per failure:

* **record**: the failure (the listener's ``at``) -> its decision recorded (``created``): planning with the deep
  availability check, the producers at work, the compare-and-swap;
* **due**: recorded -> due (``clear_at``: the merge window, or the restart delay if shorter);
* **claim**: due -> claimed by a watcher (its polling, Airflow settling: the failed task must have left the
  running states);
* **clear**: claimed -> applied (the REST clear, the log's compare-and-swap);
* **failure -> applied** and the same **minus the restart strategy's delay** (``delay_s``), the issue's target
  (<= 1.5 s median over >= 10 failures).
"""

from __future__ import annotations

import argparse
import statistics
import sys
from typing import Any

import _repo_path  # noqa: F401 - puts the repository root on sys.path
from _etl_runs import ours_variant, run_airflow
from _etl_stack import add_stack_arguments, parse_sizes, run_on, size_of, stack_from

HOPS = ("record", "due", "claim", "clear", "failure -> applied", "minus delay")


def hops(decision: Any) -> dict[str, float]:
    """The hops of one applied decision (module docstring), in seconds."""
    failed = min(f.at for f in decision.failures)
    return {"record": decision.created - failed, "due": decision.clear_at - decision.created,
            "claim": (decision.claimed_at or 0.0) - decision.clear_at,
            "clear": (decision.applied_at or 0.0) - (decision.claimed_at or 0.0),
            "failure -> applied": (decision.applied_at or 0.0) - failed,
            "minus delay": (decision.applied_at or 0.0) - failed - decision.delay_s}


def table(rows: list[dict[str, float]]) -> str:
    """Median, min and max of every hop."""
    lines = ["| hop | median s | min s | max s |", "|---|---:|---:|---:|"]
    for hop in HOPS:
        values = [r[hop] for r in rows]
        lines.append(f"| {hop} | {statistics.median(values):.3f} | {min(values):.3f} | {max(values):.3f} |")
    return "\n".join(lines)


def measure(args: argparse.Namespace, stack: Any, size: dict[str, Any], dag_id: str) -> int:
    """On the started stack: ``--runs`` failing runs, the hops of every applied decision, then their table."""
    from airflow_region_failover.decisions.storage import RunLogs
    from airflow_region_failover.failover.run_log import DecisionStatus

    rows: list[dict[str, float]] = []
    logs = RunLogs(stack.store.objects)
    with stack.airflow.client() as api:
        api.wait_for_dag(dag_id, timeout=300)
        for number in range(args.runs):
            run = run_airflow(api, dag_id, True, args.timeout, salt=number + 1)
            applied = [d for d in logs.read(dag_id, run["run_id"]).decisions
                       if d.status is DecisionStatus.APPLIED]
            for decision in applied:
                rows.append(hops(decision))
                print(f"run {number + 1}: " + ", ".join(f"{k} {v:.3f} s" for k, v in rows[-1].items()),
                      flush=True)
    print(f"\n{len(rows)} failures, {size['label']}\n")
    print(table(rows))
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=12, help="failing runs, one after another (default 12)")
    parser.add_argument("--sizes", type=parse_sizes, default=["tiny"], help="the ETL's size (default tiny)")
    parser.add_argument("--timeout", type=float, default=1800.0, help="per run, seconds")
    add_stack_arguments(parser)
    args = parser.parse_args(argv)
    stack = stack_from(args)
    size = size_of(args.sizes[0], args.bytes_per_order)
    dag_id = ours_variant(stack.dags, size["label"], size["orders"], size["customers"])
    return run_on(stack, lambda: measure(args, stack, size, dag_id))


if __name__ == "__main__":
    sys.exit(main())

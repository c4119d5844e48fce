"""Render benchmark: job graph -> TaskGroups + operators, and the DAG-file parse time, at 100 / 1,000 / 5,000 steps.

What is measured, per size N (a layered graph: N steps, parallelism 1, each step consuming its predecessor —
PIPELINED every third edge, else BLOCKING — and every fifth step also the step five back, BLOCKING):

* **render** (in process): ``RegionJob`` declarations + ``render()`` into a fresh DAG (graph validation, options,
  regions, one TaskGroup per region, one operator per subtask, dependencies, job-document param), side by side
  with **plain**: the same number of ``EmptyOperator`` tasks in the same TaskGroups with the same dependencies,
  built by hand — the Airflow floor any renderer pays. ``ratio`` = render / plain.
* **serialize**: ``DagSerialization.to_dict`` of the rendered DAG (what the dag-processor stores), and the size of
  the serialized JSON.
* **parse** (fresh process): a DAG file that declares the graph is loaded with ``DagBag`` (what the dag-processor
  and every task do); the figure is that process's DagBag time minus the same for a DAG file with one
  ``EmptyOperator`` (Airflow's fixed cost), best of R.

Timing: best of R (default 3) with :func:`time.perf_counter`, one ``gc.collect()`` before each repetition. The
2 cores are shared, so figures are noisy; best-of-R keeps the least disturbed run.

Usage: ``python benchmarks/bench_render.py [--quick] [--sizes 100,1000,5000] [--repeat 3]``.
"""

from __future__ import annotations

import argparse
import gc
import json
import subprocess
import sys
import tempfile
import textwrap
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

DAG_FILE = textwrap.dedent("""
    from airflow.sdk import DAG
    from airflow_region_failover import RegionJob

    def step(spark, inputs, context):
        return None

    with DAG("bench_render_{n}", schedule=None):
        job = RegionJob()
        for i in range({n}):
            job.step(f"s{{i}}", step)
            if i:
                job.edge(f"s{{i - 1}}", f"s{{i}}", exchange="PIPELINED" if i % 3 == 0 else "BLOCKING")
            if i >= 5 and i % 5 == 0:
                job.edge(f"s{{i - 5}}", f"s{{i}}", exchange="BLOCKING")
        job.render()
""")
BASELINE_FILE = textwrap.dedent("""
    from airflow.sdk import DAG
    from airflow.providers.standard.operators.empty import EmptyOperator

    with DAG("bench_render_baseline", schedule=None):
        EmptyOperator(task_id="only")
""")
PARSE = textwrap.dedent("""
    import sys, time
    import airflow.sdk, airflow_region_failover.authoring, airflow_region_failover.rendering.task_groups
    import airflow_region_failover.operators.step
    from airflow.dag_processing.dagbag import DagBag
    t = time.perf_counter()
    bag = DagBag(sys.argv[1])
    took = time.perf_counter() - t
    assert not bag.import_errors, bag.import_errors
    print(took)
""")


def edges(n: int) -> list[tuple[int, int, str]]:
    """The benchmark graph's edges ``(source, target, exchange)``."""
    out = [(i - 1, i, "PIPELINED" if i % 3 == 0 else "BLOCKING") for i in range(1, n)]
    out += [(i - 5, i, "BLOCKING") for i in range(5, n) if i % 5 == 0]
    return out


def noop(spark: Any, inputs: Any, context: Any) -> None:
    return None


def render(n: int) -> Any:
    """Declare and render the N-step graph; returns the DAG."""
    from airflow.sdk import DAG

    from airflow_region_failover import RegionJob

    with DAG(f"bench_{n}", schedule=None) as dag:
        job = RegionJob()
        for i in range(n):
            job.step(f"s{i}", noop)
        for source, target, exchange in edges(n):
            job.edge(f"s{source}", f"s{target}", exchange=exchange)
        job.render()
    return dag


def plain(n: int, groups: dict[str, list[str]]) -> Any:
    """The same tasks, groups and dependencies with EmptyOperator, built by hand."""
    from airflow.providers.standard.operators.empty import EmptyOperator
    from airflow.sdk import DAG, TaskGroup

    with DAG(f"plain_{n}", schedule=None) as dag:
        tasks = {}
        for gid, members in groups.items():
            with TaskGroup(gid, prefix_group_id=False, tooltip=gid):
                for task_id in members:
                    tasks[task_id] = EmptyOperator(task_id=task_id)
        for source, target, _ in edges(n):
            tasks[f"s{target}.0"].set_upstream(tasks[f"s{source}.0"])
    return dag


def best(fn: Callable[[], Any], repeat: int) -> tuple[float, Any]:
    """Best wall time of ``repeat`` calls, and the last result."""
    times, result = [], None
    for _ in range(repeat):
        gc.collect()
        start = time.perf_counter()
        result = fn()
        times.append(time.perf_counter() - start)
    return min(times), result


def parse_time(path: Path, repeat: int) -> float:
    """Best DagBag time of ``path`` in a fresh process."""
    runs = []
    for _ in range(repeat):
        done = subprocess.run([sys.executable, "-c", PARSE, str(path)], capture_output=True, text=True, check=True)
        runs.append(float(done.stdout.strip().splitlines()[-1]))
    return min(runs)


def measure(n: int, repeat: int, folder: Path, baseline: float) -> dict[str, Any]:
    """Every figure of one size."""
    from airflow.serialization.serialized_objects import DagSerialization

    rendered_s, dag = best(lambda: render(n), repeat)
    groups = {gid: sorted(g.children) for gid, g in dag.task_group_dict.items()}
    plain_s, _ = best(lambda: plain(n, groups), repeat)
    serialize_s, document = best(lambda: DagSerialization.to_dict(dag), repeat)
    path = folder / f"bench_render_{n}.py"
    path.write_text(DAG_FILE.format(n=n))
    parse_s = parse_time(path, repeat) - baseline
    return {"steps": n, "tasks": len(dag.tasks), "groups": len(groups), "render_s": rendered_s,
            "plain_s": plain_s, "ratio": rendered_s / plain_s, "serialize_s": serialize_s,
            "serialized_kb": len(json.dumps(document, default=str)) / 1024, "parse_s": parse_s,
            "per_step_ms": 1000 * rendered_s / n}


def warm_up() -> None:
    """Import and exercise every code path once, so the first size is not charged for imports."""
    from airflow.serialization.serialized_objects import DagSerialization

    dag = render(10)
    plain(10, {gid: sorted(g.children) for gid, g in dag.task_group_dict.items()})
    DagSerialization.to_dict(dag)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="100,1000,5000")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--quick", action="store_true", help="sizes 20,100 and one repetition (smoke test)")
    args = parser.parse_args()
    sizes = [20, 100] if args.quick else [int(s) for s in args.sizes.split(",")]
    repeat = 1 if args.quick else args.repeat
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        (folder / "baseline.py").write_text(BASELINE_FILE)
        baseline = parse_time(folder / "baseline.py", repeat)
        warm_up()
        rows = [measure(n, repeat, folder, baseline) for n in sizes]
    print("## Render and parse time\n")
    print(f"DagBag fixed cost (one EmptyOperator DAG file, excluded below): {baseline:.3f} s\n")
    print("| steps | tasks | groups | render s | plain Airflow s | render / plain | ms per step | serialize s "
          "| serialized KB | DAG-file parse s |")
    print("|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for r in rows:
        print(f"| {r['steps']} | {r['tasks']} | {r['groups']} | {r['render_s']:.3f} | {r['plain_s']:.3f} | "
              f"{r['ratio']:.2f} | {r['per_step_ms']:.2f} | {r['serialize_s']:.3f} | {r['serialized_kb']:.0f} | "
              f"{r['parse_s']:.3f} |")


if __name__ == "__main__":
    main()

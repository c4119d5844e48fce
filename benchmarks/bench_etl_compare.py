"""The example ETL at several sizes: region failover vs one Spark application vs plain Airflow, on one stack.

``python benchmarks/bench_etl_compare.py [--sizes tiny,1,5] [--repeat N] [--configs ours,app,plain,plain_store]
[--json FILE]``

One SeaweedFS, one Spark Connect server (``local[2]``) and one Airflow 3 (SQLite, LocalExecutor) are started once
and serve every run. Per size, three configurations of ``dags/tpch_etl.py`` (generators -> clean -> join ->
aggregate -> report), each run without failure and with one late failure (``aggregate`` fails on its first try):

* **ours**: a copy of the DAG file with ``CUSTOMERS``/``ORDERS`` replaced and dag id ``tpch_etl_<size>``
  (region failover, 12 step tasks); the failure is DAG param ``fail_once`` (``aggregate#0``'s first try).
* **app** = (a): the same functions as one Spark job in one Spark Connect session, run as one application
  process (``python bench_etl_compare.py _app ...``, what a spark-submit'd script would be); only the final report
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
  (a)'s failure (:data:`FAIL_AT_END`), so that all three lose the same progress.
* **plain_store** = (b) on the provider's store: the same DAG persisting through ``ResultStore.write`` and reading
  through ``ResultStore.read`` instead (the baseline before hadoop-aws was reachable; not in the default configs).

**Warm-up and order.** Before the measured runs, one run of every measured configuration, without failure, at a
fifth of the first size (``--warm-up``; none when the first size is ``tiny``, its own warm-up), not measured: the
stack's JVM compiles the hot loops of each configuration's Spark jobs at scale and (b) loads ``s3a://``, costs that
would otherwise fall on whichever configuration runs first (before 2026-11-29 that was ours in every round 1,
and ours' round 1 was 19-42 s slower than its round 2).
Round ``r`` runs the configurations in their order rotated by ``r`` (:func:`rotated`).

Figures per (size, config): wall time of a run without failure and its task-seconds (Airflow: the summed
duration of all task tries; app: the application process's lifetime), wall time with the failure. Sizes: ``tiny``
is the DAG's defaults (2,000 customers, 20,000 orders); a number is a target in GB of Parquet committed by ours'
no-failure run (every current manifest of the run), reached by scaling ``ORDERS`` (``CUSTOMERS`` = ORDERS / 10)
from the bytes per order measured at ``tiny`` (or ``--bytes-per-order``). The committed bytes of every run are
printed. Ratios ours / app and ours / plain, and the size at which ours' failure wall time overtakes each
baseline (linear interpolation between measured sizes, or a linear fit beyond them), close the output. ``--json``:
every run with its tries' timeline (queued, started, ended, from the trigger) and ours' step tasks' own phases.
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import re
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from datetime import datetime
from pathlib import Path
from typing import Any

import _repo_path  # noqa: F401 - puts the repository root on sys.path
from _etl_stack import Salts, add_stack_arguments, parse_sizes, run_on, size_of, stack_from, write_json

ROOT = Path(__file__).resolve().parents[1]
ETL = ROOT / "dags" / "tpch_etl.py"
PLAIN_TEMPLATE = Path(__file__).resolve().parent / "etl_plain_airflow.py"
PLAIN = {"plain": ("etl_plain", "s3a"), "plain_store": ("etl_plain_store", "store")}
"""The (b) configurations: dag id prefix and the template's ``PERSIST``."""
CONFIGS = ("ours", "app", *PLAIN)
DEFAULT_CONFIGS = ("ours", "app", "plain")
TIMELINE_MARK = "app timeline: "
S3_ENV = "BENCH_ETL_COMPARE_S3"  # the app process's store endpoint and credentials (JSON), never printed


# -- the DAG files ------------------------------------------------------------------------------------------------
FAIL_AT_START = """    if context.params.get("fail_once") and context.index == 0 and context.try_number == 1:
        raise RuntimeError("injected failure: DAG param fail_once=true fails aggregate#0 on its first try")
    return aggregate(inputs["join"])
"""
FAIL_AT_END = """    out = aggregate(inputs["join"])
    if context.params.get("fail_once") and context.index == 0 and context.try_number == 1:
        from pyspark.sql import functions as F
        from pyspark.sql.types import IntegerType

        def boom(year: int) -> int:
            raise RuntimeError("injected failure: aggregate#0's job fails at its end on its first try")

        out = out.withColumn("year", F.udf(boom, IntegerType()).asNondeterministic()(F.col("year")))
    return out
"""
"""``--fail-at end``: ``aggregate#0`` fails as (a) does, by a UDF on its output, i.e. after its aggregation ran."""


def ours_variant(target: Path, label: str, orders: int, customers: int, prefix: str = "tpch_etl",
                 attempts: int | None = None, fail_at: str = "start") -> str:
    """Copy of the example ETL sized to ``orders``/``customers`` under dag id ``<prefix>_<label>`` (``attempts``:
    its fixed-delay restart strategy's attempts instead of the example's; ``fail_at="end"``: the injected failure
    fires at the end of ``aggregate#0``'s job, :data:`FAIL_AT_END`, instead of as it starts)."""
    text = ETL.read_text()
    if fail_at == "end":
        if text.count(FAIL_AT_START) != 1:
            raise SystemExit("dags/tpch_etl.py changed its step_aggregate: cannot move its injected failure")
        text = text.replace(FAIL_AT_START, FAIL_AT_END)
    dag_id = f"{prefix}_{label}"
    changed, sized = re.subn(r"^CUSTOMERS, ORDERS, LINES_PER_ORDER = [^,\n]+, [^,\n]+, (\S+)$",
                             rf"CUSTOMERS, ORDERS, LINES_PER_ORDER = {customers}, {orders}, \1", text, flags=re.M)
    changed = changed.replace('dag_id="tpch_etl"', f'dag_id="{dag_id}"')
    if attempts is not None:
        changed, retried = re.subn(r'"restart-strategy\.fixed-delay\.attempts": "\d+"',
                                   f'"restart-strategy.fixed-delay.attempts": "{attempts}"', changed)
        sized *= retried
    if sized != 1 or changed.count(dag_id) != 1:
        raise SystemExit("dags/tpch_etl.py changed shape: cannot derive a sized copy")
    (target / f"{dag_id}.py").write_text(changed)
    return dag_id


def plain_variant(target: Path, label: str, orders: int, customers: int, config: str = "plain",
                  fail_at: str = "start") -> str:
    """Copy of ``etl_plain_airflow.py`` sized to ``orders``/``customers`` under dag id ``<prefix>_<label>``,
    persisting as :data:`PLAIN` says for ``config``, its injected failure at ``fail_at``."""
    prefix, persist = PLAIN[config]
    dag_id = f"{prefix}_{label}"
    values = {"DAG_ID": repr(dag_id), "ETL_SOURCE": repr(str(ETL)), "ORDERS": str(orders),
              "CUSTOMERS": str(customers), "PERSIST": repr(persist), "FAIL_AT": repr(fail_at)}
    text = PLAIN_TEMPLATE.read_text()
    for name, value in values.items():
        text, count = re.subn(rf"^{name} = .*$", f"{name} = {value}", text, count=1, flags=re.M)
        if count != 1:
            raise SystemExit(f"{PLAIN_TEMPLATE.name} lost its {name} line")
    (target / f"{dag_id}.py").write_text(text)
    return dag_id


def etl_functions(source: str, orders: int, customers: int) -> dict[str, Any]:
    """The module namespace of ``source`` above its DAG block, without its Airflow imports, sized to ``orders``
    (the same loader as ``etl_plain_airflow.py``; the functions read ``ORDERS``/``CUSTOMERS`` at call time)."""
    head = Path(source).read_text().split("\nwith DAG(", 1)[0]
    head = re.sub(r"^from airflow\S* import [^\n]*$", "", head, flags=re.M)
    namespace: dict[str, Any] = {"__name__": "tpch_etl_functions"}
    exec(compile(head, source, "exec"), namespace)  # the repository's own DAG code
    namespace.update(ORDERS=orders, CUSTOMERS=customers)
    return namespace


# -- (a): one Spark application -----------------------------------------------------------------------------------
def app_main(argv: list[str]) -> int:
    """One attempt of the whole pipeline as one Spark job; exit status 1 when the injected failure fired."""
    parser = argparse.ArgumentParser(prog="bench_etl_compare.py _app")
    for name in ("--url", "--dag-id", "--run-id"):
        parser.add_argument(name, required=True)
    parser.add_argument("--orders", type=int, required=True)
    parser.add_argument("--customers", type=int, required=True)
    parser.add_argument("--attempt", type=int, default=1)
    parser.add_argument("--salt", type=int, default=0)
    parser.add_argument("--fail", action="store_true")
    args = parser.parse_args(argv)
    from airflow_region_failover import timeline

    with timeline.measured() as clock:  # the same phases a step task records (bench_breakdown.py compares them)
        return _app_attempt(args, clock)


def _app_attempt(args: argparse.Namespace, clock: Any) -> int:
    """:func:`app_main` inside its clock."""
    from airflow_region_failover import timeline

    with timeline.phase("imports"):
        from pyspark.sql import SparkSession
        from pyspark.sql import functions as F
        from pyspark.sql.types import IntegerType

        from airflow_region_failover.graph.ids import PartitionId
        from airflow_region_failover.store.facade import ResultStore

    etl = etl_functions(str(ETL), args.orders, args.customers)
    s3 = json.loads(os.environ[S3_ENV])
    store = ResultStore.from_endpoint(s3["endpoint_url"], s3["access_key"], s3["secret_key"], s3["bucket"])
    with timeline.phase("session"):
        spark = SparkSession.builder.remote(args.url).getOrCreate()
    try:
        with timeline.phase("define"):
            joined = etl["join"](etl["customers"](spark, 0, args.customers, args.salt),
                                 etl["clean_orders"](etl["orders"](spark, 0, args.orders, args.salt)),
                                 etl["clean_lineitems"](etl["lineitems"](spark, 0, args.orders, args.salt)))
            aggregated = etl["aggregate"](etl["local_aggregate"](joined))
        if args.fail:
            def boom(year: int) -> int:
                raise RuntimeError("injected failure: the aggregate stage fails on the first attempt")

            fail = F.udf(boom, IntegerType()).asNondeterministic()
            aggregated = aggregated.withColumn("year", fail(F.col("year")))
        try:
            with timeline.phase("write"):
                store.write(etl["report"](aggregated), args.dag_id, args.run_id, PartitionId("report", 0),
                            args.attempt)
        except Exception as exc:  # the injected failure arrives wrapped in Spark's error
            if args.fail and "injected failure" in str(exc):
                print("injected failure fired", file=sys.stderr)
                return 1
            raise
    finally:
        spark.stop()
    print(TIMELINE_MARK + json.dumps(clock.timeline().to_json()), flush=True)
    return 0


def _app_command(spark_url: str, dag_id: str, run_id: str, orders: int, customers: int, attempt: int, salt: int,
                 fail: bool) -> list[str]:
    """The command line of one (a) attempt."""
    return [sys.executable, str(Path(__file__).resolve()), "_app", "--url", spark_url, "--dag-id", dag_id,
            "--run-id", run_id, "--orders", str(orders), "--customers", str(customers), "--attempt", str(attempt),
            "--salt", str(salt)] + (["--fail"] if fail else [])


def run_app(spark_url: str, s3_env: str, label: str, orders: int, customers: int, fail: bool,
            procs: list[subprocess.Popen[bytes]], salt: int = 0,
            watch: Callable[[int], None] | None = None) -> dict[str, Any]:
    """Run (a) once: with ``fail``, attempt 1 fails late and attempt 2 reruns everything after 1 s; ``watch`` is
    called with each attempt's process id. The result has the last attempt's ``timeline`` and its end."""
    dag_id, run_id = f"etl_one_app_{label}", f"app_{int(time.time() * 1000)}"
    t0, busy, attempt = time.time(), 0.0, 1
    while True:
        cmd = _app_command(spark_url, dag_id, run_id, orders, customers, attempt, salt, fail and attempt == 1)
        started = time.time()
        proc = subprocess.Popen(cmd, env={**os.environ, S3_ENV: s3_env}, stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE)
        procs.append(proc)
        if watch is not None:
            watch(proc.pid)
        out, err = proc.communicate()
        procs.remove(proc)
        busy += time.time() - started
        if proc.returncode == 0:
            marked = [line for line in out.decode(errors="replace").splitlines() if line.startswith(TIMELINE_MARK)]
            timeline = json.loads(marked[-1][len(TIMELINE_MARK):]) if marked else None
            break
        if not (fail and attempt == 1 and b"injected failure fired" in err):
            raise SystemExit(f"app attempt {attempt} failed:\n{err.decode(errors='replace')[-3000:]}")
        attempt += 1
        time.sleep(1.0)
    return {"wall_s": time.time() - t0, "task_s": busy, "tries": attempt, "dag_id": dag_id, "run_id": run_id,
            "timeline": timeline, "ended": time.time()}


# -- Airflow runs -------------------------------------------------------------------------------------------------
def _ts(value: str | None) -> float | None:
    return datetime.fromisoformat(value.replace("Z", "+00:00")).timestamp() if value else None


def run_airflow(api: Any, dag_id: str, fail: bool, timeout: float, salt: int = 0) -> dict[str, Any]:
    """Trigger ``dag_id`` once (DAG params ``fail_once`` and ``salt``) and return its wall time, task-seconds and
    tries, and a ``timeline`` of every try (queued, started, ended: seconds from the trigger)."""
    t0 = time.time()
    run_id = api.trigger(dag_id, {"fail_once": fail, "salt": salt})
    state = api.final_state(dag_id, run_id, timeout=timeout)
    wall = time.time() - t0
    if state != "success":
        raise SystemExit(f"{dag_id} run {run_id} ended {state}")
    task_s, timeline = 0.0, []
    for ti in api.task_instances(dag_id, run_id):
        page = api.get(f"/dags/{dag_id}/dagRuns/{run_id}/taskInstances/{ti['task_id']}/tries")
        for attempt in page["task_instances"]:
            start, end = _ts(attempt.get("start_date")), _ts(attempt.get("end_date"))
            if start and end:
                task_s += end - start
                queued = _ts(attempt.get("queued_when"))
                timeline.append({"task_id": ti["task_id"], "try": attempt.get("try_number"),
                                 "state": attempt.get("state"), "queued": queued and queued - t0,
                                 "started": start - t0, "ended": end - t0})
    timeline.sort(key=lambda t: t["started"])
    return {"wall_s": wall, "task_s": task_s, "tries": len(timeline), "dag_id": dag_id, "run_id": run_id,
            "timeline": timeline}


def step_timelines(api: Any, dag_id: str, run_id: str) -> dict[str, Any]:
    """Each step task's last try's own phases (its summary's ``timeline``, as ``bench_breakdown.py`` reads it)."""
    from bench_breakdown import tasks_of  # imports this module

    return {t.task_id: t.timeline.to_json() for t in tasks_of(api, dag_id, run_id).values() if t.timeline}


def warm_up_each(api: Any, stack: Any, procs: list[subprocess.Popen[bytes]], size: dict[str, Any],
                 configs: tuple[str, ...], salts: Salts) -> None:
    """One run of every measured configuration at ``size``, not measured (module rule: warm-up and order). The stack's
    JVM compiles the code each configuration's Spark jobs run at scale (the generators, the joins' sorts and
    aggregations, each writer), and (b)'s first ``s3a://`` write loads its filesystem; a configuration run first in a
    round would otherwise carry those costs."""
    started = time.time()
    for config in configs:
        if config == "app":
            run_app(stack.spark_url, stack.s3_env, size["label"], size["orders"], size["customers"], False, procs,
                    salts.next())
        else:
            api.wait_for_dag(size["dag_ids"][config], timeout=300)
            run_airflow(api, size["dag_ids"][config], False, 7200.0, salts.next())
    print(f"warm-up ({', '.join(configs)} at {size['label']}, not measured): {time.time() - started:.1f} s",
          flush=True)


def rotated(configs: tuple[str, ...], round_number: int) -> tuple[str, ...]:
    """The order of the configurations in round ``round_number`` (0-based): rotated by one each round, so that no
    configuration always runs right after the same one or always first."""
    turn = round_number % len(configs)
    return configs[turn:] + configs[:turn]


def warm_up(api: Any, stack: Any, procs: list[subprocess.Popen[bytes]], dag_id: str, size: dict[str, Any],
            salts: Salts) -> None:
    """One run of ours (``dag_id``) and one of (a) at ``size`` (``tiny``), not measured: a fresh stack's first
    tasks and first Spark jobs pay one-off costs (the JVM's just-in-time compilation, the first DAG parse) that no
    measured run of either configuration may carry."""
    api.wait_for_dag(dag_id, timeout=300)
    started = time.time()
    run_airflow(api, dag_id, False, 7200.0, salts.next())
    run_app(stack.spark_url, stack.s3_env, size["label"], size["orders"], size["customers"], False, procs,
            salts.next())
    print(f"warm-up (ours and (a) at {size['label']}, not measured): {time.time() - started:.1f} s", flush=True)


# -- the store ----------------------------------------------------------------------------------------------------
def committed_bytes(store: Any, dag_id: str, run_id: str) -> tuple[int, dict[str, int]]:
    """Bytes of every current manifest of the run (total and per result), plus the Parquet files the ``"s3a"``
    variant of (b) wrote through ``s3a://`` (per step, under ``s3a:<step>``)."""
    from etl_plain_airflow import s3a_url  # the (b) template's own layout (importing it builds its DAG object)

    keys = store.run_keys(dag_id, run_id)
    per_result: dict[str, int] = {}
    s3a_dir = s3a_url(store.config.bucket, dag_id, run_id, "").split("/", 3)[3]
    for page in store.objects.client.get_paginator("list_objects_v2").paginate(Bucket=store.config.bucket,
                                                                                 Prefix=s3a_dir):
        for item in page.get("Contents", []):  # beside the store's layout: its own client, no layout check
            step = item["Key"][len(s3a_dir):].split("/", 1)[0]
            if item["Key"].endswith(".parquet"):
                per_result[f"s3a:{step}"] = per_result.get(f"s3a:{step}", 0) + int(item["Size"])
    for prefix in store.objects.list_dirs(keys.run_prefix):
        part = prefix[len(keys.run_prefix):].rstrip("/")
        if part.startswith("_"):
            continue
        result = part.replace(".to.", "->")  # inverse of graph.ids.key_part
        for partition in store.partitions(dag_id, run_id, result):
            per_result[result] = per_result.get(result, 0) + store.manifest(dag_id, run_id, partition).total_bytes
    return sum(per_result.values()), per_result


def report_rows(store: Any, dag_id: str, run_id: str) -> list[tuple[Any, ...]]:
    """The committed report (partition ``report#0``) as sorted rows, for the cross-check."""
    from airflow_region_failover.graph.ids import PartitionId

    table = store.read_arrow(dag_id, run_id, PartitionId("report", 0))
    cols = ["c_mktsegment", "year", "revenue", "orders", "customers"]
    return sorted(zip(*(table.column(c).to_pylist() for c in cols), strict=True))


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
    names = {"ours": "ours (region failover)", "app": "(a) one Spark application",
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
        for size in sizes:
            label, orders, customers = size["label"], size["orders"], size["customers"]
            dag_ids = size["dag_ids"]
            for config in ("ours", *PLAIN):
                if config in configs:
                    api.wait_for_dag(dag_ids[config], timeout=300)
            print(f"== size {label}: {orders:,} orders, {customers:,} customers", flush=True)
            for round_number in range(args.repeat):
                for fail in failures:
                    for config in rotated(configs, round_number):
                        salt = salts.next()
                        if config == "app":
                            run = run_app(stack.spark_url, stack.s3_env, label, orders, customers, fail, procs,
                                          salt)
                        else:
                            run = run_airflow(api, dag_ids[config], fail, args.timeout, salt)
                        run["committed_bytes"], per_result = committed_bytes(stack.store, run["dag_id"],
                                                                             run["run_id"])
                        if config == "ours":  # each step task's own phases (its summary's timeline), for --json
                            run["steps"] = step_timelines(api, run["dag_id"], run["run_id"])
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
    if "ours" in configs:
        for baseline in (c for c in configs if c != "ours"):
            print(crossover(sizes, results, baseline))
    return 0


def warm_up_size(wanted: str, first: dict[str, Any], bytes_per_order: float) -> dict[str, Any] | None:
    """The warm-up's size (``--warm-up``): ``auto`` is a fifth of the first measured size's orders (enough rows for
    the JVM to compile every hot loop), none when the first size is ``tiny`` (its own warm-up)."""
    if wanted == "none" or (wanted == "auto" and first["label"] == "tiny"):
        return None
    if wanted == "auto":
        orders = max(first["orders"] // 5000 * 1000, 1000)
        return {"label": "warm", "orders": orders, "customers": max(orders // 10, 1)}
    return {**size_of(wanted, bytes_per_order), "label": "warm"}


# -- main ---------------------------------------------------------------------------------------------------------
def main(argv: list[str] | None = None) -> int:
    """Start the stack once, run every (size, config, failure) combination, print the table."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", type=parse_sizes, default=["tiny", "1", "5"],
                        help="comma-separated: 'tiny' (the DAG's defaults) or a target in GB committed (default "
                             "tiny,1,5)")
    parser.add_argument("--configs", default=",".join(DEFAULT_CONFIGS),
                        help=f"subset of {','.join(CONFIGS)} (default {','.join(DEFAULT_CONFIGS)})")
    parser.add_argument("--repeat", type=int, default=1, help="runs per (size, config, failure) (default 1)")
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
                             "'none', or 'auto' (default: a fifth of the first size; none when that is tiny)")
    parser.add_argument("--json", help="write every run (with its tries' timeline: queued, started, ended) to this "
                                       "file")
    add_stack_arguments(parser)
    parser.add_argument("--timeout", type=float, default=7200.0, help="per run, seconds")
    args = parser.parse_args(argv)
    configs = tuple(c for c in CONFIGS if c in args.configs.split(","))
    stack, procs = stack_from(args), []
    sizes = [size_of(wanted, args.bytes_per_order) for wanted in args.sizes]
    for size in sizes:  # every DAG file is written before Airflow starts
        size["dag_ids"] = {"ours": ours_variant(stack.dags, size["label"], size["orders"], size["customers"],
                                                fail_at=args.fail_at),
                           **{c: plain_variant(stack.dags, size["label"], size["orders"], size["customers"], c,
                                               args.fail_at) for c in PLAIN}}
    warm = warm_up_size(args.warm_up, sizes[0], args.bytes_per_order)
    if warm is not None:
        warm["dag_ids"] = {"ours": ours_variant(stack.dags, "warm", warm["orders"], warm["customers"]),
                           **{c: plain_variant(stack.dags, "warm", warm["orders"], warm["customers"], c)
                              for c in PLAIN}}
    return run_on(stack, lambda: measure(args, stack, procs, sizes, configs, warm), procs)


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "_app":
        sys.exit(app_main(sys.argv[2:]))
    sys.exit(main())

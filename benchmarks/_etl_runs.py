"""How each configuration of ``bench_etl_compare.py`` runs the example ETL, shared by the ETL benchmarks: ours' and
(b)'s DAG files (copies of ``dags/tpch_etl.py`` and ``etl_plain_airflow.py`` sized and with their injected failure
placed), (a)'s application process (``python _etl_runs.py _app ...``: the same functions as one Spark job), one
run of each, each step task's own phases, and the warm-up runs.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import time
from collections.abc import Callable
from datetime import datetime
from pathlib import Path
from typing import Any

import _repo_path  # noqa: F401 - puts the repository root on sys.path
from _etl_stack import Salts, size_of
from airflow_region_failover.store.keys import AttemptId
from airflow_region_failover.timeline import Timeline

ROOT = Path(__file__).resolve().parents[1]
ETL = ROOT / "dags" / "tpch_etl.py"
PLAIN_TEMPLATE = Path(__file__).resolve().parent / "etl_plain_airflow.py"
PLAIN = {"plain": ("etl_plain", "s3a"), "plain_store": ("etl_plain_store", "store")}
"""The (b) configurations: dag id prefix and the template's ``PERSIST``."""
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


FUSED_PLANS = {
    "fused": ("gen_customer->join", "clean_orders->join", "clean_lineitem->join", "join->aggregate",
              "aggregate->report"),
    "mixed": ("gen_customer->join", "clean_orders->join", "clean_lineitem->join"),
}
"""Per AUTO configuration, the results its plan fuses: ``fused`` every one (the whole ETL one region, one task),
``mixed`` the generators' into the join (one task up to the join; its 66 MB output and the aggregate's committed,
Mantri's rule: persist what is cheap to copy and dear to recompute)."""


def auto_variant(target: Path, label: str, orders: int, customers: int, config: str, fail_at: str = "start") -> str:
    """:func:`ours_variant` with every BLOCKING edge of the ETL declared AUTO and rendered under the plan of
    :data:`FUSED_PLANS` ``config``, under dag id ``tpch_etl_<config>_<label>``."""
    dag_id = ours_variant(target, label, orders, customers, prefix=f"tpch_etl_{config}", fail_at=fail_at)
    path = target / f"{dag_id}.py"
    text, edges = re.subn(r'exchange="BLOCKING"', 'exchange="AUTO"', path.read_text())
    fused = ", ".join(f'"{r}": Choice.FUSED' for r in FUSED_PLANS[config])
    text, rendered = re.subn(r"^    job\.render\(\)$", "    from airflow_region_failover.graph.auto import Choice, "
                             f"ExchangePlan\n\n    job.render(plan=ExchangePlan({{{fused}}}))", text, flags=re.M)
    if edges != len(FUSED_PLANS["fused"]) or rendered != 1:
        raise SystemExit("dags/tpch_etl.py changed shape: cannot derive its AUTO copy")
    path.write_text(text)
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
    parser = argparse.ArgumentParser(prog="_etl_runs.py _app")
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
        from airflow_region_failover.store.result_store import ResultStore

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
                store.write(etl["report"](aggregated), AttemptId(args.dag_id, args.run_id, PartitionId("report", 0),
                                                                 args.attempt))
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


def step_timeline(api: Any, dag_id: str, run_id: str, task_id: str) -> Timeline | None:
    """A step task's last try's own phases (its summary's ``timeline``); ``None``: not a step task."""
    try:
        value = api.get(f"/dags/{dag_id}/dagRuns/{run_id}/taskInstances/{task_id}/xcomEntries/return_value")["value"]
    except Exception:  # no return value: not a step task
        return None
    body = json.loads(value) if isinstance(value, str) else value
    line = body.get("timeline") if isinstance(body, dict) else None
    return Timeline.from_json(line) if line else None


def step_timelines(api: Any, run: dict[str, Any]) -> dict[str, Any]:
    """The own phases of each step task of ``run`` (a :func:`run_airflow` result), as JSON."""
    found = {t: step_timeline(api, run["dag_id"], run["run_id"], t) for t in {a["task_id"] for a in run["timeline"]}}
    return {task_id: line.to_json() for task_id, line in sorted(found.items()) if line is not None}


def warm_up_each(api: Any, stack: Any, procs: list[subprocess.Popen[bytes]], size: dict[str, Any],
                 configs: tuple[str, ...], salts: Salts) -> None:
    """One run of every configuration of ``configs`` at ``size`` (its ``dag_ids`` per Airflow configuration), not
    measured: the stack's JVM compiles the code each configuration's Spark jobs run (the generators, the joins' sorts
    and aggregations, each writer), (b)'s first ``s3a://`` write loads its filesystem, a fresh stack's first tasks
    parse their DAG."""
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


def warm_up_size(wanted: str, first: dict[str, Any], bytes_per_order: float) -> dict[str, Any] | None:
    """The warm-up's size (``--warm-up``): ``auto`` is the first measured size (the shared JVM reaches its steady
    state only at full scale: ``bench_etl_compare.py``'s module rule), none when that is ``tiny`` (its own warm-up)."""
    if wanted == "none" or (wanted == "auto" and first["label"] == "tiny"):
        return None
    if wanted == "auto":
        return {**first, "label": "warm"}
    return {**size_of(wanted, bytes_per_order), "label": "warm"}


def warm_up(api: Any, stack: Any, procs: list[subprocess.Popen[bytes]], dag_id: str, size: dict[str, Any],
            salts: Salts) -> None:
    """:func:`warm_up_each` of ours (``dag_id``) and (a) at ``size``: a fresh stack's first tasks and first Spark jobs
    pay one-off costs that no measured run of either configuration may carry (all of them only at full scale:
    :func:`warm_up_size`)."""
    warm_up_each(api, stack, procs, {**size, "dag_ids": {"ours": dag_id}}, ("ours", "app"), salts)


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "_app":
        sys.exit(app_main(sys.argv[2:]))
    sys.exit("usage: python _etl_runs.py _app ... (started by run_app)")

"""The example ETL's fused region against one Spark application, in one embedded Spark session and without Airflow:
a quick loop for taking the fused region's cost apart (issue 47).

Per configuration and run: wall seconds, and per Spark job and stage what Spark's own REST API says (task time,
CPU time, GC, shuffle and cache bytes); per SQL execution its operators' time metrics summed by operator (the
physical work: ``Range``, ``InMemoryTableScan``, ``Exchange``, ``Sort``, ``HashAggregate``...).

* ``fused``: :func:`~airflow_region_failover.spark.fused.run_fused` on the whole ETL fused into one task (the
  ``fused`` plan of ``_etl_runs.FUSED_PLANS``), as the Airflow task runs it (a stand-in task instance: no XComs);
  the ETL's steps are declared ``rescalable``, so each runs as one subtask (``graph/rescaling.py``);
* ``fused_split``: the same with no step declared ``rescalable``: every subtask called on its own share (its key
  groups of a keyed input), as before that declaration;
* ``app``: what ``_etl_runs._app_attempt`` runs — the same functions of ``dags/tpch_etl.py`` on the whole range,
  the report written through the same store.

Both run on the same session (``local[2]``, the ETL benchmarks' Spark conf: 8 shuffle partitions, no broadcast
joins, 4 GB driver) and one SeaweedFS; each run salted (``dags/tpch_etl.py``'s ``salt``) so no run finds another's
objects; the first run of each configuration is a warm-up and not reported. The reports of every run must agree.

    SPARK_LOCAL_IP=127.0.0.1 .venv/bin/python benchmarks/bench_fused_region.py --orders 500000 --repeat 2
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import sys
import tempfile
import time
import urllib.request
from collections import defaultdict
from pathlib import Path
from typing import Any

import _repo_path  # noqa: F401 - puts the repository root on sys.path
from _etl_runs import ETL, auto_variant, etl_functions

TIME_METRICS = ("duration", "time", "sort time", "shuffle write time", "fetch wait time", "scan time",
                "time in aggregation build", "time to build hash map", "time to broadcast", "data sent to driver")


class FakeTI:
    """What :func:`run_fused` asks of an Airflow task instance (no XComs in: every member's input is inside)."""

    def __init__(self, dag_id: str, run_id: str, task_id: str) -> None:
        self.dag_id, self.run_id, self.task_id, self.try_number = dag_id, run_id, task_id, 1
        self.pushed: dict[str, Any] = {}

    def xcom_pull(self, *, task_ids: str, key: str) -> Any:
        return None

    def xcom_push(self, *, key: str, value: Any) -> None:
        self.pushed[key] = value


def session(driver_memory: str, shuffle_partitions: int) -> Any:
    os.environ["PYSPARK_PYTHON"] = sys.executable
    from pyspark.sql import SparkSession

    from airflow_region_failover.store.dataplane.s3a import with_jars

    builder = (SparkSession.builder.master("local[2]").config("spark.driver.memory", driver_memory)
               .config("spark.ui.enabled", "true").config("spark.ui.port", "4077")
               .config("spark.sql.shuffle.partitions", str(shuffle_partitions))
               .config("spark.sql.autoBroadcastJoinThreshold", "-1")
               .config("spark.ui.retainedJobs", "10000").config("spark.ui.retainedStages", "10000")
               .config("spark.sql.ui.retainedExecutions", "10000"))
    for key, value in with_jars({}).items():
        builder = builder.config(key, value)
    return builder.getOrCreate()


class Rest:
    """Spark's monitoring REST API of the session's UI."""

    def __init__(self, spark: Any) -> None:
        self.base = spark.sparkContext.uiWebUrl + "/api/v1/applications/" + spark.sparkContext.applicationId

    def get(self, path: str) -> Any:
        with urllib.request.urlopen(self.base + path, timeout=30) as answer:
            return json.loads(answer.read())

    def compiled(self) -> tuple[int, float]:
        """Classes Spark's code generator compiled so far and their compile milliseconds (its metrics)."""
        url = self.base.split("/api/v1/")[0] + "/metrics/json/"
        with urllib.request.urlopen(url, timeout=30) as answer:
            found = json.loads(answer.read())
        for name, h in found.get("histograms", {}).items():
            if name.endswith("CodeGenerator.compilationTime"):
                return int(h["count"]), float(h["mean"]) * int(h["count"])
        return 0, 0.0

    def marks(self) -> tuple[int, int]:
        jobs, sql = self.get("/jobs"), self.get("/sql?length=100000")
        return (max((j["jobId"] for j in jobs), default=-1), max((e["id"] for e in sql), default=-1))


def breakdown(rest: Rest, mark: tuple[int, int]) -> dict[str, Any]:
    """Jobs, stages and SQL operator time since ``mark``."""
    time.sleep(1.0)  # the listener bus catches up
    jobs = [j for j in rest.get("/jobs") if j["jobId"] > mark[0]]
    stage_ids = {s for j in jobs for s in j["stageIds"]}
    stages = []
    for s in rest.get("/stages"):
        if s["stageId"] in stage_ids and s["status"] == "COMPLETE":
            stages.append({k: s.get(k) for k in (
                "stageId", "name", "numTasks", "executorRunTime", "executorCpuTime", "jvmGcTime", "inputBytes",
                "shuffleReadBytes", "shuffleWriteBytes", "shuffleWriteRecords", "memoryBytesSpilled",
                "diskBytesSpilled", "submissionTime", "completionTime", "shuffleFetchWaitTime", "shuffleWriteTime",
                "executorDeserializeTime", "peakExecutionMemory", "shuffleLocalBytesRead", "shuffleRemoteBytesRead")})
    operators: dict[str, float] = defaultdict(float)
    for e in rest.get("/sql?details=true&planDescription=false&length=100000"):
        if e["id"] <= mark[1]:
            continue
        for node in e.get("nodes", []):
            for metric in node.get("metrics", []):
                if metric["name"] in TIME_METRICS and "total" in metric["value"]:
                    operators[f"{node['nodeName']}: {metric['name']}"] += _seconds(metric["value"])
    return {"jobs": [{"jobId": j["jobId"], "name": j["name"], "stages": j["stageIds"],
                      "submitted": j.get("submissionTime"), "completed": j.get("completionTime")} for j in jobs],
            "stages": stages, "operators": dict(sorted(operators.items(), key=lambda kv: -kv[1]))}


def _seconds(value: str) -> float:
    """The total of a Spark SQL timing metric ("total (min, med, max (stageId: taskId))\\n5.2 s (...)")."""
    text = value.split("\n", 1)[-1].split("(", 1)[0].strip()
    number, unit = text.split(" ", 1) if " " in text else (text, "ms")
    scale = {"ms": 1e-3, "s": 1.0, "m": 60.0, "h": 3600.0}.get(unit.strip(), 1e-3)
    return float(number.replace(",", "")) * scale


def fused_runtime(work: Path, label: str, orders: int, customers: int, split: bool = False) -> tuple[Any, str]:
    """The runtime of the ETL's ``fused`` AUTO copy sized to ``orders`` and its one task id; ``split``: no step
    declared ``rescalable``."""
    from airflow_region_failover.operators.step import RegionStepOperator

    dag_id = auto_variant(work, f"{label}split" if split else label, orders, customers, "fused")
    if split:
        path = work / f"{dag_id}.py"
        text = path.read_text()
        if ", rescalable=True" not in text:
            raise SystemExit("dags/tpch_etl.py declares no step rescalable: fused_split would be fused")
        path.write_text(text.replace(", rescalable=True", ""))
    spec = importlib.util.spec_from_file_location(dag_id, work / f"{dag_id}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    ops = [t for t in module.dag.tasks if isinstance(t, RegionStepOperator)]
    fused = [op for op in ops if op.runtime.spec.names.is_fused(op.task_id)]
    if len(fused) != 1:
        raise SystemExit(f"expected one fused task, found {[op.task_id for op in ops]}")
    return fused[0].runtime, fused[0].task_id


def run_fused_once(spark: Any, store: Any, runtime: Any, task_id: str, salt: int) -> list[Any]:
    from airflow_region_failover.spark import fused as fused_module
    from airflow_region_failover.spark.store_io import StoreIO

    fused_module.open_store_io = lambda: StoreIO(store)  # type: ignore[assignment]
    fused_module.get_session = lambda target: spark  # type: ignore[assignment]
    members = runtime.spec.names.subtasks(task_id)
    ti = FakeTI("fused_loop", f"fused_{salt}", task_id)
    from airflow_region_failover import timeline

    with timeline.measured() as clock:
        fused_module.run_fused(runtime, members, {"ti": ti, "params": {"salt": salt}})
    line = clock.timeline()
    names = sorted({s.name for s in line.spans})
    print("  fused phases: " + ", ".join(f"{n} {line.total(n):.2f} s" for n in names), flush=True)
    return read_report(spark, store, ti.dag_id, ti.run_id, "report")


def run_app_once(spark: Any, store: Any, etl: dict[str, Any], orders: int, customers: int, salt: int) -> list[Any]:
    from airflow_region_failover.graph.ids import PartitionId
    from airflow_region_failover.store.keys import AttemptId

    joined = etl["join"](etl["customers"](spark, 0, customers, salt),
                         etl["clean_orders"](etl["orders"](spark, 0, orders, salt)),
                         etl["clean_lineitems"](etl["lineitems"](spark, 0, orders, salt)))
    report = etl["report"](etl["aggregate"](etl["local_aggregate"](joined)))
    run_id = f"app_{salt}"
    store.write(report, AttemptId("app_loop", run_id, PartitionId("report", 0), 1))
    return read_report(spark, store, "app_loop", run_id, "report")


def read_report(spark: Any, store: Any, dag_id: str, run_id: str, result: str) -> list[Any]:
    from airflow_region_failover.graph.ids import PartitionId

    frame = store.read(spark, dag_id, run_id, PartitionId(result, 0))
    return sorted(tuple(r) for r in frame.collect())


def summarise(config: str, wall: float, found: dict[str, Any]) -> str:
    stages = found["stages"]
    run_s = sum(s["executorRunTime"] for s in stages) / 1e3
    cpu_s = sum(s["executorCpuTime"] for s in stages) / 1e9
    gc_s = sum(s["jvmGcTime"] for s in stages) / 1e3
    lines = [f"{config}: wall {wall:.1f} s, {len(found['jobs'])} jobs, {len(stages)} stages, task time {run_s:.1f} s, "
             f"task CPU {cpu_s:.1f} s, GC {gc_s:.1f} s, shuffle write "
             f"{sum(s['shuffleWriteBytes'] for s in stages) / 1e6:.0f} MB, spilled "
             f"{sum(s['memoryBytesSpilled'] for s in stages) / 1e6:.0f} MB"]
    for job in found["jobs"]:
        span = _span(job["submitted"], job["completed"])
        lines.append(f"  job {job['jobId']} {span:6.1f} s  {job['name'][:60]}")
    for s in sorted(stages, key=lambda s: -s["executorRunTime"])[:12]:
        lines.append(f"    stage {s['stageId']:4d} {s['numTasks']:3d} tasks  run {s['executorRunTime'] / 1e3:6.1f} s  "
                     f"cpu {s['executorCpuTime'] / 1e9:6.1f} s  shuffle w {s['shuffleWriteBytes'] / 1e6:6.0f} MB  "
                     f"r {s['shuffleReadBytes'] / 1e6:6.0f} MB  {s['name'][:40]}")
    for name, seconds in list(found["operators"].items())[:14]:
        lines.append(f"    {seconds:7.1f} s  {name}")
    return "\n".join(lines)


def _cpu() -> tuple[float, float]:
    """CPU seconds of this (Python) process and of its children (the session's JVM, PySpark's workers)."""
    import psutil

    me = psutil.Process()
    totals = [0.0, 0.0]
    for i, proc in enumerate([me, *me.children(recursive=True)]):
        try:
            times = proc.cpu_times()
        except psutil.NoSuchProcess:
            continue
        totals[min(i, 1)] += times.user + times.system
    return totals[0], totals[1]


def _span(start: str | None, end: str | None) -> float:
    from datetime import datetime

    if not start or not end:
        return 0.0
    parse = lambda t: datetime.strptime(t.replace("GMT", "+0000"), "%Y-%m-%dT%H:%M:%S.%f%z")  # noqa: E731
    return (parse(end) - parse(start)).total_seconds()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--orders", type=int, default=500_000)
    parser.add_argument("--repeat", type=int, default=2, help="measured runs per configuration (after a warm-up)")
    parser.add_argument("--warm-up-orders", type=int, default=0,
                        help="the warm-up runs' size (default: --orders); smaller compiles the same code sooner")
    parser.add_argument("--configs", default="fused,fused_split,app")
    parser.add_argument("--driver-memory", default="4g")
    parser.add_argument("--shuffle-partitions", type=int, default=8)
    parser.add_argument("--record", type=Path, help="write every run's breakdown here (JSON)")
    args = parser.parse_args()
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    from airflow_region_failover.standalone.seaweedfs import SeaweedFS
    from airflow_region_failover.store.result_store import ResultStore

    work = Path(tempfile.mkdtemp(prefix="bench-fused-"))
    sized = {}
    for label, orders in (("warm", args.warm_up_orders or args.orders), ("loop", args.orders)):
        customers = max(orders // 10, 1)
        sized[label] = (orders, customers, *fused_runtime(work, label, orders, customers),
                        etl_functions(str(ETL), orders, customers), fused_runtime(work, label, orders, customers, True))
    configs = [c.strip() for c in args.configs.split(",") if c.strip()]
    records: list[dict[str, Any]] = []
    reports: dict[str, list[Any]] = {}
    with SeaweedFS(bucket="region-failover", data_dir=work / "s3") as s3:
        e = s3.endpoint
        store = ResultStore.from_endpoint(e.endpoint_url, e.access_key, e.secret_key, e.bucket)
        spark = session(args.driver_memory, args.shuffle_partitions)
        rest = Rest(spark)
        salt = int(time.time()) % 1_000_000 * 16 + 1
        try:
            for round_number in range(args.repeat + 1):
                for config in configs if round_number % 2 == 0 else configs[::-1]:
                    salt += 1
                    orders, customers, runtime, task_id, etl, split = sized["warm" if round_number == 0 else "loop"]
                    mark = rest.marks()
                    cpu0, compiled0 = _cpu(), rest.compiled()
                    started = time.time()
                    if config == "fused":
                        report = run_fused_once(spark, store, runtime, task_id, salt)
                    elif config == "fused_split":
                        report = run_fused_once(spark, store, *split, salt)
                    else:
                        report = run_app_once(spark, store, etl, orders, customers, salt)
                    wall = time.time() - started
                    cpu1, compiled1 = _cpu(), rest.compiled()
                    compiled = (compiled1[0] - compiled0[0], (compiled1[1] - compiled0[1]) / 1e3)
                    python_cpu, jvm_cpu = cpu1[0] - cpu0[0], cpu1[1] - cpu0[1]
                    if round_number == 0:
                        print(f"warm-up {config}: {wall:.1f} s", flush=True)
                        continue
                    reports[f"{config}/{round_number}"] = report
                    found = breakdown(rest, mark)
                    print(summarise(config, wall, found) + f"\n  CPU: JVM {jvm_cpu:.1f} s, Python driver "
                          f"{python_cpu:.1f} s; compiled {compiled[0]} classes in {compiled[1]:.1f} s", flush=True)
                    records.append({"config": config, "round": round_number, "wall_s": wall, "jvm_cpu_s": jvm_cpu,
                                    "python_cpu_s": python_cpu, "compiled": compiled, **found})
        finally:
            spark.stop()
    distinct = {json.dumps(r, default=str) for r in reports.values()}
    print(f"orders {args.orders}: the reports of {len(reports)} runs {'agree' if len(distinct) == 1 else 'DIFFER'}")
    if args.record:
        args.record.write_text(json.dumps({"orders": args.orders, "runs": records}, indent=1, default=str))
    return 0 if len(distinct) == 1 else 1


if __name__ == "__main__":
    raise SystemExit(main())

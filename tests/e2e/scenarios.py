"""What the end-to-end scenarios share: the e2e DAG's expected output, and how a test reads tries, committed
attempts, decisions and restart reasons of a run, and whether its state stays (on either stack).

    a#0 -> b#0 ==+==> c#0 ==> d#0        rf_e2e_*: a -PIPELINED POINTWISE-> b -BLOCKING ALL_TO_ALL-> c
    a#1 -> b#1 ==+==> c#1 ==> d#1                  -BLOCKING POINTWISE-> d; plus an unconnected side#0

a -> b is chained: tasks ``a.b.0`` and ``a.b.1`` run a#i and b#i (a failure of either is a failure of that task).
"""

from __future__ import annotations

import runpy
from pathlib import Path
from typing import Any

from airflow_region_failover.graph.ids import PartitionId

E2E_DAG = runpy.run_path(str(Path(__file__).parent / "dags" / "rf_e2e.py"))


def _attempts(e2e: Any, dag_id: str, run_id: str, partitions: list[str]) -> dict[str, int]:
    return {p: e2e.store.manifest(dag_id, run_id, PartitionId.parse(p)).attempt for p in partitions}


def _d_output(e2e: Any, dag_id: str, run_id: str) -> dict[int, tuple[int, int]]:
    rows: dict[int, tuple[int, int]] = {}
    for index in (0, 1):
        table = e2e.store.read_arrow(e2e.store.manifest(dag_id, run_id, PartitionId("d", index))).to_pylist()
        rows.update({int(r["k"]): (int(r["total"]), int(r["n"])) for r in table})
    return rows


def _applied(doc: dict[str, Any]) -> list[dict[str, Any]]:
    return [d for d in doc["decisions"] if d["status"] == "applied"]


def _the_decision(e2e: Any, dag_id: str, run_id: str) -> dict[str, Any]:
    """The run's one applied decision (the whole run explained if there is not exactly one)."""
    applied = _applied(e2e.history(dag_id, run_id))
    assert len(applied) == 1, e2e.explain(dag_id, run_id)
    return applied[0]


def _check_tries(tries: dict[str, int], failed: set[str], restarted: set[str]) -> None:
    """Failed tasks ran twice; other restarted tasks at most twice (a consumer that never ran gets its first
    try); every task outside the restart set kept its single try."""
    assert all(tries[t] == 2 for t in failed), tries
    assert all(1 <= tries[t] <= 2 for t in restarted), tries
    assert all(n == 1 for t, n in tries.items() if t not in restarted | failed), tries


def _reasons(decision: dict[str, Any]) -> dict[str, str]:
    return {"+".join(r["subtasks"]): r["reason"] for r in decision["regions"]}


def _delete_partition(e2e: Any, dag_id: str, run_id: str, result: str, index: int) -> int:
    """Delete every object (manifests, data) of one committed partition behind the store's back."""
    keys = e2e.store.run_keys(dag_id, run_id)
    marker = f"/p{index:05d}/"
    doomed = [i.key for i in e2e.store.objects.listing(keys.result_prefix(result)) if marker in i.key]
    e2e.store.objects.delete(doomed)
    return len(doomed)


def _check_history_cli(e2e: Any, dag_id: str, run_id: str) -> None:
    """``region-failover history DAG_ID RUN_ID`` reads the same log with Airflow's configuration."""
    import subprocess
    import sys

    done = subprocess.run([sys.executable, "-m", "airflow_region_failover", "history", dag_id, run_id],
                          env=e2e.stack.env(), capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stderr[-2000:]
    assert "APPLIED" in done.stdout and "restarts: failed" in done.stdout and "restarts: consumer" in done.stdout


def expected_rows(dag_file: str, spark_connect: str) -> list[tuple[Any, ...]]:
    """What ``expected(spark)`` of e2e DAG file ``tests/e2e/dags/<dag_file>`` computes in one Spark job, sorted."""
    from pyspark.sql import SparkSession

    dag = runpy.run_path(str(Path(__file__).parent / "dags" / dag_file))
    spark = SparkSession.builder.remote(spark_connect).getOrCreate()
    try:
        return sorted(tuple(r) for r in dag["expected"](spark).collect())
    finally:
        spark.stop()


def _check_report(e2e: Any, run_id: str, spark_connect: str) -> None:
    from pyspark.sql import SparkSession

    etl = runpy.run_path(str(Path(__file__).parents[2] / "dags" / "tpch_etl.py"))
    spark = SparkSession.builder.remote(spark_connect).getOrCreate()
    try:
        expected = [tuple(r) for r in etl["expected_report"](spark).collect()]
    finally:
        spark.stop()  # else the client's threads retry against the server stopped at session end, delaying exit
    got = e2e.store.read_arrow(e2e.store.manifest("tpch_etl", run_id, PartitionId("report", 0))).to_pylist()
    assert [tuple(r.values()) for r in got] == expected


def _patch(e2e: Any, path: str, body: dict[str, Any]) -> Any:
    return e2e.api.call("PATCH", path, json=body).json()


def _post(e2e: Any, path: str, body: dict[str, Any]) -> Any:
    return e2e.api.call("POST", path, json=body).json()


def _values(e2e: Any, dag_id: str, run_id: str) -> list[int]:
    rows = [r for i in (0, 1) for r in e2e.store.read_arrow(e2e.store.manifest(dag_id, run_id, PartitionId("scale",
                                                                                                           i))).to_pylist()]
    return sorted(int(r["v"]) for r in rows)


def _reparse(e2e: Any, dag_id: str, timeout: float = 120.0) -> None:
    """Ask the dag-processor to parse the DAG's file now, and wait until it has."""
    before = e2e.api.get(f"/dags/{dag_id}/details")
    e2e.api.call("PUT", f"/parseDagFile/{before['file_token']}")
    e2e.wait_until(lambda: e2e.api.get(f"/dags/{dag_id}/details")["last_parsed_time"]
                   != before["last_parsed_time"], timeout, f"{dag_id} re-parsed")


def _wait_idle(e2e: Any, timeout: float = 900.0, but: tuple[str, ...] = ()) -> None:
    """Until no DAG run of the session is queued or running (but the runs whose ids are in ``but``)."""
    def idle() -> bool:
        runs = e2e.api.get("/dags/~/dagRuns", state=["queued", "running"])
        return all(run["dag_run_id"] in but for run in runs["dag_runs"])

    e2e.wait_until(idle, timeout, "no active DAG run")


def _one_clear_per_decision(e2e: Any, dag_id: str, run_id: str) -> int:
    """Each applied decision of the run is exactly one clear in the API's audit log, by the failover loop's own
    API user (two watchers never both clear one decision). Returns the number of decisions applied."""
    applied = _applied(e2e.history(dag_id, run_id))
    clears = e2e.api.get("/eventLogs", dag_id=dag_id, run_id=run_id, event="post_clear_task_instances",
                         owner=e2e.stack.api_user)["event_logs"]
    assert len(clears) == len(applied), (clears, e2e.explain(dag_id, run_id))
    return len(applied)


def _runs(e2e: Any, dag_id: str, run_type: str) -> list[dict[str, Any]]:
    """The DAG's runs of one type (``scheduled``, ``backfill``, ``manual``), oldest logical date first."""
    runs = e2e.api.get(f"/dags/{dag_id}/dagRuns", run_type=[run_type], order_by="logical_date")["dag_runs"]
    return list(runs)

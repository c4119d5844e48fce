"""CPU per pass of the scheduler's watcher against a metadata DB with a long history, side by side with the
probes as they were before they were bounded (a2a7072).

    .venv/bin/python benchmarks/bench_watcher.py            # 1,000 / 10,000 / 100,000 historical failed tasks
    .venv/bin/python benchmarks/bench_watcher.py --full     # also 2,000,000 (100 DAGs x 1,000 runs x 20)
    .venv/bin/python benchmarks/bench_watcher.py --quick    # smoke run: 1,000 and 10,000

Each size runs in a fresh process with its own AIRFLOW_HOME and SQLite metadata DB (Airflow's schema), holding
100 DAGs whose historical runs each have 20 failed step tasks, plus 5 runs at work now (one with a step task
that failed a few seconds ago, already recorded). A pass is :meth:`Watcher.tick` with the decision logs in memory
(no S3 latency is measured: the LIST of pending markers is one request whatever the history). Reported: the
median ``time.process_time`` of 30 passes, and the same for the pre-bounded probe queries (copied below).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from typing import Any

import _repo_path  # noqa: F401 - puts the repository root on sys.path

DAGS = 100
FAILED_PER_RUN = 20
ACTIVE_RUNS = 5
PASSES = 30


def _populate(failed_total: int) -> None:
    """Airflow's schema in the process's SQLite DB, with ``failed_total`` historical failed step tasks."""
    import uuid
    from datetime import datetime, timedelta, timezone

    import airflow.models as models
    from airflow import settings
    from airflow.models.base import Base
    from airflow.models.dagrun import DagRun
    from airflow.models.taskinstance import TaskInstance

    models.import_all_models()
    Base.metadata.create_all(settings.engine)
    runs_per_dag = max(1, failed_total // (DAGS * FAILED_PER_RUN))
    old = datetime.now(timezone.utc) - timedelta(days=30)
    now = datetime.now(timezone.utc)
    run_rows, ti_rows = [], []
    for d in range(DAGS):
        dag_id = f"dag_{d:03d}"
        for r in range(runs_per_dag):
            run_id = f"scheduled__{r:05d}"
            run_rows.append({"dag_id": dag_id, "run_id": run_id, "run_type": "scheduled", "state": "failed",
                             "end_date": old, "clear_number": 0, "run_after": old, "logical_date": None})
            ti_rows.extend({"id": uuid.uuid4(), "dag_id": dag_id, "run_id": run_id, "task_id": f"s{t}.0",
                            "map_index": -1, "state": "failed", "try_number": 1, "pool": "default_pool",
                            "operator": "RegionStepOperator", "end_date": old} for t in range(FAILED_PER_RUN))
    for a in range(ACTIVE_RUNS):
        dag_id, run_id = f"dag_{a:03d}", f"manual__active{a}"
        run_rows.append({"dag_id": dag_id, "run_id": run_id, "run_type": "manual", "state": "running",
                         "end_date": None, "clear_number": 0, "run_after": now, "logical_date": None})
        ti_rows.extend({"id": uuid.uuid4(), "dag_id": dag_id, "run_id": run_id, "task_id": f"s{t}.0",
                        "map_index": -1, "state": "failed" if (a, t) == (0, 0) else "running", "try_number": 1,
                        "pool": "default_pool", "operator": "RegionStepOperator", "end_date": now}
                       for t in range(4))
    with settings.engine.begin() as conn:
        conn.execute(DagRun.__table__.insert(), run_rows)
        for start in range(0, len(ti_rows), 50_000):
            conn.execute(TaskInstance.__table__.insert(), ti_rows[start:start + 50_000])


def _old_probes(since: float) -> None:
    """The watcher's per-pass DB queries before they were bounded (a2a7072: plugins/metadata_db.py, listener.py):
    every failed step task since the look-back floor, and every up_for_retry or ``none`` task of an ended run."""
    from datetime import datetime, timezone

    from airflow.models.dagrun import DagRun
    from airflow.models.taskinstance import TaskInstance
    from airflow.utils.session import create_session
    from airflow.utils.state import DagRunState, TaskInstanceState
    from sqlalchemy import and_, or_

    floor = datetime.fromtimestamp(since, tz=timezone.utc)
    with create_session() as session:
        session.query(TaskInstance.dag_id, TaskInstance.run_id, TaskInstance.task_id, TaskInstance.map_index,
                      TaskInstance.try_number, TaskInstance.end_date).filter(
            TaskInstance.state == TaskInstanceState.FAILED, TaskInstance.operator.in_(("RegionStepOperator",)),
            TaskInstance.end_date >= floor).all()
    ended = and_(TaskInstance.state.is_(None), DagRun.state.in_([DagRunState.FAILED, DagRunState.SUCCESS]),
                 DagRun.end_date >= floor)
    with create_session() as session:
        session.query(TaskInstance.dag_id, TaskInstance.run_id, TaskInstance.task_id, TaskInstance.try_number).join(
            DagRun, and_(DagRun.dag_id == TaskInstance.dag_id, DagRun.run_id == TaskInstance.run_id)).filter(
            TaskInstance.operator.in_(("RegionStepOperator",)),
            or_(TaskInstance.state == TaskInstanceState.UP_FOR_RETRY, ended)).all()


def _median_cpu(work: Any, passes: int = PASSES) -> float:
    samples = []
    for _ in range(passes):
        start = time.process_time()
        work()
        samples.append(time.process_time() - start)
    return statistics.median(samples) * 1000


def measure(failed_total: int) -> dict[str, float]:
    """In this (fresh) process: populate the DB, then time the new watcher's pass and the old probes."""
    from airflow_region_failover.decisions.storage import RunLogs
    from airflow_region_failover.plugins import metadata_db as probes
    from airflow_region_failover.plugins.watcher import Watcher
    from tests.support.fakes import MemoryObjects, services

    started = time.perf_counter()
    _populate(failed_total)
    populate_s = time.perf_counter() - started
    watcher = Watcher(interval=1.0, lookback=600.0, services=services(RunLogs(MemoryObjects())))  # type: ignore[arg-type]
    watcher._since = time.time() - 600
    watcher._runs.update(dict.fromkeys(probes.runs_ended_since(watcher._since) | probes.active_runs(), time.time()))
    for key in [f"{d}/{r}/{f.key}" for d, r, f in probes.failed_step_tasks(watcher._runs, watcher._since)]:
        watcher._done[key] = time.time()  # the recent failure was recorded by an earlier pass
    new_ms = _median_cpu(watcher.tick)
    old_ms = _median_cpu(lambda: _old_probes(time.time() - 600))
    return {"failed": failed_total, "populate_s": populate_s, "new_ms": new_ms, "old_ms": old_ms}


def _child(failed_total: int) -> dict[str, float]:
    home = tempfile.mkdtemp(prefix="bench-watcher-")
    env = {**os.environ, "AIRFLOW_HOME": home, "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
           "AIRFLOW__DATABASE__SQL_ALCHEMY_CONN": f"sqlite:///{home}/airflow.db"}
    done = subprocess.run([sys.executable, __file__, "--child", str(failed_total)], env=env, capture_output=True,
                          text=True, check=False, timeout=3600)
    if done.returncode != 0:
        raise RuntimeError(done.stdout[-2000:] + done.stderr[-4000:])
    result: dict[str, float] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="1,000 and 10,000 only")
    parser.add_argument("--full", action="store_true", help="add 2,000,000 (100 DAGs x 1,000 runs x 20)")
    parser.add_argument("--child", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        print(json.dumps(measure(args.child)))
        return
    sizes = [1_000, 10_000] if args.quick else [1_000, 10_000, 100_000, *([2_000_000] if args.full else [])]
    rows = [_child(n) for n in sizes]
    base_new, base_old = rows[0]["new_ms"], rows[0]["old_ms"]
    print(f"## Watcher pass CPU vs history ({DAGS} DAGs, {FAILED_PER_RUN} failed step tasks per historical run, "
          f"{ACTIVE_RUNS} runs at work; median of {PASSES} passes)\n")
    print("| historical failed tasks | watcher pass ms | x of smallest | old probes ms | x of smallest | DB fill s |")
    print("|---:|---:|---:|---:|---:|---:|")
    for r in rows:
        print(f"| {int(r['failed']):,} | {r['new_ms']:.1f} | {r['new_ms'] / base_new:.2f}x | {r['old_ms']:.1f} | "
              f"{r['old_ms'] / base_old:.2f}x | {r['populate_s']:.0f} |")
    worst = max(r["new_ms"] for r in rows)
    flat = max(r["new_ms"] for r in rows) / min(r["new_ms"] for r in rows)
    print(f"\nwatcher pass <= 20 ms at every size: {'yes' if worst <= 20 else 'NO'} (worst {worst:.1f} ms); "
          f"flat within 2x: {'yes' if flat <= 2 else 'NO'} ({flat:.2f}x)")


if __name__ == "__main__":
    main()

"""The example ETL beside one variant of it on one stack (``bench_chaining.py``, ``bench_recovery_e2e.py``):
``dags/tpch_etl.py`` as it is and a copy of it with one thing changed under its own dag id, both served by one
SeaweedFS, one Spark Connect server (``local[2]``, with the s3a jars, as ``region-failover standalone`` gives them)
and one Airflow 3 (SQLite, LocalExecutor) on loopback.

Rules: a variant changes the dag id and exactly the text it names; when the example no longer holds that text the
benchmark stops, naming the variant (:func:`variant`). A measured run that does not succeed stops it too, naming
the run (:func:`timed_run`). The stack is started once for every run of both DAGs and, whatever happens, stopped
and its work directory removed (:func:`side_by_side`).
"""

from __future__ import annotations

import contextlib
import shutil
import tempfile
import time
from collections.abc import Callable, Iterable, Iterator
from datetime import datetime
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
EXAMPLE = ROOT / "dags" / "tpch_etl.py"


def variant(target: Path, dag_id: str, old: str, new: str, what: str) -> Path:
    """Write ``<target>/<dag_id>.py``: the example ETL under dag id ``dag_id`` with ``old`` replaced by ``new``;
    its path. ``SystemExit`` naming ``what`` when the example's dag id or ``old`` is no longer there."""
    changed = EXAMPLE.read_text().replace('dag_id="tpch_etl"', f'dag_id="{dag_id}"').replace(old, new)
    if changed.count(dag_id) != 1 or new not in changed:
        raise SystemExit(f"dags/tpch_etl.py changed shape: cannot derive the {what} variant")
    path = target / f"{dag_id}.py"
    path.write_text(changed)
    return path


def timestamp(value: str | None) -> float | None:
    """Epoch seconds of one of Airflow's ISO times (``...Z``), ``None`` for none."""
    return datetime.fromisoformat(value.replace("Z", "+00:00")).timestamp() if value else None


def timed_run(api: Any, dag_id: str, conf: dict[str, Any]) -> tuple[str, float]:
    """Trigger one run of ``dag_id`` with ``conf`` and wait for its end (at most 30 min): its run id and wall time
    (trigger to end). ``SystemExit`` naming the run unless it succeeded."""
    started = time.time()
    run_id = api.trigger(dag_id, conf)
    state = api.final_state(dag_id, run_id, timeout=1800)
    wall = time.time() - started
    if state != "success":
        raise SystemExit(f"{dag_id} run {run_id} ended {state}")
    return run_id, wall


@contextlib.contextmanager
def side_by_side(prefix: str, derive: Callable[[Path], Path], dag_ids: Iterable[str]) -> Iterator[tuple[Any, Any]]:
    """Start the stack for the example and ``derive(work directory)`` (the variant's file), in a new temporary
    directory named ``prefix...``; once ``dag_ids`` are parsed, yield its REST client and its ``ResultStore``;
    stop everything after (module rule)."""
    from airflow_region_failover.standalone.airflow_stack import AirflowStack
    from airflow_region_failover.standalone.platform import merged_dags_folder, platform_env
    from airflow_region_failover.standalone.seaweedfs import SeaweedFS
    from airflow_region_failover.standalone.spark_connect import SparkConnectServer
    from airflow_region_failover.store.dataplane.s3a import with_jars
    from airflow_region_failover.store.result_store import ResultStore

    work = Path(tempfile.mkdtemp(prefix=prefix))
    dags = merged_dags_folder(work / "dags", EXAMPLE, derive(work))
    s3 = SeaweedFS(bucket="region-failover", data_dir=work / "s3")
    spark = SparkConnectServer(work / "sc", cores=2, conf=with_jars({}))  # the s3a jars, as `standalone` does
    stack = None
    try:
        endpoint, spark_url = s3.start(), spark.start()
        stack = AirflowStack(dags_folder=dags, home=work / "airflow", extra_env=platform_env(endpoint, spark_url))
        stack.start()
        store = ResultStore.from_endpoint(endpoint.endpoint_url, endpoint.access_key, endpoint.secret_key,
                                          endpoint.bucket)
        with stack.client() as api:
            for dag_id in dag_ids:
                api.wait_for_dag(dag_id, timeout=300)
            yield api, store
    finally:
        if stack is not None:
            stack.stop()
        spark.cleanup()
        s3.cleanup()
        shutil.rmtree(work, ignore_errors=True)

"""The production-like stack (:class:`devtools.production.ProductionStack`), started once for the tests of this
package: PostgreSQL, Redis, CeleryExecutor with one Celery worker, two schedulers, api-server, dag-processor,
triggerer, a Spark standalone cluster (master + two workers) with Spark Connect on it, SeaweedFS.

Every scenario that needs no test action to begin (the prefetched runs, the scheduled runs, the backfill) starts
as soon as the stack is up, so that their runs overlap; the Celery worker kill runs last, on an idle stack."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from airflow_region_failover.standalone.platform import merged_dags_folder
from tests.e2e.conftest import E2E, E2E_DAGS, REPO_ROOT, Prefetch, selected, wanted
from tests.e2e.scenarios import _runs

DAG_IDS = ("rf_e2e_region", "rf_e2e_budget", "rf_e2e_daily", "rf_e2e_backfill")
PREFETCH: Prefetch = {
    "region": ("rf_e2e_region", {"fail": {"c#0": 1}}),
    "kill": ("rf_e2e_region", {"kill": ["c#0"]}),
    "budget": ("rf_e2e_budget", {"fail": {"c#0": 5}}),
}
#: the 2026-02-02 run of the backfill fails c#0 once
BACKFILL = {"dag_id": "rf_e2e_backfill", "from_date": "2026-02-01T00:00:00Z", "to_date": "2026-02-03T00:00:00Z",
            "max_active_runs": 3, "reprocess_behavior": "none",
            "dag_run_conf": {"fail_on": {"2026-02-02": {"c#0": 1}}}}


def unpause(e2e: E2E, dag_id: str) -> None:
    """Unpause a DAG that is paused at creation (REST ``PATCH /dags/{dag_id}``)."""
    e2e.api.call("PATCH", f"/dags/{dag_id}", params={"update_mask": "is_paused"}, json={"is_paused": False})


def start_daily(e2e: E2E) -> None:
    """Unpause ``rf_e2e_daily`` (paused at creation: no run before): the scheduler creates its catch-up runs."""
    assert not _runs(e2e, "rf_e2e_daily", "scheduled"), "a run of a DAG paused at creation"
    unpause(e2e, "rf_e2e_daily")


def start_backfill(e2e: E2E) -> None:
    """Create the backfill of :data:`BACKFILL` (REST ``POST /backfills``) and unpause its DAG."""
    created = e2e.api.call("POST", "/backfills", json=BACKFILL).json()
    assert created["dag_id"] == BACKFILL["dag_id"], created
    unpause(e2e, BACKFILL["dag_id"])


#: The store's Parquet I/O goes through each step's session (``store_spark_io = driver``), so the executors run
#: the steps' JVM work only. With executor I/O every Spark task of a store read or write boots Python on an
#: executor: on 2 cores the cluster's executors were busy 91% of a 25 min suite with 375 such tasks of ~7 s each
#: (for kilobytes), and Spark Connect leaves one Python daemon per session on each executor (9.5 GB after 9 min).
#: The executor path on this cluster: tests/integration/test_cluster_launchers.py.
DRIVER_IO = {"AIRFLOW__REGION_FAILOVER__STORE_SPARK_IO": "driver"}

#: scenarios started with the prefetched runs, so that all of them overlap
STARTERS = {"daily": start_daily, "backfill": start_backfill}


@pytest.fixture(scope="package")
def e2e(tmp_path_factory: pytest.TempPathFactory, request: pytest.FixtureRequest) -> Iterator[E2E]:
    """The production-like stack (~1-2 min to start)."""
    from airflow_region_failover.decisions.storage import RunLogs
    from airflow_region_failover.store.result_store import ResultStore
    from devtools.production import ProductionStack

    work = tmp_path_factory.mktemp("production")
    dags = merged_dags_folder(work / "dags", E2E_DAGS / "rf_e2e.py")
    stack = ProductionStack(dags_folder=dags, work_dir=work, pythonpath=(str(REPO_ROOT),),
                            extra_env={"RF_E2E_SCHEDULED": "1", **DRIVER_IO})
    try:
        stack.start()
        assert stack.airflow is not None and stack.s3 is not None
        endpoint = stack.s3.endpoint
        store = ResultStore.from_endpoint(endpoint.endpoint_url, endpoint.access_key, endpoint.secret_key,
                                          endpoint.bucket)
        with stack.airflow.client() as api:
            for dag_id in DAG_IDS:
                api.wait_for_dag(dag_id, timeout=180)
            names = wanted(request.session, Path(__file__).parent)
            e2e = E2E(stack.airflow, api, store, RunLogs(store.objects), stack.s3, dags,
                      table=selected(PREFETCH, names, set(STARTERS)))
            e2e.production = stack  # type: ignore[attr-defined]
            e2e.prefetch()
            for name in sorted(names & set(STARTERS)):
                STARTERS[name](e2e)
            yield e2e
    finally:
        stack.stop()

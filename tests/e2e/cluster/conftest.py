"""The production-like stack (:class:`devtools.production.ProductionStack`), started once for the tests of this
package: PostgreSQL, Redis, CeleryExecutor with one Celery worker, two schedulers, api-server, dag-processor,
triggerer, a Spark standalone cluster (master + two workers) with Spark Connect on it, SeaweedFS."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from airflow_region_failover.standalone.airflow_stack import merged_dags_folder
from tests.e2e.conftest import E2E, E2E_DAGS, REPO_ROOT, Prefetch

DAG_IDS = ("rf_e2e_region", "rf_e2e_budget", "rf_e2e_daily", "rf_e2e_backfill")
PREFETCH: Prefetch = {
    "region": ("rf_e2e_region", {"fail": {"c#0": 1}}),
    "kill": ("rf_e2e_region", {"kill": ["c#0"]}),
    "budget": ("rf_e2e_budget", {"fail": {"c#0": 5}}),
}


@pytest.fixture(scope="package")
def e2e(tmp_path_factory: pytest.TempPathFactory) -> Iterator[E2E]:
    """The production-like stack (~1-2 min to start)."""
    from airflow_region_failover.store.facade import ResultStore
    from airflow_region_failover.store.runlog import RunLogs
    from devtools.production import ProductionStack

    work = tmp_path_factory.mktemp("production")
    dags = merged_dags_folder(work / "dags", E2E_DAGS / "rf_e2e.py")
    stack = ProductionStack(dags_folder=dags, work_dir=work, pythonpath=(str(REPO_ROOT),),
                            extra_env={"RF_E2E_SCHEDULED": "1"})
    try:
        stack.start()
        assert stack.airflow is not None and stack.s3 is not None
        endpoint = stack.s3.endpoint
        store = ResultStore.from_endpoint(endpoint.endpoint_url, endpoint.access_key, endpoint.secret_key,
                                          endpoint.bucket)
        with stack.airflow.client() as api:
            for dag_id in DAG_IDS:
                api.wait_for_dag(dag_id, timeout=180)
            e2e = E2E(stack.airflow, api, store, RunLogs(store.objects), stack.s3, dags, table=PREFETCH)
            e2e.production = stack  # type: ignore[attr-defined]
            yield e2e
    finally:
        stack.stop()

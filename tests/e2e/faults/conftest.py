"""The embedded stack of the failure-injection matrix, started once for the tests of this package (after and
never beside ``local/``'s): the session's SeaweedFS and Spark Connect servers, with Airflow (SQLite,
LocalExecutor) reaching the S3 server only through a fault proxy of the test (:mod:`tests.support.s3_faults`)
and storing into a bucket of its own, ``rf-faults`` — a new bucket, so the shared Spark Connect JVM's S3A client
(cached per bucket for the life of the JVM) also goes through the proxy. The test's own store reaches SeaweedFS
directly, to break objects behind the product's back. The stack's grace floor is lowered to :data:`FLOOR_S`
through ``[region_failover] store_min_grace_seconds`` (its writers' heartbeat every 5 s), so the matrix can hold a
commit for longer than the grace within the clients' 60-s read timeout and sweep meanwhile."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from typing import Any

import pytest

from airflow_region_failover.standalone.airflow_stack import AirflowStack
from airflow_region_failover.standalone.platform import merged_dags_folder, platform_env
from tests.e2e.conftest import E2E, E2E_DAGS, REPO_ROOT
from tests.support.s3_faults import FaultProxy

BUCKET = "rf-faults"
DAG_IDS = ("rf_faults", "rf_faults_checkpointed")
FLOOR_S = 20.0
"""The grace floor of the stack's writers (``store_min_grace_seconds``) and of the test's sweeps."""


@pytest.fixture(scope="package")
def proxy(s3_server: Any) -> Iterator[FaultProxy]:
    """The fault proxy in front of the session's SeaweedFS."""
    with FaultProxy(s3_server.endpoint_url) as running:
        yield running


@pytest.fixture(scope="package")
def e2e(s3_process: Any, s3_server: Any, spark_connect: str, proxy: FaultProxy,
        tmp_path_factory: pytest.TempPathFactory) -> Iterator[E2E]:
    """The stack (module rule; ~30-60 s)."""
    from airflow_region_failover.decisions.storage import RunLogs
    from airflow_region_failover.store.result_store import ResultStore

    store = ResultStore.from_endpoint(s3_server.endpoint_url, s3_server.access_key, s3_server.secret_key, BUCKET,
                                      min_grace_seconds=FLOOR_S)
    existing = {b["Name"] for b in store.objects.client.list_buckets().get("Buckets", [])}
    if BUCKET not in existing:
        store.objects.client.create_bucket(Bucket=BUCKET)
    home = tmp_path_factory.mktemp("airflow-faults")
    dags = merged_dags_folder(home / "dags", E2E_DAGS / "rf_faults.py")
    through_proxy = dataclasses.replace(s3_server, endpoint_url=proxy.endpoint_url)
    env = {**platform_env(through_proxy, spark_connect, bucket=BUCKET),
           "AIRFLOW__REGION_FAILOVER__STORE_MIN_GRACE_SECONDS": str(FLOOR_S)}
    stack = AirflowStack(dags_folder=dags, home=home / "home", extra_env=env,
                         parallelism=8, pythonpath=(str(REPO_ROOT),))
    stack.start()
    try:
        with stack.client() as api:
            for dag_id in DAG_IDS:
                api.wait_for_dag(dag_id, timeout=180)
            yield E2E(stack, api, store, RunLogs(store.objects), s3_process, dags, gates=home / "gates")
    finally:
        stack.stop()

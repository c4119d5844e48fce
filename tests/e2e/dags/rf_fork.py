"""``rf_e2e_fork``: three plain tasks that each look, before it uses any, at the process-wide clients the provider holds
in its own process (``tests/e2e/local/test_watcher_faults_e2e.py``).

A task process of the LocalExecutor is forked from a worker process, which the scheduler forked: whatever the
scheduler's watcher had built before that fork (an S3 client, the result store, the decision logs, the REST
client) would be there without this task having built it — the same keep-alive connections in two processes.
A task fails naming each such client; it returns what it found (nothing) and the process it ran in.
"""

from __future__ import annotations

import os
from datetime import datetime
from typing import Any

from airflow.sdk import DAG, task


def held_clients() -> dict[str, int]:
    """How many objects each process-wide client cache of the provider holds in this process."""
    from airflow_region_failover.decisions import storage
    from airflow_region_failover.plugins import rest
    from airflow_region_failover.spark import session
    from airflow_region_failover.store import result_store
    from airflow_region_failover.store.s3 import clients

    caches = {"store.s3.clients.client_for": clients.client_for, "store.result_store.default_store":
              result_store.default_store, "decisions.storage.default_run_logs": storage.default_run_logs,
              "plugins.rest.default_api": rest.default_api, "spark.session._session": session._session}
    return {name: cache.cache_info().currsize for name, cache in caches.items()}


with DAG("rf_e2e_fork", schedule=None, start_date=datetime(2026, 1, 1), catchup=False, tags=["rf-e2e"]):

    @task
    def inherits_no_client() -> dict[str, Any]:
        held = {name: count for name, count in held_clients().items() if count}
        if held:
            raise RuntimeError(f"this task process (pid {os.getpid()}, its worker {os.getppid()}) holds clients it "
                               f"never built, inherited across a fork: {held}")
        return {"pid": os.getpid(), "worker": os.getppid(), "held": held}

    for i in range(3):  # in parallel: the first queued may go to a worker forked before the watcher ran
        inherits_no_client.override(task_id=f"inherits_no_client_{i}")()

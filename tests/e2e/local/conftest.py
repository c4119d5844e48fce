"""The embedded stack, started once for the tests of this package: SeaweedFS, Spark Connect on ``local[2]`` and
Airflow 3 (api-server, scheduler, dag-processor; SQLite, LocalExecutor) — what ``region-failover standalone``
runs — with a second watcher process beside the scheduler's. The DAGs folder holds the example ETL and the e2e
DAGs; users ``viewer`` and ``outsider`` test the plugin's authorisation. Every component sends its metrics to a
StatsD listener of the test (:func:`statsd`, ``[metrics] statsd_*``) and its OpenLineage events to files
(:func:`lineage_events`, the openlineage provider's file transport), so scenarios assert on both."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from airflow_region_failover.standalone.airflow_stack import AirflowStack
from airflow_region_failover.standalone.platform import merged_dags_folder, platform_env
from airflow_region_failover.standalone.processes import stop_group
from tests.e2e.conftest import E2E, E2E_DAGS, GATE, REPO_ROOT, Prefetch, selected, wanted
from tests.e2e.publishing import CONSUMER_DAG, CONSUMER_ID, write_daily_variant
from tests.e2e.publishing import DAG_ID as DAILY_DAG_ID
from tests.e2e.publishing import PREFETCH as DAILY_PREFETCH
from tests.support.statsd import StatsdListener

DAG_IDS = ("tpch_etl", "clickstream_sessions", "rf_e2e_region", "rf_e2e_full", "rf_e2e_delayed",
           "rf_e2e_deterministic", "rf_e2e_budget", "rf_e2e_retries", "rf_e2e_code", "rf_e2e_keyed", "rf_e2e_fork",
           "rf_e2e_fused", "rf_e2e_fused_blocking", DAILY_DAG_ID, CONSUMER_ID, "rf_heal", "rf_heal_checkpointed",
           "rf_sliced")
#: Users besides the admin: ``viewer`` may read every DAG; ``outsider`` (role viewer) may not see ``rf_e2e_region``
#: (tests.support.auth.DagDenyingAuthManager).
USERS = {"viewer": "viewer", "outsider": "viewer"}
DENIED = "outsider:rf_e2e_region"
#: A second watcher, as a second scheduler would run one (HA): every scenario here runs with two.
SECOND_WATCHER = """
import signal, threading
from airflow_region_failover.plugins.watcher import Watcher
stop = threading.Event()
signal.signal(signal.SIGTERM, lambda *a: stop.set())
watcher = Watcher()
watcher.start()
stop.wait()
watcher.stop()
"""
PREFETCH: Prefetch = {
    "region": ("rf_e2e_region", {"fail": {"c#0": 1}}),
    "full": ("rf_e2e_full", {"fail": {"c#0": 1}}),
    "delayed": ("rf_e2e_delayed", {"fail": {"d#0": 1}}),
    "retries": ("rf_e2e_retries", {"fail": {"c#0": 1}}),
    "keyed": ("rf_e2e_keyed", {"fail": ["agg#1"]}),
    "fused": ("rf_e2e_fused", {"fail": ["agg#1"]}),
    "fused_blocking": ("rf_e2e_fused_blocking", {"fail": ["agg#1"]}),
    "checkpoint": ("clickstream_sessions", {"fail_at_epoch": 4}),
    # held at their gates until their tests (late in a session with the extended scenarios: an hour at most)
    "marked": ("rf_e2e_region", {"hold": ["a#0"], "gate": GATE, "gate_timeout": 3600}),
    "s3down": ("rf_e2e_region", {"fail": {"c#0": 1}, "gate": GATE, "gate_timeout": 3600}),
    **DAILY_PREFETCH,  # three logical dates of the example daily job, publishing to a Delta table
}


class SecondWatcher:
    """The watcher a second scheduler would run (HA), as its own process with the stack's environment (plus
    ``extra``); a test may stop it and start it again, as it restarts a scheduler."""

    def __init__(self, stack: AirflowStack) -> None:
        self.stack = stack
        self.process: subprocess.Popen[bytes] | None = None

    def start(self, extra: dict[str, str] | None = None) -> None:
        assert self.stack.home is not None
        with open(self.stack.home / "second-watcher.log", "ab") as out:
            self.process = subprocess.Popen([sys.executable, "-c", SECOND_WATCHER],
                                            env={**self.stack.env(), **(extra or {})}, stdout=out,
                                            stderr=subprocess.STDOUT, start_new_session=True)

    def stop(self, grace: float = 10.0) -> None:
        process, self.process = self.process, None
        stop_group(process, grace)


@pytest.fixture(scope="package")
def statsd() -> Iterator[StatsdListener]:
    """A StatsD listener on loopback (an ephemeral UDP port) receiving the stack's metrics."""
    listener = StatsdListener().start()
    try:
        yield listener
    finally:
        listener.stop()


@pytest.fixture(scope="package")
def lineage_events(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Where the stack's OpenLineage file transport writes: one ``events-<time>.json`` file per event."""
    return tmp_path_factory.mktemp("openlineage")


def observability_env(statsd: StatsdListener, lineage_events: Path) -> dict[str, str]:
    """``[metrics]`` StatsD at the listener (InfluxDB-style tags: the metrics' tags reach it) and
    ``[openlineage]`` file transport into ``lineage_events``."""
    return {
        "AIRFLOW__METRICS__STATSD_ON": "True", "AIRFLOW__METRICS__STATSD_HOST": "127.0.0.1",
        "AIRFLOW__METRICS__STATSD_PORT": str(statsd.port), "AIRFLOW__METRICS__STATSD_PREFIX": "airflow",
        "AIRFLOW__METRICS__STATSD_INFLUXDB_ENABLED": "True",
        "AIRFLOW__OPENLINEAGE__NAMESPACE": "rf-e2e",
        "AIRFLOW__OPENLINEAGE__TRANSPORT": json.dumps({"type": "file",
                                                       "log_file_path": str(lineage_events / "events")}),
    }


@pytest.fixture(scope="package")
def e2e(s3_process: Any, s3_server: Any, spark_connect: str, tmp_path_factory: pytest.TempPathFactory,
        request: pytest.FixtureRequest, statsd: StatsdListener, lineage_events: Path) -> Iterator[E2E]:
    """The embedded stack (started once for this package; ~30-60 s)."""
    from airflow_region_failover.decisions.storage import RunLogs
    from airflow_region_failover.store.result_store import ResultStore

    home = tmp_path_factory.mktemp("airflow")
    dags = merged_dags_folder(home / "dags", REPO_ROOT / "dags" / "tpch_etl.py",
                              REPO_ROOT / "dags" / "clickstream_sessions.py", E2E_DAGS / "rf_e2e.py",
                              E2E_DAGS / "rf_keyed.py", E2E_DAGS / "rf_fused.py", E2E_DAGS / "rf_fork.py",
                              CONSUMER_DAG,
                              E2E_DAGS / "rf_heal.py", E2E_DAGS / "rf_heal_checkpointed.py",
                              E2E_DAGS / "rf_sliced.py")
    shutil.copy(E2E_DAGS / "rf_e2e_code.py", dags / "rf_e2e_code.py")  # a real file: a test edits it
    write_daily_variant(dags)  # dags/daily_prices.py publishing to its own table, no scheduled run
    stack = AirflowStack(dags_folder=dags, home=home / "home",
                         extra_env={**platform_env(s3_server, spark_connect), "RF_TEST_DAG_DENIED": DENIED,
                                    **observability_env(statsd, lineage_events)},
                         parallelism=8, users=USERS, auth_manager="tests.support.auth.DagDenyingAuthManager",
                         pythonpath=(str(REPO_ROOT),))
    stack.start()
    watcher = SecondWatcher(stack)
    try:
        watcher.start()
        store = ResultStore.from_endpoint(s3_server.endpoint_url, s3_server.access_key, s3_server.secret_key,
                                          s3_server.bucket)
        logs = RunLogs(store.objects)
        with stack.client() as api:
            for dag_id in DAG_IDS:
                api.wait_for_dag(dag_id, timeout=180)
            table = selected(PREFETCH, wanted(request.session, Path(__file__).parent))
            e2e = E2E(stack, api, store, logs, s3_process, dags, table=table, gates=home / "gates",
                      second_watcher=watcher)
            e2e.prefetch()  # as soon as the stack is up: the runs overlap the first scenarios
            yield e2e
    finally:
        watcher.stop()
        stack.stop()

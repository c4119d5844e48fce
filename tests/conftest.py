"""Shared pytest fixtures. Helpers add their own fixtures here; keep each one small and independent."""

from __future__ import annotations

import atexit
import logging
import os
import shutil
import tempfile
from collections.abc import Iterator

import pytest

os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
# Unit tests that import Airflow get a throw-away AIRFLOW_HOME, never the developer's ~/airflow. Tests that need a
# metadata DB or a running Airflow build their own home (see tests/integration and tests/e2e).
if "AIRFLOW_HOME" not in os.environ:  # made only when needed, and removed when the run ends
    os.environ["AIRFLOW_HOME"] = tempfile.mkdtemp(prefix="region-failover-airflow-home-")
    atexit.register(shutil.rmtree, os.environ["AIRFLOW_HOME"], True)
os.environ.setdefault("AIRFLOW__CORE__LOAD_EXAMPLES", "False")


# -- processes: a killed or interrupted test run leaves nothing running ------------------------------------------
def pytest_configure(config: pytest.Config) -> None:
    """SIGTERM and SIGHUP end the run as Ctrl-C does, so fixtures tear their stacks down; if pytest is killed
    outright, the stack guard (``standalone.processes``) stops every process the run's stacks started."""
    from airflow_region_failover.standalone.processes import stop_on_signals

    stop_on_signals()


@pytest.fixture(scope="session", autouse=True)
def _stack_guard() -> Iterator[None]:
    """Torn down last: stops whatever a stack of this run left behind (a task process, a re-parented JVM)."""
    yield
    from airflow_region_failover.standalone.processes import stop_guarded

    stop_guarded()


# -- result store: a real S3-compatible server (SeaweedFS) on loopback, one per test session ------------------
@pytest.fixture(scope="session")
def s3_process(tmp_path_factory: pytest.TempPathFactory) -> Iterator[object]:
    """The running SeaweedFS server itself (``standalone.seaweedfs.SeaweedFS``: for tests that take it away)."""
    from airflow_region_failover.standalone.seaweedfs import SeaweedFS

    server = SeaweedFS(bucket="region-failover-test", data_dir=tmp_path_factory.mktemp("seaweedfs"))
    try:
        server.start()
        yield server
    finally:
        server.stop(grace=5)


@pytest.fixture(scope="session")
def s3_server(s3_process: object) -> object:
    """A running SeaweedFS server: its ``S3Endpoint`` (endpoint_url, access_key, secret_key, bucket)."""
    return s3_process.endpoint  # type: ignore[attr-defined]


# -- Spark Connect: a real local Spark Connect server on a free loopback port, one per test session ------------
@pytest.fixture(scope="session")
def spark_connect(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A running local Spark Connect server (``local[2]``, the pinned s3a jars on its classpath): yields its
    ``sc://127.0.0.1:<port>`` URL."""
    from airflow_region_failover.standalone.spark_connect import SparkConnectServer
    from airflow_region_failover.store.dataplane.s3a import with_jars

    server = SparkConnectServer(tmp_path_factory.mktemp("spark-connect"), cores=2, conf=with_jars({}))
    try:
        yield server.start()
    finally:
        server.stop(grace=10)


# -- PySpark's process-wide Connect marker must not leak from one test into the next ---------------------------
@pytest.fixture(autouse=True)
def _no_leaked_spark_connect_mode() -> Iterator[None]:
    """A test that builds a Spark Connect session in this process makes PySpark set ``SPARK_CONNECT_MODE_ENABLED``
    in ``os.environ``, after which no later test (nor a child it starts) could build an embedded session; the
    marker is put back as it was after each test."""
    from airflow_region_failover.standalone.processes import PYSPARK_CLIENT_MARKERS

    before = {key: os.environ.get(key) for key in PYSPARK_CLIENT_MARKERS}
    yield
    for key, value in before.items():
        if value is None:
            os.environ.pop(key, None)
        else:
            os.environ[key] = value


# py4j logs "Closing down clientserver connection" from finalizers at interpreter exit, after pytest has closed
# the stream: a harmless "--- Logging error ---" traceback at the end of every run. Keep py4j to warnings.
logging.getLogger("py4j").setLevel(logging.WARNING)

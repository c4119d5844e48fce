"""The production-like stack's own servers (``devtools/cluster.py``): PostgreSQL, Redis and a Spark standalone
cluster with Spark Connect each come up on loopback, serve a real client, and leave no process behind when
stopped. The ``check_*`` helpers take the server so a broken one can be put through the same checks."""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any

import psutil
import pytest

from airflow_region_failover.store.keys import AttemptId
from devtools.cluster import Postgres, Redis, SparkCluster
from devtools.databases import descendants, running

pytestmark = pytest.mark.integration

PROVIDER_DIR = str(Path(__file__).resolve().parents[2] / "provider")


def process_tree(*pids: int | None) -> list[psutil.Process]:
    """The processes ``pids`` and everything descended from them, now."""
    roots = [psutil.Process(pid) for pid in pids if pid is not None]
    return roots + [child for root in roots for child in descendants(root.pid)]


def assert_gone(procs: list[psutil.Process]) -> None:
    left = [f"{p.pid} {p.name()}" for p in procs if running(p)]
    assert not left, f"processes left after stop(): {left}"


# -- PostgreSQL -----------------------------------------------------------------------------------------------
def check_postgres(server: Postgres) -> None:
    from sqlalchemy import create_engine, text

    url = server.start()
    assert url == f"postgresql+psycopg2://airflow@127.0.0.1:{server.port}/airflow"
    engine = create_engine(url)
    try:
        with engine.begin() as conn:
            assert conn.execute(text("SELECT current_user, current_database()")).one() == ("airflow", "airflow")
            conn.execute(text("CREATE TABLE kept (n int)"))
            conn.execute(text("INSERT INTO kept VALUES (1), (2)"))
    finally:
        engine.dispose()
    private = create_engine(server.create_database("private_db"))
    try:
        with private.connect() as conn:
            assert conn.execute(text("SELECT current_database()")).scalar() == "private_db"
    finally:
        private.dispose()
    assert server.create_database("private_db") == server.url_for("private_db"), "creating it again is a no-op"
    procs = process_tree(server.pid)
    assert len(procs) > 1, "the postmaster and its background processes"
    server.stop()
    assert_gone(procs)
    engine = create_engine(server.start())  # the data directory is served again (on a new port)
    try:
        with engine.connect() as conn:
            assert conn.execute(text("SELECT sum(n) FROM kept")).scalar() == 3
    finally:
        engine.dispose()
    procs = process_tree(server.pid)
    server.cleanup()
    assert_gone(procs)


def test_postgres_serves_sqlalchemy_and_stops_every_process(tmp_path: Path) -> None:
    check_postgres(Postgres(tmp_path / "pg"))


@pytest.mark.skipif(os.geteuid() != 0, reason="PostgreSQL runs as nobody only when started as root")
def test_postgres_starts_from_a_checkout_nobody_can_enter(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A checkout below a 0700 directory (a ``mktemp -d`` clone, as root): ``initdb`` used to fail with 126
    ("invalid binary"); the binaries now run from a private copy, removed by ``cleanup()``."""
    import devtools.databases as databases

    real = databases.package_dir("pgserver")
    private = tmp_path / "clone"
    private.mkdir()
    (private / "pgserver").symlink_to(real)
    private.chmod(0o700)
    monkeypatch.setattr(databases, "package_dir", lambda name: private / name)
    server = Postgres(tmp_path / "pg")
    assert databases.closed_ancestor(server.bin_dir) is not None
    before = set(Path(databases.tempfile.gettempdir()).glob("pginstall-*"))
    check_postgres(server)
    assert set(Path(databases.tempfile.gettempdir()).glob("pginstall-*")) == before, "the private copy is removed"


# -- Redis ------------------------------------------------------------------------------------------------------
def check_redis(server: Redis) -> None:
    import redis

    url = server.start()
    assert url == f"redis://127.0.0.1:{server.port}/0"
    client = redis.Redis.from_url(url, socket_timeout=5)
    try:
        assert client.ping() is True
        client.set("broker", "celery")
        assert client.get("broker") == b"celery"
    finally:
        client.close()
    procs = process_tree(server.pid)
    server.cleanup()
    assert_gone(procs)
    assert server.ping() == "", "nothing answers once stopped"


def test_redis_answers_ping_and_stops(tmp_path: Path) -> None:
    check_redis(Redis(tmp_path / "redis"))


# -- Spark standalone cluster + Spark Connect -------------------------------------------------------------------
SCHEMA = "cwd string, pid long, python string, module string, pythonpath string, local_ip string, stack string"


def run_on_executors(url: str, partitions: int = 8) -> list[dict[str, Any]]:
    """One row per partition (where it ran, what it saw), through a Spark Connect session on ``url``."""
    def where(batches: Any) -> Any:  # nested: pickled by value (the executors cannot import the tests)
        """Runs in the executors' Python workers: where am I, and can I import the provider?"""
        import os
        import sys

        import pyarrow as pa

        import airflow_region_failover

        for _ in batches:
            yield pa.RecordBatch.from_pylist([{
                "cwd": os.getcwd(), "pid": os.getpid(), "python": sys.executable,
                "module": airflow_region_failover.__file__, "pythonpath": os.environ.get("PYTHONPATH", ""),
                "local_ip": os.environ.get("SPARK_LOCAL_IP", ""),
                "stack": os.environ.get("REGION_FAILOVER_STACK", ""),
            }])

    from pyspark.sql import SparkSession

    session = SparkSession.builder.remote(url).create()
    try:
        frame = session.range(0, partitions, 1, partitions).mapInArrow(where, SCHEMA)
        return [row.asDict() for row in frame.collect()]
    finally:
        session.stop()


SESSIONS = 4


def daemons_per_executor(cluster: SparkCluster) -> list[int]:
    """Per executor JVM of ``cluster`` (``CoarseGrainedExecutorBackend``): its ``pyspark.daemon`` children. Spark
    keeps one daemon per distinct Python worker environment; the stock Connect server puts each session's id into
    it (``SPARK_JOB_ARTIFACT_UUID``), so it would show one per session here."""
    def cmd(proc: psutil.Process) -> str:
        try:
            return " ".join(proc.cmdline())
        except psutil.Error:  # exited meanwhile
            return ""

    executors = [p for p in process_tree(*cluster.pids.values()) if "CoarseGrainedExecutorBackend" in cmd(p)]
    return sorted(sum("pyspark.daemon" in cmd(c) for c in e.children()) for e in executors)


def summarize(rows: list[dict[str, Any]], cluster: SparkCluster) -> dict[str, Any]:
    """What the rows say about the executors' environment and about which workers ran the tasks (an executor's
    working directory is ``<worker work dir>/<app id>/<executor id>``)."""
    workers = {i for row in rows for i in range(cluster.workers)
               if Path(row["cwd"]).is_relative_to(cluster.worker_dir(i).resolve())}
    return {
        "rows": len(rows),
        "python": {row["python"] for row in rows},
        "module": {str(Path(row["module"]).parent.parent) for row in rows},
        "provider_on_pythonpath": {PROVIDER_DIR in row["pythonpath"].split(os.pathsep) for row in rows},
        "local_ip": {row["local_ip"] for row in rows},
        "stack": {row["stack"] for row in rows},
        "workers": workers,
        "python_workers>=2": len({row["pid"] for row in rows}) >= 2,
    }


def store_round_trip_on_executors(url: str, s3: Any) -> None:
    """The store's executor I/O path on the cluster (the production-like e2e stack reads and writes through the
    driver): every Spark task uploads its partition and the read maps one task per object."""
    import secrets

    from pyspark.sql import SparkSession

    from airflow_region_failover.graph.ids import PartitionId
    from airflow_region_failover.store.result_store import ResultStore

    store = ResultStore.from_endpoint(s3.endpoint_url, s3.access_key, s3.secret_key, s3.bucket,
                                      prefix=f"cluster-{secrets.token_hex(4)}", spark_io="executors")
    session = SparkSession.builder.remote(url).create()
    try:
        df = session.range(0, 5_000, 1, 4).selectExpr("id", "concat('k', id % 13) AS k")
        manifest, _ = store.write(df, AttemptId("cluster", "run", PartitionId("a->b", 0), 1))
        assert (manifest.row_count, len(manifest.objects)) == (5_000, 4)
        back = store.read(session, "cluster", "run", PartitionId("a->b", 0))
        assert tuple(back.selectExpr("count(*)", "sum(id)", "count(distinct k)").first()) == (5_000, 12_497_500, 13)
    finally:
        session.stop()


def check_spark_cluster(cluster: SparkCluster, s3: Any = None) -> None:
    try:
        url = cluster.start()
        assert url.startswith("sc://127.0.0.1:") and url == cluster.url
        status = cluster.status()
        assert [w["state"] for w in status["workers"]] == ["ALIVE"] * cluster.workers, status["workers"]
        assert cluster.alive_workers() == cluster.workers
        assert [app["name"] for app in status["activeapps"]] == ["region-failover Spark Connect"]
        rows = run_on_executors(url)
        assert summarize(rows, cluster) == {
            "rows": 8, "python": {sys.executable}, "module": {PROVIDER_DIR}, "provider_on_pythonpath": {True},
            "local_ip": {"127.0.0.1"}, "stack": {os.environ["REGION_FAILOVER_STACK"]},
            "workers": set(range(cluster.workers)), "python_workers>=2": True,
        }, rows
        if s3 is not None:
            store_round_trip_on_executors(url, s3)
            for _ in range(SESSIONS):
                run_on_executors(url)
            assert daemons_per_executor(cluster) == [1] * cluster.workers, (
                f"{SESSIONS + 2} sessions (step tasks) share one Python daemon per executor")
        procs = process_tree(*cluster.pids.values())
        assert len(procs) >= 2 + cluster.workers * 3, "master, workers, Connect, executors, Python daemons"
    finally:
        cluster.cleanup()
    assert_gone(procs)
    assert cluster.pids == {}


def test_spark_cluster_runs_a_connect_query_on_both_workers_and_stops_every_process(tmp_path: Path,
                                                                                      s3_server: Any) -> None:
    check_spark_cluster(SparkCluster(tmp_path / "spark", workers=2), s3_server)

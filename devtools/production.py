"""The production-like stack the end-to-end tests run on, from packages that install here (no Docker engine).

PostgreSQL (metadata DB and Celery result backend), Redis (Celery broker), Airflow 3 with CeleryExecutor — two
schedulers (each runs the failover watcher: HA), api-server, dag-processor, triggerer and one Celery worker —, a
Spark standalone cluster (master + two workers) with a Spark Connect server on it, and SeaweedFS. The same
services as ``docker/compose.yaml``.

Rules: everything on 127.0.0.1 on free ports; the servers Airflow needs started together, then Airflow, and
stopped in reverse; every process carries the stack marker of :mod:`airflow_region_failover.standalone.processes`,
so its guard stops all of them if the process that started the stack is killed. Component instances are named as
in the compose file.
"""

from __future__ import annotations

import tempfile
import time
from collections.abc import Callable, Mapping
from concurrent.futures import ThreadPoolExecutor, wait
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from airflow_region_failover.standalone.airflow_stack import AirflowStack
from airflow_region_failover.standalone.platform import platform_env
from airflow_region_failover.standalone.processes import ensure_guard
from airflow_region_failover.standalone.seaweedfs import SeaweedFS
from devtools.cluster import Postgres, Redis, SparkCluster

CELERY_CONCURRENCY = 6
#: instance name -> ``airflow`` sub-command (as the services of docker/compose.yaml)
COMPONENTS: dict[str, tuple[str, ...]] = {
    "api-server": ("api-server",),
    "scheduler": ("scheduler",),
    "scheduler-2": ("scheduler",),
    "dag-processor": ("dag-processor",),
    "triggerer": ("triggerer",),
    "celery-worker": ("celery", "worker", "--concurrency", str(CELERY_CONCURRENCY)),
}
#: the Celery configuration that preloads step tasks' imports (:mod:`airflow_region_failover.plugins.preload`)
PRELOAD_CONFIG = "airflow_region_failover.operators.preload.CELERY_CONFIG"
#: a task whose worker died is failed by the scheduler after this many seconds without a heartbeat
HEARTBEAT_TIMEOUT_S = 30


def started_together(*starts: Callable[[], Any]) -> list[Any]:
    """Each of ``starts`` called in a thread of its own, all at once; their results in order, once every one has
    returned — or, when one raised, the first such error (in order) once the others have ended too, so that the
    caller's ``stop`` finds no server half-way through its start."""
    with ThreadPoolExecutor(max_workers=len(starts), thread_name_prefix="stack-start") as pool:
        futures = [pool.submit(start) for start in starts]
        wait(futures)
    return [future.result() for future in futures]


@dataclass
class ProductionStack:
    """Start with :meth:`start`, always :meth:`stop`. ``airflow`` is the :class:`AirflowStack` (REST client,
    component kill/revive, logs); ``s3`` the SeaweedFS server; ``spark_url`` the Connect server's URL."""

    dags_folder: Path
    work_dir: Path = field(default_factory=lambda: Path(tempfile.mkdtemp(prefix="rf-production-")))
    extra_env: Mapping[str, str] = field(default_factory=dict)
    users: Mapping[str, str] = field(default_factory=dict)
    pythonpath: tuple[str, ...] = ()
    postgres: Postgres | None = None
    redis: Redis | None = None
    s3: SeaweedFS | None = None
    spark: SparkCluster | None = None
    airflow: AirflowStack | None = None
    spark_url: str = ""
    database_url: str = ""
    #: the Spark Connect server's sessions share their Python workers (the provider's server; False: the stock one)
    shared_workers: bool = True

    def start(self) -> ProductionStack:
        """PostgreSQL, Redis, SeaweedFS and the Spark cluster with Connect at once (none needs another), then
        Airflow, which needs them all; on failure stop all."""
        ensure_guard()
        try:
            self.postgres = Postgres(self.work_dir / "postgres")
            self.redis = Redis(self.work_dir / "redis")
            self.s3 = SeaweedFS(bucket="region-failover", data_dir=self.work_dir / "s3")
            self.spark = SparkCluster(self.work_dir / "spark", workers=2, shared_workers=self.shared_workers)
            self.database_url, broker, endpoint, self.spark_url = started_together(
                self.postgres.start, self.redis.start, self.s3.start, self.spark.start)
            self.airflow = AirflowStack(
                dags_folder=self.dags_folder, home=self.work_dir / "airflow", components=COMPONENTS,
                executor="CeleryExecutor", database_url=self.database_url, users=self.users,
                pythonpath=self.pythonpath, parallelism=2 * CELERY_CONCURRENCY,
                extra_env={**platform_env(endpoint, self.spark_url), **self._celery_env(broker),
                           **self.extra_env})
            self.airflow.start(timeout=300)
            self._wait_worker_ready()
        except BaseException:
            self.stop()
            raise
        return self

    def _wait_worker_ready(self, timeout: float = 180.0) -> None:
        """Until the Celery worker says it is ready (the api-server's health does not cover workers); a worker
        that keeps dying (the supervisor restarts it) fails the start with its log's end."""
        assert self.airflow is not None and self.airflow.home is not None
        log = self.airflow.home / "celery-worker.log"
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if log.exists() and " ready." in log.read_text(errors="replace"):
                return
            time.sleep(1)
        tail = log.read_text(errors="replace")[-3000:] if log.exists() else "(no log)"
        raise TimeoutError(f"the Celery worker was not ready after {timeout:.0f} s "
                           f"(restarts: {self.airflow.restarts}):\n{tail}")

    def _celery_env(self, broker: str) -> dict[str, str]:
        backend = "db+" + self.database_url  # the driver named: SQLAlchemy 2.1 defaults postgresql:// to psycopg 3
        return {
            "AIRFLOW__CELERY__BROKER_URL": broker,
            "AIRFLOW__CELERY__RESULT_BACKEND": backend,
            "AIRFLOW__CELERY__WORKER_CONCURRENCY": str(CELERY_CONCURRENCY),
            # the worker imports what step tasks import once, before it forks (docs/deployment.md)
            "AIRFLOW__CELERY__CELERY_CONFIG_OPTIONS": PRELOAD_CONFIG,
            "AIRFLOW__SCHEDULER__TASK_INSTANCE_HEARTBEAT_TIMEOUT": str(HEARTBEAT_TIMEOUT_S),
            "AIRFLOW__SCHEDULER__TASK_INSTANCE_HEARTBEAT_TIMEOUT_DETECTION_INTERVAL": "5",
        }

    def stop(self) -> None:
        """Stop Airflow first (its tasks use the rest), then Spark, S3, Redis and PostgreSQL."""
        parts: list[Any] = [self.airflow, self.spark, self.s3, self.redis, self.postgres]
        for part in parts:
            if part is not None:
                part.stop()

    def __enter__(self) -> ProductionStack:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

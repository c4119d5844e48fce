"""The servers of the production-like test stack that are not Airflow's: a Spark standalone cluster (master, N
workers) with a Spark Connect server on it (here), PostgreSQL and Redis (:mod:`devtools.databases`, re-exported).
All from packages that install here; no Docker engine.

Rules (as the launchers of :mod:`airflow_region_failover.standalone`):
- the master and each worker run pyspark's own ``spark-class`` in the foreground (``SPARK_NO_DAEMONIZE``), each in
  its own process group with its log in the work directory, on 127.0.0.1 on ports that were free when they started
  (``spark.port.maxRetries=0``: a clash is an error, retried with new ports, not a silent move to the next port;
  the master's REST submission server, on a fixed port, is off);
- the cluster is up when the master and each worker listen on the ports picked for them (another process there
  is a clash: new ports) and the master's web UI (``/json/``) lists every worker ALIVE; then the Spark Connect server
  (:class:`SparkConnectServer` with ``master=spark://...``) is started on it and is ready only once all its
  executors have registered (``spark.scheduler.minRegisteredResourcesRatio=1``): a query never runs on a part of
  the cluster;
- Python workers on the executors run this interpreter with this provider importable (the server's
  ``executor_conf``); every process inherits this process's environment, stack marker included;
- ``stop(grace)`` stops Connect, then the workers (their executors and Python workers too), then the master, and
  leaves no process of any of them; ``cleanup()`` also removes the work directory if this object created it.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path
from typing import Any

from airflow_region_failover.standalone.processes import (
    free_ports,
    inherited_environment,
    ours_listening,
    register,
    start_with_retries,
)
from airflow_region_failover.standalone.spark_connect import SparkConnectServer, spark_home
from airflow_region_failover.store.dataplane import s3a
from devtools.databases import Postgres, Redis, descendants, finish, stop_tree

__all__ = ["Postgres", "Redis", "SparkCluster"]

MASTER_CLASS = "org.apache.spark.deploy.master.Master"
WORKER_CLASS = "org.apache.spark.deploy.worker.Worker"
#: the master's and the workers' own settings (``--properties-file``)
DAEMON_PROPERTIES = {"spark.master.rest.enabled": "false", "spark.port.maxRetries": "0"}


class SparkCluster:
    """A Spark standalone master with ``workers`` workers of ``worker_cores`` cores and ``worker_memory`` each,
    and a Spark Connect server that uses all of their cores; a context manager."""

    def __init__(self, work_dir: str | os.PathLike[str] | None = None, *, workers: int = 2, worker_cores: int = 1,
                 worker_memory: str = "1g", daemon_memory: str = "512m", driver_memory: str = "1g",
                 conf: dict[str, str] | None = None, startup_timeout: float = 180.0,
                 shared_workers: bool = True) -> None:
        self._own_dir = work_dir is None
        self.work_dir = Path(work_dir or tempfile.mkdtemp(prefix="spark-cluster-"))
        self.workers = workers
        self.worker_cores = worker_cores
        self.worker_memory = worker_memory
        self.daemon_memory = daemon_memory
        self.driver_memory = driver_memory
        #: extra Spark Connect server conf (over ``SparkConnectServer.executor_conf``)
        self.conf = dict(conf or {})
        self.startup_timeout = startup_timeout
        #: the Connect server's sessions share their Python workers (``SparkConnectServer(shared_workers=)``)
        self.shared_workers = shared_workers
        self.master_port: int | None = None
        self.master_web_port: int | None = None
        self.connect: SparkConnectServer | None = None
        self._master: subprocess.Popen[bytes] | None = None
        self._workers: list[subprocess.Popen[bytes]] = []
        self._worker_web_ports: list[int] = []

    @property
    def master_url(self) -> str:
        """``spark://127.0.0.1:<port>`` of the running master."""
        if self.master_port is None:
            raise RuntimeError("the Spark cluster is not running: call start() first")
        return f"spark://127.0.0.1:{self.master_port}"

    @property
    def master_web_url(self) -> str:
        """``http://127.0.0.1:<port>`` of the master's web UI (its JSON status at ``/json/``)."""
        if self.master_web_port is None:
            raise RuntimeError("the Spark cluster is not running: call start() first")
        return f"http://127.0.0.1:{self.master_web_port}"

    @property
    def url(self) -> str:
        """``sc://127.0.0.1:<port>`` of the running Spark Connect server."""
        if self.connect is None:
            raise RuntimeError("the Spark cluster is not running: call start() first")
        return self.connect.url

    @property
    def pids(self) -> dict[str, int]:
        """Process ids of the running servers: ``master``, ``worker-<i>``, ``connect``."""
        found = {"master": self._master.pid} if self._master else {}
        found.update({f"worker-{i}": worker.pid for i, worker in enumerate(self._workers)})
        if self.connect is not None and self.connect.pid is not None:
            found["connect"] = self.connect.pid
        return found

    def worker_dir(self, index: int) -> Path:
        """Worker ``index``'s work directory: its executors run in ``<dir>/<app-id>/<executor-id>``."""
        return self.work_dir / f"worker-{index}"

    def log_path(self, name: str) -> Path:
        """The log of ``master`` or ``worker-<i>`` (Connect's: ``connect.log_path``)."""
        return self.work_dir / f"{name}.log"

    def status(self) -> dict[str, Any]:
        """The master's JSON status (workers, their states, applications)."""
        with urllib.request.urlopen(f"{self.master_web_url}/json/", timeout=5) as answer:
            return dict(json.load(answer))

    def alive_workers(self) -> int:
        """How many workers the master lists ALIVE."""
        return sum(1 for worker in self.status().get("workers", []) if worker.get("state") == "ALIVE")

    def start(self, attempts: int = 3) -> str:
        """Start the master and the workers, wait until all workers are ALIVE, then start Spark Connect on the
        cluster and wait until it runs a query; returns its ``sc://`` URL."""
        start_with_retries(self._start_daemons, self._stop_daemons, "Spark standalone cluster", attempts)
        self.connect = SparkConnectServer(
            self.work_dir / "connect", cores=self.workers * self.worker_cores, driver_memory=self.driver_memory,
            master=self.master_url, startup_timeout=self.startup_timeout, shared_workers=self.shared_workers,
            conf=s3a.with_jars({"spark.scheduler.minRegisteredResourcesRatio": "1.0",
                                "spark.scheduler.maxRegisteredResourcesWaitingTime": f"{int(self.startup_timeout)}s",
                                **self.conf}))  # the s3a jars go to the executors too: they read the store
        try:
            return self.connect.start(attempts)
        except BaseException:
            self.stop()
            raise

    def environment(self) -> dict[str, str]:
        """The daemons' environment: this one, loopback, foreground, this interpreter, modest daemon heaps."""
        env = inherited_environment()
        env.update({"SPARK_HOME": spark_home(), "SPARK_LOCAL_IP": "127.0.0.1", "SPARK_NO_DAEMONIZE": "1",
                    "PYSPARK_PYTHON": sys.executable, "SPARK_DAEMON_MEMORY": self.daemon_memory,
                    "SPARK_CONF_DIR": str(self.work_dir / "conf")})
        return env

    def _spark_class(self, main_class: str, *args: str) -> list[str]:
        return [str(Path(spark_home()) / "bin" / "spark-class"), main_class, *args,
                "--properties-file", str(self.work_dir / "conf" / "spark-defaults.conf")]

    def _launch(self, name: str, command: list[str]) -> subprocess.Popen[bytes]:
        with open(self.log_path(name), "ab") as log:
            process = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                       cwd=self.work_dir, env=self.environment(), start_new_session=True)
        register(process.pid)
        return process

    def _start_daemons(self) -> None:
        conf_dir = self.work_dir / "conf"
        conf_dir.mkdir(parents=True, exist_ok=True)
        (conf_dir / "spark-defaults.conf").write_text("".join(f"{k} {v}\n" for k, v in DAEMON_PROPERTIES.items()))
        self.master_port, self.master_web_port, *self._worker_web_ports = free_ports(2 + self.workers)
        self._master = self._launch("master", self._spark_class(
            MASTER_CLASS, "--host", "127.0.0.1", "--port", str(self.master_port),
            "--webui-port", str(self.master_web_port)))
        for i, web_port in enumerate(self._worker_web_ports):
            self.worker_dir(i).mkdir(parents=True, exist_ok=True)
            self._workers.append(self._launch(f"worker-{i}", self._spark_class(
                WORKER_CLASS, self.master_url, "--host", "127.0.0.1", "--cores", str(self.worker_cores),
                "--memory", self.worker_memory, "--webui-port", str(web_port),
                "--work-dir", str(self.worker_dir(i)))))
        self._wait_alive()

    def _wait_alive(self) -> None:
        deadline = time.monotonic() + self.startup_timeout
        alive, error = 0, ""
        while alive < self.workers:
            for name, process in [("master", self._master), *((f"worker-{i}", w) for i, w in enumerate(self._workers))]:
                if process is not None and process.poll() is not None:
                    raise RuntimeError(f"Spark {name} exited with {process.returncode}; see {self.log_path(name)}")
            if time.monotonic() > deadline:
                raise TimeoutError(f"Spark master lists {alive} of {self.workers} workers ALIVE after "
                                   f"{self.startup_timeout}s ({error or 'no error'}); see {self.work_dir}/*.log")
            time.sleep(0.5)
            if not self._listening():
                error = "not every daemon listens on its ports yet"
                continue
            try:
                alive, error = self.alive_workers(), ""
            except (OSError, ValueError) as exc:  # the web UI is not up yet (or not answering JSON yet)
                error = str(exc)

    def _listening(self) -> bool:
        """Whether the master and every worker listen on the ports picked for them (:class:`PortTaken` if another
        process took one)."""
        master = self._master.pid if self._master is not None else None
        ours = ours_listening(master, [p for p in (self.master_port, self.master_web_port) if p], "Spark master")
        for i, (worker, port) in enumerate(zip(self._workers, self._worker_web_ports, strict=False)):
            ours = ours_listening(worker.pid, [port], f"Spark worker-{i}") and ours
        return ours

    def _stop_daemons(self, grace: float = 15.0) -> None:
        workers, self._workers = self._workers, []
        master, self._master = self._master, None
        for worker in workers:
            stop_tree(worker, grace)
        stop_tree(master, grace)
        self.master_port = self.master_web_port = None
        self._worker_web_ports = []

    def stop(self, grace: float = 15.0) -> None:
        """Stop Spark Connect (and whatever it spawned), the workers (with their executors), then the master."""
        connect, self.connect = self.connect, None
        if connect is not None:
            spawned = descendants(connect.pid)
            connect.stop(grace)
            finish(spawned, grace)
        self._stop_daemons(grace)

    def cleanup(self) -> None:
        """Stop everything; remove the work directory if this object created it."""
        self.stop()
        if self._own_dir:
            shutil.rmtree(self.work_dir, ignore_errors=True)

    def __enter__(self) -> SparkCluster:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.cleanup()

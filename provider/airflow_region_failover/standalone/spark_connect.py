"""A local Spark Connect server for the demo, the tests and the benchmarks (pyspark 4 bundles its jar).

Rules: the server listens on 127.0.0.1 on a port that was free when it started (retried with a new port on a
clash), runs in its own process group with its output in ``<work_dir>/spark-connect.log``, and is ready when a
client session answers a query. With ``authenticate`` (``region-failover standalone``) it accepts only clients
that present a token made at each start (Spark Connect's ``spark.connect.authenticate.token``): any other local
user could otherwise run code as the stack's user. The token reaches the server through its environment
(``SPARK_CONNECT_AUTHENTICATE_TOKEN``, never its command line, which ``ps`` shows to every user) and clients
through :attr:`SparkConnectServer.client_url` (``sc://localhost:<port>/;token=...``: pyspark sends a token only over
a channel it trusts, TLS or — for ``localhost`` — gRPC's local credentials); :attr:`SparkConnectServer.url` never
carries it, so it can be printed and logged. ``PYSPARK_PYTHON`` is the running interpreter, so Python UDFs and
``mapInArrow`` functions (the result store's executor-side I/O) import this provider on the server side.
:meth:`SparkConnectServer.stop` terminates the whole process group (the JVM) and kills it after a grace period.
"""

from __future__ import annotations

import os
import secrets
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from airflow_region_failover.standalone.processes import (
    free_ports,
    inherited_environment,
    register,
    start_with_retries,
    stop_group,
)

SERVER_CLASS = "org.apache.spark.sql.connect.service.SparkConnectServer"
TOKEN_ENV = "SPARK_CONNECT_AUTHENTICATE_TOKEN"
"""Where the server (``spark.connect.authenticate.token``'s environment variable) and pyspark's client read the
token."""


def spark_home() -> str:
    """``SPARK_HOME``: the environment's, else the installed pyspark package directory."""
    if os.environ.get("SPARK_HOME"):
        return os.environ["SPARK_HOME"]
    import pyspark

    return str(Path(pyspark.__file__).parent)


class SparkConnectServer:
    """One ``SparkConnectServer`` JVM on loopback; a context manager.

    Its master is ``local[cores]`` unless ``master`` names a cluster (``spark://127.0.0.1:7077``): then the server
    is the driver, it takes at most ``cores`` cores of the cluster in one-core, 1 GiB executors, and the executors'
    Python workers run this interpreter with this package importable and stay on loopback (``executor_conf``;
    ``conf`` overrides any of it).
    """

    def __init__(self, work_dir: str | os.PathLike[str] | None = None, *, cores: int = 2,
                 driver_memory: str = "1g", conf: dict[str, str] | None = None,
                 startup_timeout: float = 120.0, master: str | None = None, authenticate: bool = False) -> None:
        self._own_dir = work_dir is None
        self.work_dir = Path(work_dir or tempfile.mkdtemp(prefix="spark-connect-"))
        self.cores = cores
        self.driver_memory = driver_memory
        self.master = master or f"local[{cores}]"
        self.conf = {"spark.ui.enabled": "false", "spark.sql.shuffle.partitions": "4",
                     **(self.executor_conf() if master else {}), **(conf or {})}
        self.startup_timeout = startup_timeout
        self.port: int | None = None
        self.authenticate = authenticate
        self.token: str | None = None
        """The running server's token (with ``authenticate``; a new one at each start). Never logged."""
        self._process: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        """The ``sc://`` URL of the running server, without its token: ``sc://127.0.0.1:<port>``, or
        ``sc://localhost:<port>`` with ``authenticate`` (see the module rule)."""
        if self.port is None:
            raise RuntimeError("the Spark Connect server is not running: call start() first")
        return f"sc://{'localhost' if self.authenticate else '127.0.0.1'}:{self.port}"

    @property
    def client_url(self) -> str:
        """The URL a client connects with: :attr:`url` and, with ``authenticate``, ``/;token=...`` (a secret)."""
        return f"{self.url}/;token={self.token}" if self.token else self.url

    @property
    def log_path(self) -> Path:
        """Where the server's stdout and stderr go."""
        return self.work_dir / "spark-connect.log"

    @property
    def pid(self) -> int | None:
        """The server's process id while it runs."""
        return self._process.pid if self._process else None

    def __enter__(self) -> SparkConnectServer:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.cleanup()

    def start(self, attempts: int = 3) -> str:
        """Start the server and wait until it serves a session; returns its URL. New port on failure."""
        return start_with_retries(self._start_once, self.stop, "Spark Connect server", attempts)

    def command(self, port: int) -> list[str]:
        """The ``spark-submit`` command line of the server."""
        confs = [arg for key, value in sorted({**self.conf, "spark.connect.grpc.binding.port": str(port),
                                                "spark.connect.grpc.binding.address": "127.0.0.1"}.items())
                 for arg in ("--conf", f"{key}={value}")]
        return [str(Path(spark_home()) / "bin" / "spark-submit"), "--class", SERVER_CLASS,
                "--name", "region-failover Spark Connect", "--master", self.master,
                "--driver-memory", self.driver_memory, *confs, "spark-internal"]

    def executor_conf(self) -> dict[str, str]:
        """What executors on a cluster need: this interpreter for Python workers, the directory this package is
        imported from (the repository's ``provider/``) on their ``PYTHONPATH``, loopback, and their size."""
        package_root = str(Path(__file__).resolve().parents[2])
        pythonpath = os.pathsep.join(p for p in (package_root, os.environ.get("PYTHONPATH", "")) if p)
        return {"spark.executorEnv.PYSPARK_PYTHON": sys.executable, "spark.executorEnv.PYTHONPATH": pythonpath,
                "spark.executorEnv.SPARK_LOCAL_IP": "127.0.0.1", "spark.cores.max": str(self.cores),
                "spark.executor.cores": "1", "spark.executor.memory": "1g"}

    def environment(self) -> dict[str, str]:
        """The server's environment: loopback, this interpreter for Python workers, this SPARK_HOME, and the token
        (with ``authenticate``; otherwise none, even one this process inherited)."""
        env = {k: v for k, v in inherited_environment().items() if k != TOKEN_ENV}
        env.update({"SPARK_LOCAL_IP": "127.0.0.1", "SPARK_HOME": spark_home(), "PYSPARK_PYTHON": sys.executable,
                    "PYSPARK_DRIVER_PYTHON": sys.executable,
                    "PATH": os.path.dirname(sys.executable) + os.pathsep + env.get("PATH", "")})
        if self.token:
            env[TOKEN_ENV] = self.token
        return env

    def _start_once(self) -> str:
        self.work_dir.mkdir(parents=True, exist_ok=True)
        self.token = secrets.token_urlsafe(32) if self.authenticate else None
        self.port = free_ports(1)[0]
        with open(self.log_path, "ab") as log:
            self._process = subprocess.Popen(self.command(self.port), stdout=log, stderr=subprocess.STDOUT,
                                             cwd=self.work_dir, env=self.environment(), start_new_session=True)
        register(self._process.pid)
        self._wait_ready()
        return self.url

    def _wait_ready(self) -> None:
        """Poll until a client session runs a query (the gRPC port opens before the session manager is up).

        The probe runs in a child process: building a Connect session marks the whole process as a Spark Connect
        client (``SPARK_CONNECT_MODE_ENABLED`` in ``os.environ``), after which PySpark refuses classic sessions —
        the caller (a test session, the demo) may still want an embedded one.
        """
        deadline = time.monotonic() + self.startup_timeout
        while True:
            if self._process is not None and self._process.poll() is not None:
                raise RuntimeError(f"Spark Connect server exited with {self._process.returncode}; "
                                   f"see {self.log_path}")
            probe = subprocess.run([sys.executable, "-c", _PROBE, self.url], capture_output=True, text=True,
                                   timeout=max(5.0, deadline - time.monotonic()), check=False,
                                   env=self.client_environment())
            if probe.returncode == 0:
                return
            if time.monotonic() > deadline:
                raise TimeoutError(f"Spark Connect server did not serve a session within "
                                   f"{self.startup_timeout}s: {probe.stderr.strip()[-500:]}; see {self.log_path}")
            time.sleep(0.5)

    def client_environment(self) -> dict[str, str]:
        """The environment of a client process of this server: the token in :data:`TOKEN_ENV` (not on the
        command line), which pyspark sends when the URL names none."""
        env = {k: v for k, v in inherited_environment().items() if k != TOKEN_ENV}
        return {**env, TOKEN_ENV: self.token} if self.token else env

    def stop(self, grace: float = 15.0) -> None:
        """SIGTERM the server's process group; SIGKILL it if still alive after ``grace`` seconds."""
        process, self._process, self.port, self.token = self._process, None, None, None
        stop_group(process, grace)

    def cleanup(self) -> None:
        """Stop the server and remove the work directory if this object created it."""
        self.stop()
        if self._own_dir:
            shutil.rmtree(self.work_dir, ignore_errors=True)


def main() -> None:  # pragma: no cover - manual use: python -m airflow_region_failover.standalone.spark_connect
    """Start a server, print its URL, and run until interrupted."""
    with SparkConnectServer() as server:
        print(server.url, flush=True)
        try:
            while True:
                time.sleep(3600)
        except KeyboardInterrupt:
            pass


if __name__ == "__main__":  # pragma: no cover
    main()


_PROBE = """
import sys
from pyspark.sql import SparkSession
session = SparkSession.builder.remote(sys.argv[1]).create()
try:
    session.range(1).collect()
finally:
    session.stop()
"""

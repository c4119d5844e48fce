"""``region-failover standalone``: the embedded stack on a user's DAGs folder, kept up until stopped.

Like ``airflow standalone``, plus what the provider needs: a SeaweedFS S3 server for the result store and a Spark
Connect server every step task shares. Rules:

- State lives under ``--home`` (default ``./.region-failover/``): the Airflow home (SQLite metadata DB, logs, the
  admin password), the S3 data and the Spark work directory. Starting again on the same home keeps the runs,
  their history and their results; only the S3 credentials are new (the connection is rewritten each start).
- Everything listens on 127.0.0.1; ``--port`` fixes the UI/API port (default 8080, ``0`` for a free one).
- SIGTERM, SIGINT (Ctrl-C) and SIGHUP (a closed terminal) stop every process it started; if the command itself
  is killed, its guard process does (:mod:`.processes`).
"""

from __future__ import annotations

import argparse
import secrets
import sys
import time
from pathlib import Path
from typing import Any

from airflow_region_failover.exceptions import RegionFailoverError
from airflow_region_failover.standalone.airflow_stack import AirflowStack, platform_env
from airflow_region_failover.standalone.processes import stop_guarded, stop_on_signals
from airflow_region_failover.standalone.seaweedfs import SeaweedFS
from airflow_region_failover.standalone.spark_connect import SparkConnectServer
from airflow_region_failover.store import s3a

DEFAULT_HOME = Path(".region-failover")
BUCKET = "region-failover"


def _say(text: str) -> None:
    sys.stdout.write(text + "\n")
    sys.stdout.flush()


class Standalone:
    """SeaweedFS + Spark Connect + Airflow (api-server, scheduler, dag-processor; SQLite, LocalExecutor) on
    ``dags``, state under ``home``; a context manager. ``start()`` returns once the UI answers."""

    def __init__(self, dags: Path, home: Path = DEFAULT_HOME, port: int = 8080, *, spark_cores: int = 2,
                 extra_env: dict[str, str] | None = None, pythonpath: tuple[str, ...] = ()) -> None:
        self.dags = dags.resolve()
        self.home = home.resolve()
        self.port = port
        self.s3 = SeaweedFS(bucket=BUCKET, data_dir=self.home / "s3")
        self.spark = SparkConnectServer(self.home / "spark", cores=spark_cores, conf=s3a.with_jars({}))
        self.extra_env = dict(extra_env or {})
        self.pythonpath = pythonpath
        self.airflow: AirflowStack | None = None
        self.endpoint: Any = None

    def check(self) -> None:
        """Bad input, named with its fix, before anything starts."""
        if not self.dags.is_dir():
            raise RegionFailoverError(f"--dags {self.dags}: no such directory (give the folder holding your DAG "
                                      "files, e.g. --dags ./dags)")

    def start(self) -> Standalone:
        """Start S3, Spark Connect and Airflow, in that order; on any failure stop what already runs."""
        self.check()
        self.home.mkdir(parents=True, exist_ok=True)
        try:
            _say(f"Starting SeaweedFS (S3), data in {self.s3.data_dir} ...")
            self.endpoint = self.s3.start()
            _say(f"Starting a Spark Connect server (local[{self.spark.cores}]) ...")
            spark_url = self.spark.start()
            _say(f"Starting Airflow 3 on {self.dags} (SQLite, LocalExecutor), home {self.home / 'airflow'} ...")
            self.airflow = AirflowStack(
                dags_folder=self.dags, home=self.home / "airflow", port=self.port, password=self._password(),
                extra_env={**platform_env(self.endpoint, spark_url), **self.extra_env}, pythonpath=self.pythonpath)
            self.airflow.start()
        except BaseException:
            self.stop()
            raise
        return self

    def _password(self) -> str:
        """The admin password, kept in the home so a restart keeps the log-in."""
        path = self.home / "admin-password"
        if not path.exists():
            path.write_text(secrets.token_urlsafe(12))
            path.chmod(0o600)
        return path.read_text().strip()

    def stop(self) -> None:
        """Stop Airflow, Spark and S3 (each one's whole process tree)."""
        if self.airflow is not None:
            self.airflow.stop()
        self.spark.stop()
        self.s3.stop()

    def __enter__(self) -> Standalone:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


def standalone_command(args: argparse.Namespace) -> int:
    """Run the stack until SIGTERM/SIGINT/SIGHUP; print the UI address and the admin log-in first."""
    stack = Standalone(args.dags, args.home, args.port)
    stack.check()
    stop_on_signals()
    try:
        stack.start()
        assert stack.airflow is not None
        _say(f"\nregion-failover standalone is up: {stack.airflow.url}   user: {stack.airflow.username}   "
             f"password: {stack.airflow.password}\nDAGs: {stack.dags}   state: {stack.home}   "
             "(Ctrl-C or SIGTERM stops everything)")
        while True:
            time.sleep(3600)
    except KeyboardInterrupt:
        _say("Stopping ...")
        return 0
    finally:
        stack.stop()
        stop_guarded()  # and anything else this process started (a task process, a JVM that left its tree)

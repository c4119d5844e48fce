"""``region-failover standalone``: the embedded stack on a user's DAGs folder, kept up until stopped.

Like ``airflow standalone``, plus what the provider needs: a SeaweedFS S3 server for the result store and a Spark
Connect server every step task shares. Rules:

- State lives under ``--home`` (default ``./.region-failover/``): the Airflow home (SQLite metadata DB, logs, the
  admin password), the S3 data and the Spark work directory. Starting again on the same home keeps the runs,
  their history and their results; only the S3 credentials are new (the connection is rewritten each start).
- Everything listens on 127.0.0.1; ``--port`` fixes the UI/API port (default 8080, ``0`` for a free one).
- **Settings**: like ``airflow standalone``, it honours the ``AIRFLOW__...`` variables exported to it (including
  ``AIRFLOW__REGION_FAILOVER__...``): they reach every Airflow component and override the stack's own defaults
  (and ``<home>/airflow/airflow.cfg``, as environment variables always do in Airflow); an exported
  ``store_bucket`` is the bucket the embedded S3 serves. The few settings its flags decide
  (:data:`~.airflow_stack.WIRING`) are kept, and it names each one it ignored and why. It prints names, never
  values (a value may be a secret).
- **Secrets**: the home is created 0700 (an existing one, and its folders, narrowed to 0700 at start) and every secret
  file in it is 0600 from its first byte (:mod:`.secret_files`); the Spark Connect server accepts only clients holding
  its token (new at each start, carried by the ``region_failover_spark`` connection). The way to the embedded S3 is
  printed at start — endpoint, bucket, prefix, where published Delta tables go — and its keys (a throw-away pair, new at
  each start, valid only on loopback while the stack runs) are written to ``<home>/s3.env`` (0600) as ``AWS_*``
  variables, not printed: unlike the admin password, which one needs to read to log in (as ``airflow standalone`` prints
  its own), a key on the terminal ends up in scroll-back and in whatever captures the command's output.
- SIGTERM, SIGINT (Ctrl-C) and SIGHUP (a closed terminal) stop every process it started; if the command itself
  is killed, its guard process does (:mod:`.processes`).
"""

from __future__ import annotations

import argparse
import os
import secrets
import sys
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from airflow_region_failover import conf
from airflow_region_failover.exceptions import RegionFailoverError
from airflow_region_failover.publication.declaration import default_root
from airflow_region_failover.standalone.airflow_stack import WIRING, AirflowStack
from airflow_region_failover.standalone.platform import platform_env
from airflow_region_failover.standalone.processes import stop_guarded, stop_on_signals
from airflow_region_failover.standalone.seaweedfs import SeaweedFS, weed_binary
from airflow_region_failover.standalone.secret_files import kept_secret, private_dir, write_secret
from airflow_region_failover.standalone.spark_connect import SparkConnectServer
from airflow_region_failover.store.dataplane import s3a

DEFAULT_HOME = Path(".region-failover")
PRIVATE_FOLDERS = ("airflow", "s3", "spark")
"""The home's folders that hold secrets or data (the SQLite DB, logs, passwords; the S3 volumes; Spark's work):
0700, like the home (:func:`~.secret_files.private_dir`)."""
BUCKET = "region-failover"
SECTION_ENV = f"AIRFLOW__{conf.SECTION.upper()}__"


def exported_settings(environ: Mapping[str, str]) -> tuple[dict[str, str], dict[str, str]]:
    """The ``AIRFLOW__...`` variables of ``environ``: those the stack honours, and those it cannot (name -> what
    decides it instead; module rule)."""
    exported = {k: v for k, v in environ.items() if k.startswith("AIRFLOW__")}
    return ({k: v for k, v in exported.items() if k not in WIRING},
            {k: WIRING[k] for k in sorted(exported) if k in WIRING})


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
        self.settings, self.ignored = exported_settings(os.environ)
        self.s3 = SeaweedFS(bucket=self._setting("store_bucket") or BUCKET, data_dir=self.home / "s3")
        self.spark = SparkConnectServer(self.home / "spark", cores=spark_cores, authenticate=True,
                                        conf=s3a.with_jars({}))
        self.extra_env = dict(extra_env or {})
        self.pythonpath = pythonpath
        self.airflow: AirflowStack | None = None
        self.endpoint: Any = None

    def check(self) -> None:
        """Bad input, named with its fix, before anything starts."""
        if not self.dags.is_dir():
            raise RegionFailoverError(f"--dags {self.dags}: no such directory (give the folder holding your DAG "
                                      "files, e.g. --dags ./dags)")
        weed_binary()  # the standalone extra: ExtraNotInstalled naming it

    def start(self) -> Standalone:
        """Start S3, Spark Connect and Airflow, in that order; on any failure stop what already runs."""
        self.check()
        private_dir(self.home, PRIVATE_FOLDERS, _say)
        self._say_settings()
        try:
            _say(f"Starting SeaweedFS (S3), data in {self.s3.data_dir} ...")
            self.endpoint = self.s3.start()
            write_secret(self.s3_env, "".join(f"{k}={v}\n" for k, v in self.endpoint.client_environment().items()))
            _say(f"Starting a Spark Connect server (local[{self.spark.cores}], token required) ...")
            spark_url = self.spark.start()
            _say(f"Starting Airflow 3 on {self.dags} (SQLite, LocalExecutor), home {self.home / 'airflow'} ...")
            wiring = platform_env(self.endpoint, spark_url, spark_token=self.spark.token)
            self.airflow = AirflowStack(
                dags_folder=self.dags, home=self.home / "airflow", port=self.port, password=self._password(),
                extra_env={**wiring, **self.extra_env, **self.settings}, pythonpath=self.pythonpath)
            self.airflow.start()
        except BaseException:
            self.stop()
            raise
        _say(self.store_text())
        return self

    @property
    def s3_env(self) -> Path:
        """``<home>/s3.env``: the ``AWS_*`` variables that reach the embedded S3 (0600; new at each start)."""
        return self.home / "s3.env"

    def _setting(self, option: str) -> str | None:
        """An exported ``AIRFLOW__REGION_FAILOVER__<OPTION>`` (``None``: not exported, or empty)."""
        return self.settings.get(SECTION_ENV + option.upper()) or None

    def _say_settings(self) -> None:
        if self.settings:
            _say(f"Honouring the exported settings {', '.join(sorted(self.settings))} (over the stack's defaults "
                 "and airflow.cfg)")
        for name, why in self.ignored.items():
            _say(f"Ignoring the exported {name}: {why}")

    def store_text(self) -> str:
        """How to reach the result store from outside the stack (module rule: no secret in it)."""
        prefix = self._setting("store_prefix") or conf.declared_default("store_prefix")
        tables = self._setting("publish_root") or default_root(self.endpoint.bucket, prefix)
        return (f"Result store (S3, SeaweedFS): endpoint {self.endpoint.endpoint_url}   bucket "
                f"{self.endpoint.bucket}   prefix {prefix}\nPublished Delta tables: {tables}/<table>\n"
                f"S3 keys (new at each start): {self.s3_env} (0600) — to read a table from outside the stack: "
                f"set -a; . {self.s3_env}; set +a   then boto3, the AWS CLI or deltalake reach it")

    def _password(self) -> str:
        """The admin password, kept in the home (0600) so a restart keeps the log-in."""
        return kept_secret(self.home / "admin-password", lambda: secrets.token_urlsafe(12))

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

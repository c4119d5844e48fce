"""A Spark Connect server whose sessions share their Python workers.

``python -m airflow_region_failover.standalone.connect_server --port 15002 [--host H] [--master M] [--name N]
[--conf key=value ...]``

Rule: Spark keeps one Python daemon per executor for each distinct worker environment, with the pool of idle
workers it forks, and Spark Connect's stock server (``SparkConnectServer``, ``start-connect-server.sh``) switches
artifact isolation on for every session, which puts the session's id into that environment
(``SPARK_JOB_ARTIFACT_UUID``). So every session — every step task — gets a daemon of its own on each executor and
starts its Python workers anew (an interpreter, pyarrow, boto3, this provider: seconds per Spark task), and on a
long-lived server each session's daemon and idle workers stay until the executor ends (Spark 4.3 stops none). This
is the same Spark Connect service, started as a plugin of a PySpark driver
(``spark.plugins=org.apache.spark.sql.connect.SparkConnectPlugin``) with ``spark.sql.artifact.isolation.enabled``
off: every session's Python UDFs and ``mapInArrow`` functions run in the one daemon per executor and reuse its idle
workers (``spark.python.worker.reuse``, Spark's default). Sessions keep their own configuration, temporary views and
state; what they no longer isolate are artifacts a client adds with ``addArtifacts`` (then visible to every
session), which step tasks never add. The driver runs until SIGTERM or SIGINT, then stops its session.

A step task that dies (a killed worker, a cleared task) leaves its Spark job running on the server, detached from
any client; Spark Connect interrupts a detached operation only after ``detachedTimeout`` (5 minutes by default),
while the restarted try competes with it for the executors. This server interrupts it after 30 s
(:data:`ORPHANS`; a live client re-attaches within milliseconds when the server ends a stream, every
``senderMaxStreamDuration``); ``--conf`` may set other values.
"""

from __future__ import annotations

import argparse
import signal
import sys
import threading
from collections.abc import Sequence
from typing import Any

PLUGIN = "org.apache.spark.sql.connect.SparkConnectPlugin"
SHARED_WORKERS = {"spark.plugins": PLUGIN, "spark.sql.artifact.isolation.enabled": "false"}
"""What makes a Spark Connect server's sessions share their Python workers (module rule)."""
ORPHANS = {"spark.connect.execute.manager.detachedTimeout": "30s",
           "spark.connect.execute.manager.maintenanceInterval": "5s"}
"""How soon a Spark job whose client is gone is interrupted (module rule)."""
READY = "region-failover Spark Connect server ready"


def conf_of(port: int, host: str, extra: Sequence[str]) -> dict[str, str]:
    """The driver's Spark configuration: the gRPC binding and :data:`ORPHANS`, ``extra`` (``key=value``) over them,
    then :data:`SHARED_WORKERS` (which ``extra`` cannot undo: it is what this server is for)."""
    conf = {"spark.connect.grpc.binding.port": str(port), "spark.connect.grpc.binding.address": host, **ORPHANS}
    for item in extra:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise SystemExit(f"--conf {item!r}: write key=value")
        conf[key] = value
    return {**conf, **SHARED_WORKERS}


def build(master: str, name: str, conf: dict[str, str]) -> Any:
    """The driver's session (its JVM serves Spark Connect)."""
    from pyspark.sql import SparkSession

    builder = SparkSession.builder.master(master).appName(name)
    for key, value in conf.items():
        builder = builder.config(key, value)
    return builder.getOrCreate()


def main(argv: Sequence[str] | None = None) -> int:
    """Start the server, say so on stdout, serve until SIGTERM/SIGINT."""
    parser = argparse.ArgumentParser(prog="python -m airflow_region_failover.standalone.connect_server",
                                     description=__doc__.split("\n\n")[0])
    parser.add_argument("--port", type=int, default=15002, help="gRPC port (default 15002)")
    parser.add_argument("--host", default="127.0.0.1", help="address to bind (default 127.0.0.1)")
    parser.add_argument("--master", default="local[*]", help="Spark master (default local[*])")
    parser.add_argument("--name", default="region-failover Spark Connect", help="application name")
    parser.add_argument("--conf", action="append", default=[], help="key=value, repeatable")
    args = parser.parse_args(argv)
    stop = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: stop.set())
    spark = build(args.master, args.name, conf_of(args.port, args.host, args.conf))
    try:
        print(READY, flush=True)
        stop.wait()
    finally:
        spark.stop()
    return 0


if __name__ == "__main__":  # pragma: no cover - the server's process
    sys.exit(main())

"""Where a step runs: resolve an Airflow connection into a :class:`SparkTarget` and get a SparkSession for it.

Rules (connection types of the apache-spark provider):

* no connection (step and ``[region_failover] spark_conn_id`` empty): an **embedded** session on
  ``[region_failover] spark_master`` (``local[*]``), one JVM per worker process, reused by every step it runs; its
  classpath has the jars of this environment's ``jars/`` (hadoop-aws for the result store's ``s3a://`` reads,
  :func:`~airflow_region_failover.store.dataplane.s3a.with_jars`) unless ``spark_conf`` names jars or packages itself;
* a ``spark_connect`` connection: a **Spark Connect** session on ``sc://host:port`` (URL built by the provider's
  ``SparkConnectHook``): no JVM in the worker, so a task starts in about a second;
* a ``spark`` connection: its master URL (``spark://…``, ``yarn``, ``local[*]``…) for Python steps (the worker is
  the client-mode driver); script steps are spark-submitted through ``SparkSubmitHook`` (:mod:`.submit`).

Any other connection type is an error naming the connection and the types accepted. Sessions are cached per
process and target (a stopped one is rebuilt on the next request).

A Spark Connect server that does not answer fails the try at once (:func:`probe`): before a session is built its
``host:port`` must accept a TCP connection and answer HTTP/2's preface (as gRPC servers do) within
:data:`CONNECT_TIMEOUT_S` each, else :class:`SparkUnreachable` names the URL (without its parameters: they may hold a
token) and the connection. pyspark's own retry policy would wait
about ten minutes per try before saying anything.
"""

from __future__ import annotations

import os
import socket
import sys
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from airflow_region_failover import conf
from airflow_region_failover.exceptions import OptionError, SparkUnreachable
from airflow_region_failover.process_cache import per_process
from airflow_region_failover.store.dataplane import s3a

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

EMBEDDED, CONNECT, CLUSTER = "embedded", "connect", "cluster"
CONNECT_TIMEOUT_S = 10.0
"""How long the Spark Connect server has to accept a TCP connection before the try fails (:func:`probe`)."""
DEFAULT_CONNECT_PORT = 15002
H2_PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n" + bytes.fromhex("000000040000000000")
"""HTTP/2's client connection preface and an empty SETTINGS frame: what a gRPC client sends first (RFC 9113 3.4)."""
H2_SETTINGS = 0x4
"""The frame type of the SETTINGS frame a gRPC (HTTP/2) server answers the preface with."""
"""Spark Connect's port when an ``sc://`` URL names none (Spark's own default)."""


@dataclass(frozen=True)
class SparkTarget:
    """A place to run Spark: ``mode`` (embedded / connect / cluster), its ``url`` (master or ``sc://``), the
    connection it came from, and extra Spark ``conf`` (sorted pairs, so targets are hashable)."""

    mode: str
    url: str
    conn_id: str | None = None
    conf: tuple[tuple[str, str], ...] = ()

    @property
    def is_local(self) -> bool:
        """Whether the session's driver runs a ``local`` master inside this process."""
        return self.mode != CONNECT and self.url.startswith("local")


def default_conf() -> tuple[tuple[str, str], ...]:
    """``[region_failover] spark_conf`` as sorted pairs; :class:`OptionError` naming the option if not JSON."""
    return tuple(sorted(conf.spark_conf().items()))


def resolve_target(conn_id: str | None = None) -> SparkTarget:
    """The target for ``conn_id`` (or ``[region_failover] spark_conn_id``; empty means embedded)."""
    conn_id = conn_id or conf.spark_conn_id()
    spark_conf = default_conf()
    if conn_id is None:
        return SparkTarget(EMBEDDED, conf.spark_master(), None, spark_conf)
    conn = conf.connection(conn_id)
    if conn.conn_type == "spark_connect":
        from airflow.providers.apache.spark.hooks.spark_connect import SparkConnectHook

        return SparkTarget(CONNECT, SparkConnectHook(conn_id).get_connection_url(), conn_id, spark_conf)
    if conn.conn_type == "spark":
        return SparkTarget(CLUSTER, _master_url(conn), conn_id, spark_conf)
    raise OptionError(
        f"connection {conn_id!r} has type {conn.conn_type!r}; use a 'spark_connect' connection (Spark Connect) or a "
        "'spark' connection (master URL / spark-submit), or leave spark_conn_id empty for embedded Spark"
    )


def _master_url(conn: Any) -> str:
    """The master URL of a ``spark`` connection, as ``SparkSubmitHook`` builds it."""
    host = str(conn.host or "local[*]")
    if conn.port and "://" in host:
        return f"{host}:{conn.port}"
    if conn.port:
        return f"spark://{host}:{conn.port}"
    return host


def get_session(target: SparkTarget) -> SparkSession:
    """A (cached) SparkSession for ``target``; a cached session that was stopped is replaced."""
    session = _session(target)
    if not _alive(session):
        _session.cache_clear()
        session = _session(target)
    return session


@per_process()
def _session(target: SparkTarget) -> SparkSession:
    return _build(target)


def _build(target: SparkTarget) -> SparkSession:
    from pyspark.sql import SparkSession

    if target.mode == CONNECT:
        probe(target)
        return SparkSession.builder.remote(target.url).getOrCreate()
    if target.is_local:
        os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
        # Python workers must import this provider (the store's executor-side I/O): use this interpreter.
        os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    builder = SparkSession.builder.master(target.url).appName("airflow-region-failover")
    for key, value in s3a.with_jars(dict(target.conf)).items():
        builder = builder.config(key, value)
    return builder.getOrCreate()


def connect_address(url: str) -> tuple[str, int]:
    """``(host, port)`` of an ``sc://host[:port][/;params]`` URL (port :data:`DEFAULT_CONNECT_PORT` if none)."""
    netloc = url.split("://", 1)[-1].split("/", 1)[0].split(";", 1)[0]
    if netloc.startswith("["):  # [IPv6]:port
        host, _, rest = netloc[1:].partition("]")
        port = rest.lstrip(":")
    else:
        host, _, port = netloc.rpartition(":") if ":" in netloc else (netloc, "", "")
    return host, int(port) if port.isdigit() else DEFAULT_CONNECT_PORT


def probe(target: SparkTarget, timeout_s: float = CONNECT_TIMEOUT_S) -> None:
    """:class:`SparkUnreachable` naming the URL and the connection unless the Spark Connect server of ``target``
    accepts a TCP connection within ``timeout_s`` and — on a plaintext URL — answers HTTP/2's connection preface
    with its SETTINGS frame within ``timeout_s`` as every gRPC server does (module rule). A TLS URL
    (``use_ssl=true``) is checked to the TCP connection only."""
    host, port = connect_address(target.url)
    via = f"connection {target.conn_id!r}" if target.conn_id else "the Spark Connect URL"
    fix = f"start the server or fix the host/port of {via} (airflow connections get {target.conn_id or '<conn_id>'})"
    try:
        with socket.create_connection((host, port), timeout=timeout_s) as conn:
            if "use_ssl=true" in target.url.lower():
                return
            conn.sendall(H2_PREFACE)
            answer = conn.recv(9)
    except OSError as exc:
        reason = f"no answer within {timeout_s:.0f} s" if isinstance(exc, TimeoutError) else (exc.strerror or str(exc))
        raise SparkUnreachable(f"Spark Connect server sc://{host}:{port} ({via}) does not answer: {reason}; "
                               f"{fix}") from None
    if len(answer) < 4 or answer[3] != H2_SETTINGS:
        raise SparkUnreachable(f"sc://{host}:{port} ({via}) is not a Spark Connect (gRPC) server: it "
                               f"{'closed the connection' if not answer else 'answered something else'}; {fix}")


def _alive(session: SparkSession) -> bool:
    """Whether a cached session can still be used (a stopped classic session cannot)."""
    try:
        context = session.__dict__.get("_sc")
        return context is None or getattr(context, "_jsc", None) is not None
    except Exception:
        return False

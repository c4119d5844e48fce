"""Client and configuration: where the store lives and how it reaches S3.

Rules: bucket and prefix come from configuration (``[region_failover] store_bucket`` / ``store_prefix``, or
arguments). Credentials come from an Airflow ``aws`` connection through the amazon provider's ``S3Hook``: the
process's client is built from the hook's session, whose credentials object refreshes itself (instance roles,
IRSA, ``role_arn``: botocore's refreshable credentials), so a long-lived process (the scheduler's watcher, the
API server's history view) keeps working past the first expiry. Whatever leaves the process — the access shipped
to Spark executors, the environment of a spark-submitted script — carries credentials frozen at that moment
(:func:`portable`): a Spark task or script must finish within their remaining lifetime (with botocore's refresh
windows at least ~10 minutes, typically an hour for STS). Tests, the CLI and :meth:`ResultStore.from_endpoint`
pass static credentials; without either, boto3's default chain applies. Secrets are never part of a ``repr`` or a
log line. A boto3 client is created once per process and :class:`S3Access` and reused (creating one costs
~0.5 s; a forked child builds its own, :mod:`~airflow_region_failover.process_cache`); retries and timeouts
are bounded so an unreachable server yields :class:`~airflow_region_failover.exceptions.StoreUnreachable`
quickly.
"""

from __future__ import annotations

import dataclasses
import weakref
from dataclasses import dataclass, field
from typing import Any

from airflow_region_failover import conf
from airflow_region_failover.process_cache import per_process
from airflow_region_failover.store.content import MIN_GRACE_SECONDS
from airflow_region_failover.store.keys import Layout
from airflow_region_failover.store.lifecycle import Retention

DEFAULT_PREFIX = conf.declared_default("store_prefix")
DEFAULT_CONN_ID = conf.declared_default("store_aws_conn_id")
MiB = 1024 * 1024
MAX_OBJECT_BYTES = 64 * MiB
"""The default size of a content-addressed object (``StoreConfig.max_object_bytes``). Why 64 MiB, not the 16 it
was: Spark's writer cuts a file at a row count from Spark's estimate of a row (:mod:`.local_write`), several times
the Parquet bytes (the demo's line items: 16 B estimated, ~5 B stored), so 16 MiB gave ~5 MB objects; at ~5 GB a
consuming task's inputs were then ~25-65 objects each, HEADed by the store and listed again by Spark (2.7 s of a
join's set-up, 3.5-5.1 s of an aggregate's), and the same rows took 11 % more bytes in them. With 64 MiB: 1.5 s and
2.0-2.6 s, 11 % fewer bytes committed (1.61 -> 1.44 GB), the S3 server's CPU 31.8 -> 24.7 s (``benchmarks/notes/``,
"64 MiB objects"). Still one PUT each (``content.SINGLE_PUT_BYTES``). Memory: the Python path holds at most two
objects per writing Spark task (:mod:`.parquet`) and ``upload_threads`` per reading one (:mod:`.reading`); the
driver holds ``upload_threads`` of Spark's files while it uploads them (:mod:`.local_write`)."""


@dataclass(frozen=True)
class S3Credentials:
    """Static credentials; none of them appears in ``repr``."""

    access_key: str = field(repr=False)
    secret_key: str = field(repr=False)
    session_token: str | None = field(default=None, repr=False)


@dataclass(frozen=True)
class S3Access:
    """Everything needed to build a client anywhere (driver or Spark executor): picklable, secrets hidden.

    ``conn_id``: the Airflow ``aws`` connection whose hook session (refreshable credentials) signs this process's
    requests; it only works where that connection can be read, so executors get :func:`portable` access instead.
    """

    endpoint_url: str | None = None
    region: str = "us-east-1"
    credentials: S3Credentials | None = field(default=None, repr=False)
    max_attempts: int = 4
    connect_timeout: float = 5.0
    read_timeout: float = 60.0
    max_pool_connections: int = 16
    conn_id: str | None = None

    def client_kwargs(self) -> dict[str, Any]:
        """Keyword arguments for ``boto3.client("s3", ...)`` (path-style addressing for custom endpoints)."""
        from botocore.config import Config

        config = Config(
            retries={"max_attempts": self.max_attempts, "mode": "standard"},
            connect_timeout=self.connect_timeout,
            read_timeout=self.read_timeout,
            max_pool_connections=self.max_pool_connections,
            s3={"addressing_style": "path"} if self.endpoint_url else {},
        )
        kwargs: dict[str, Any] = {"region_name": self.region, "config": config}
        if self.endpoint_url:
            kwargs["endpoint_url"] = self.endpoint_url
        if self.credentials:
            kwargs["aws_access_key_id"] = self.credentials.access_key
            kwargs["aws_secret_access_key"] = self.credentials.secret_key
            kwargs["aws_session_token"] = self.credentials.session_token
        return kwargs


@dataclass(frozen=True)
class StoreConfig:
    """Where results live (``bucket``/``prefix``), how to reach S3 (``access``), and I/O tuning.

    ``part_size``: multipart part size; ``upload_threads``: parts in flight per object; ``verify_on_read``:
    check every object's size and SHA-256 when reading; ``spark_io``: ``"executors"`` (each Spark task uploads
    its partition) or ``"driver"`` (collect Arrow to the driver, upload from there); ``jvm_io``: whether reads in
    ``executors`` mode may use Spark's own Parquet reader through ``s3a://`` (``auto``, ``cluster``, ``off``:
    :class:`.s3a.Mode`), and whether its writes may use Spark's own Parquet writer to the driver's disk (not
    ``off``: :mod:`.local_write`); ``max_object_bytes``: a Spark task's output is cut into content-addressed
    objects of about this many bytes (:data:`MAX_OBJECT_BYTES`; each is held in memory while it is encoded and
    hashed); ``min_grace_seconds``: the grace floor of every sweeper of this store, which writers rely on when they
    list objects already there (:mod:`.content`).
    """

    bucket: str
    prefix: str = DEFAULT_PREFIX
    access: S3Access = field(default_factory=S3Access)
    part_size: int = 16 * MiB
    upload_threads: int = 4
    verify_on_read: bool = True
    spark_io: str = "executors"
    jvm_io: str = "auto"
    max_object_bytes: int = MAX_OBJECT_BYTES
    min_grace_seconds: float = MIN_GRACE_SECONDS

    def __post_init__(self) -> None:
        Layout(self.bucket, self.prefix)  # validates bucket and prefix, naming the offender
        if self.part_size < 5 * MiB:
            raise ValueError(f"part_size {self.part_size} must be at least 5 MiB (S3's minimum part size)")
        if self.upload_threads < 1:
            raise ValueError(f"upload_threads {self.upload_threads} must be >= 1")
        if self.spark_io not in {"executors", "driver"}:
            raise ValueError(f"spark_io {self.spark_io!r} must be 'executors' or 'driver'")
        if self.jvm_io not in conf.JVM_IO_MODES:
            raise ValueError(f"jvm_io {self.jvm_io!r} must be one of {', '.join(conf.JVM_IO_MODES)}")
        if self.max_object_bytes < MiB:
            raise ValueError(f"max_object_bytes {self.max_object_bytes} must be at least 1 MiB")
        if not self.min_grace_seconds > 0:
            raise ValueError(f"min_grace_seconds {self.min_grace_seconds} must be > 0")

    @property
    def layout(self) -> Layout:
        """The key layout of this configuration."""
        return Layout(self.bucket, self.prefix)


def access_from_airflow(conn_id: str = DEFAULT_CONN_ID, **tuning: Any) -> S3Access:
    """Resolve an Airflow ``aws`` connection into :class:`S3Access`: endpoint and region from the connection,
    credentials from its hook session when a client is built (:func:`client_for`), never copied here."""
    from airflow.providers.amazon.aws.hooks.s3 import S3Hook

    hook = S3Hook(aws_conn_id=conn_id)
    session = hook.get_session()
    endpoint = hook.conn_config.get_service_endpoint_url("s3")
    region = session.region_name or hook.conn_config.region_name or "us-east-1"
    return S3Access(endpoint_url=endpoint, region=region, conn_id=conn_id, **tuning)


def config_from_airflow(**overrides: Any) -> StoreConfig:
    """Build a :class:`StoreConfig` from ``[region_failover]`` and the named aws connection: ``store_bucket``
    (required), ``store_prefix``, ``store_aws_conn_id``, ``store_spark_io``, ``store_jvm_io`` (their getters in
    :mod:`..conf`).
    ``overrides`` replace fields of the result. A bad value is an ``OptionError`` naming the option.
    """
    values: dict[str, Any] = {"prefix": conf.store_prefix(), "spark_io": conf.store_spark_io(),
                              "jvm_io": conf.store_jvm_io()}
    if "bucket" not in overrides:
        values["bucket"] = conf.store_bucket()
    if "access" not in overrides:
        values["access"] = access_from_airflow(conf.store_aws_conn_id())
    values.update(overrides)
    return StoreConfig(**values)


_SESSIONS: weakref.WeakKeyDictionary[Any, Any] = weakref.WeakKeyDictionary()  # client -> the session it came from


@per_process(maxsize=64)
def client_for(access: S3Access) -> Any:
    """The process-wide boto3 S3 client for ``access`` (created once, reused; boto3 clients are thread-safe).

    With ``access.conn_id`` the client comes from the connection's ``S3Hook`` session and signs every request with
    that session's (refreshing) credentials; otherwise from a plain boto3 session (static or default-chain
    credentials). Bounded: executors see one access per write, each with other frozen credentials.
    """
    import boto3

    if access.conn_id is not None:
        from airflow.providers.amazon.aws.hooks.s3 import S3Hook

        session = S3Hook(aws_conn_id=access.conn_id).get_session()
    else:
        session = boto3.session.Session()
    client = session.client("s3", **access.client_kwargs())
    _SESSIONS[client] = session
    return client


def portable(access: S3Access) -> S3Access:
    """``access`` as it may leave this process (to a Spark executor or a spark-submitted script): the current
    credentials of its connection's session frozen into it (refreshed first if they are about to expire)."""
    if access.conn_id is None:
        return access
    credentials = _SESSIONS[client_for(access)].get_credentials()
    frozen = None
    if credentials is not None:
        current = credentials.get_frozen_credentials()
        frozen = S3Credentials(current.access_key, current.secret_key, current.token)
    return dataclasses.replace(access, credentials=frozen, conn_id=None)


def retention_from_airflow() -> Retention | None:
    """``[region_failover] store_keep_last_runs`` / ``store_keep_days`` (``None`` when neither is set)."""
    runs, days = conf.store_keep_last_runs(), conf.store_keep_days()
    return None if runs is None and days is None else Retention(runs, days)

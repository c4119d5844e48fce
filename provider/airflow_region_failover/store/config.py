"""Configuration: where the store lives, how it reaches S3 (:mod:`.s3.clients`), its I/O tuning, and how long
runs are kept (:class:`Retention`, applied by :mod:`.gc.lifecycle`).

Rules: bucket and prefix come from configuration (``[region_failover] store_bucket`` / ``store_prefix``, or
arguments); the access from the named ``aws`` connection (:func:`.s3.clients.access_from_airflow`). Every field
is checked when the configuration is built, naming the offender.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

from airflow_region_failover import conf
from airflow_region_failover.store.content import MIN_GRACE_SECONDS
from airflow_region_failover.store.keys import Layout
from airflow_region_failover.store.s3.clients import S3Access, access_from_airflow

DEFAULT_PREFIX = conf.declared_default("store_prefix")
MiB = 1024 * 1024
MAX_OBJECT_BYTES = 64 * MiB
"""The default size of a content-addressed object (``StoreConfig.max_object_bytes``). Why 64 MiB, not the 16 it
was: Spark's writer cuts a file at a row count from Spark's estimate of a row (:mod:`.dataplane.local_write`), several
times the Parquet bytes (the demo's line items: 16 B estimated, ~5 B stored), so 16 MiB gave ~5 MB objects; at ~5 GB a
consuming task's inputs were then ~25-65 objects each, HEADed by the store and listed again by Spark (2.7 s of a
join's set-up, 3.5-5.1 s of an aggregate's), and the same rows took 11 % more bytes in them. With 64 MiB: 1.5 s and
2.0-2.6 s, 11 % fewer bytes committed (1.61 -> 1.44 GB), the S3 server's CPU 31.8 -> 24.7 s (``benchmarks/notes/``,
"64 MiB objects"). Still one PUT each (``content.SINGLE_PUT_BYTES``). Memory: the Python path holds at most two
objects per writing Spark task (:mod:`.dataplane.parquet`) and ``upload_threads`` per reading one
(:mod:`.dataplane.reading`); the driver holds ``upload_threads`` of Spark's files while it uploads them
(:mod:`.dataplane.local_write`)."""


@dataclass(frozen=True)
class StoreConfig:
    """Where results live (``bucket``/``prefix``), how to reach S3 (``access``), and I/O tuning.

    ``part_size``: multipart part size; ``upload_threads``: parts in flight per object; ``verify_on_read``:
    check every object's size and SHA-256 when reading; ``spark_io``: ``"executors"`` (each Spark task uploads
    its partition) or ``"driver"`` (collect Arrow to the driver, upload from there); ``jvm_io``: whether reads in
    ``executors`` mode may use Spark's own Parquet reader through ``s3a://`` (``auto``, ``cluster``, ``off``:
    :class:`.dataplane.s3a.Mode`), and whether its writes may use Spark's own Parquet writer to the driver's disk (not
    ``off``: :mod:`.dataplane.local_write`); ``max_object_bytes``: a Spark task's output is cut into content-addressed
    objects of about this many bytes (:data:`MAX_OBJECT_BYTES`; each is held in memory while it is encoded and
    hashed); ``min_grace_seconds``: the grace floor of every sweeper of this store, which writers rely on when they
    list objects already there (:mod:`.content`) and whose quarter is their heartbeat's interval
    (:class:`.gc.lifecycle.Heartbeat`); ``verify_jvm_reads``: also hash every object Spark's own reader
    reads, in a thread, before what it computed is committed (:func:`.dataplane.reading.jvm_read`).
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
    verify_jvm_reads: bool = False

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


@dataclass(frozen=True)
class Retention:
    """Keep the newest ``keep_last_runs`` runs and runs younger than ``keep_days`` (``None``: no such rule)."""

    keep_last_runs: int | None = None
    keep_days: float | None = None

    def __post_init__(self) -> None:
        if self.keep_last_runs is not None and self.keep_last_runs < 0:
            raise ValueError(f"keep_last_runs {self.keep_last_runs} must be >= 0")
        if self.keep_days is not None and not (math.isfinite(self.keep_days) and self.keep_days >= 0):
            raise ValueError(f"keep_days {self.keep_days} must be a finite number of days >= 0")


def config_from_airflow(**overrides: Any) -> StoreConfig:
    """Build a :class:`StoreConfig` from ``[region_failover]`` and the named aws connection: ``store_bucket``
    (required), ``store_prefix``, ``store_aws_conn_id``, ``store_spark_io``, ``store_jvm_io``,
    ``store_verify_jvm_reads``, ``store_min_grace_seconds`` (their getters in
    :mod:`~airflow_region_failover.conf`).
    ``overrides`` replace fields of the result. A bad value is an ``OptionError`` naming the option.
    """
    values: dict[str, Any] = {"prefix": conf.store_prefix(), "spark_io": conf.store_spark_io(),
                              "jvm_io": conf.store_jvm_io(), "verify_jvm_reads": conf.store_verify_jvm_reads(),
                              "min_grace_seconds": conf.store_min_grace_seconds()}
    if "bucket" not in overrides:
        values["bucket"] = conf.store_bucket()
    if "access" not in overrides:
        values["access"] = access_from_airflow(conf.store_aws_conn_id())
    values.update(overrides)
    return StoreConfig(**values)


def retention_from_airflow() -> Retention | None:
    """``[region_failover] store_keep_last_runs`` / ``store_keep_days`` (``None`` when neither is set)."""
    runs, days = conf.store_keep_last_runs(), conf.store_keep_days()
    return None if runs is None and days is None else Retention(runs, days)

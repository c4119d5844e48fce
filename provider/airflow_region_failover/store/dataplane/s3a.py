"""How Spark's own JVM reaches the result store through ``s3a://`` (hadoop-aws): the Hadoop options of one read,
an object's ``s3a://`` URL, and whether a session's JVM can read the store that way.

Rules:

* **Options of the read, not session state.** The S3A settings are passed as options of each read
  (``spark.read.options(...)``); Spark copies a file source's options into that read's Hadoop configuration, on the
  driver (the file listing) and in every task, so nothing is set on the user's session. Endpoint, region and
  path-style addressing (every custom endpoint: SeaweedFS, MinIO) come from the store's access.
* **Credentials.** Long-lived keys (the connection's login/password, or explicit keys) are handed over as S3A's
  ``SimpleAWSCredentialsProvider``; without configured credentials S3A's own chain applies (environment, instance
  roles: it refreshes itself). Temporary credentials (a session token) are *not* handed to the JVM: S3A caches one
  client per bucket for the life of the JVM, which would outlive them, so such a store is read by the Python path
  (:data:`Mode.AUTO`) unless the deployment says the cluster reaches the bucket with its own S3A configuration
  (:data:`Mode.CLUSTER`: nothing is passed). Secrets never appear in a log line; Spark redacts option names with
  ``secret``/``access.key``/``token`` from its UI.
* **Objects listed on the driver.** Spark lists more than ``spark.sql.sources.parallelPartitionDiscovery.threshold``
  (32) paths with a Spark job, which queues behind every other session's running tasks (+11.7 s on the critical
  path of the ETL at 5 GB, ``benchmarks/notes/``); the store has just HEADed each object it reads, so a read of
  up to :data:`DRIVER_LISTING_MAX` objects raises the threshold while Spark resolves it
  (:func:`listed_on_driver`): one HEAD per object from the driver, no job. Spark Connect resolves a frame again
  when it runs it unless the session still holds the resolved plan (its plan cache); a read resolved again
  outside the block lists with Spark's own threshold: slower, never other rows.
* **Probed once per session.** Whether the JVM has S3A and can list one of the store's objects is asked once per
  Spark session and store access (:func:`jvm_reader`); the answer is logged once, naming the fix when it is no.
"""

from __future__ import annotations

import contextlib
import enum
import logging
import threading
import weakref
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any

from airflow_region_failover.store.dataplane.keyed_writer import JAR_PREFIX
from airflow_region_failover.store.keys import Layout
from airflow_region_failover.store.s3.clients import S3Access, portable

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

log = logging.getLogger(__name__)

PACKAGES = "org.apache.hadoop:hadoop-aws:3.5.0"
"""The one ``spark.jars.packages`` line a Spark (4.x, bundling Hadoop 3.5.0) needs for ``s3a://``: hadoop-aws at
the Hadoop version pyspark bundles, which brings the AWS SDK v2 bundle it was built with (``docs/versions.md``)."""
LISTING = "spark.sql.sources.parallelPartitionDiscovery.threshold"
"""Above this many paths Spark lists a read's files with a Spark job (module rule)."""
DRIVER_LISTING_MAX = 1024
"""The most objects a read lists from the driver, one HEAD each (module rule); more are listed by Spark's job."""
SIMPLE = "org.apache.hadoop.fs.s3a.SimpleAWSCredentialsProvider"
TEMPORARY = ("its credentials are temporary (a session token), which S3A's cached client would outlive; set "
             "[region_failover] store_jvm_io = cluster if the cluster reaches the bucket with its own S3A "
             "configuration")


class Mode(str, enum.Enum):
    """``[region_failover] store_jvm_io``: whether reads may use Spark's own Parquet reader through ``s3a://``
    (and writes Spark's own Parquet writer to the driver's disk, :mod:`.local_write`: ``auto`` and ``cluster``
    alike)."""

    AUTO = "auto"
    """Yes when the session's JVM has S3A and reaches the store with the store's endpoint and long-lived keys."""
    CLUSTER = "cluster"
    """Yes, with the cluster's own S3A configuration for the bucket (nothing is passed)."""
    OFF = "off"
    """No: the store's Python path (Spark's Python workers, or the driver) reads every object."""


JARS = ("hadoop-aws-", "bundle-", "analyticsaccelerator-s3-", JAR_PREFIX)
"""The file names (up to the version) of the jars ``s3a://`` needs: hadoop-aws, the AWS SDK v2 bundle and the
analytics accelerator hadoop-aws declares (``docs/versions.md``); and the store's keyed writer, built from source
(:mod:`.keyed_writer`)."""


def environment_jars() -> str:
    """The ``s3a://`` jars (:data:`JARS`) installed into this Python environment's ``jars/``
    directory (``./dev bootstrap`` puts the pinned ones into ``.venv/jars``), comma-separated; empty when there are
    none (an installed provider: add :data:`PACKAGES` to ``spark.jars.packages`` instead). Other jars there (Delta's,
    built for another Spark) are left out."""
    import sys
    from pathlib import Path

    found = sorted((Path(sys.prefix) / "jars").glob("*.jar"))
    return ",".join(str(p) for p in found if p.name.startswith(JARS))


CLASSPATH = ("spark.driver.extraClassPath", "spark.executor.extraClassPath")
"""Where :func:`with_jars` puts the jars: on the JVMs' class paths, read in place. Through ``spark.jars`` Spark
copies every jar into each application's ``userFiles`` and each worker's application directory — 658 MB per
JVM for the AWS SDK bundle alone, left behind by every JVM that is killed."""


def with_jars(conf: dict[str, str]) -> dict[str, str]:
    """``conf`` with :func:`environment_jars` on the driver's and executors' class paths (:data:`CLASSPATH`: the
    jars are files of this host, as are the executors of every stack that calls this), unless ``conf`` names
    jars, packages or class paths itself."""
    jars = environment_jars()
    if not jars or any(key in conf for key in ("spark.jars", "spark.jars.packages", *CLASSPATH)):
        return conf
    return {**conf, **dict.fromkeys(CLASSPATH, jars.replace(",", ":"))}


def url(bucket: str, key: str) -> str:
    """The ``s3a://`` URL of ``key`` in ``bucket``."""
    return f"s3a://{bucket}/{key}"


def hadoop_options(access: S3Access, mode: Mode) -> dict[str, str] | None:
    """The ``fs.s3a.*`` options with which the JVM reads the store (module rule); ``None`` when the JVM must not
    read it (temporary credentials in ``auto`` mode, or ``off``)."""
    if mode is Mode.OFF:
        return None
    if mode is Mode.CLUSTER:
        return {}
    options = {"fs.s3a.endpoint.region": access.region, "fs.s3a.attempts.maximum": str(access.max_attempts)}
    if access.endpoint_url:
        options.update({"fs.s3a.endpoint": access.endpoint_url, "fs.s3a.path.style.access": "true",
                        "fs.s3a.connection.ssl.enabled": str(access.endpoint_url.startswith("https")).lower()})
    credentials = portable(access).credentials
    if credentials is not None:
        if credentials.session_token:
            return None
        options.update({"fs.s3a.aws.credentials.provider": SIMPLE, "fs.s3a.access.key": credentials.access_key,
                        "fs.s3a.secret.key": credentials.secret_key})
    return options


_ANSWERS: weakref.WeakKeyDictionary[Any, dict[tuple[Any, ...], bool]] = weakref.WeakKeyDictionary()
_LOCK = threading.Lock()


def session_answer(spark: SparkSession, key: tuple[Any, ...], ask: Callable[[], bool]) -> bool:
    """The answer ``ask()`` gave for ``key`` in this Spark session, asked the first time only (answers live as
    long as the session object: a new session, or a forked process's own, is asked again)."""
    with _LOCK:
        known = _ANSWERS.get(spark, {}).get(key)
    if known is None:
        known = ask()
        with _LOCK:
            _ANSWERS.setdefault(spark, {})[key] = known
    return known


def jvm_reader(spark: SparkSession, layout: Layout, access: S3Access, mode: Mode, sample: str) -> dict[str, str] | None:
    """The options of a JVM read of ``layout``'s objects in ``spark``, or ``None`` when this session reads them
    with the Python path (module rule: asked once per session and access, by listing ``sample``, the key of an
    object that exists; logged once)."""
    if mode is Mode.OFF:
        return None
    options = hadoop_options(access, mode)
    key = (layout.bucket, layout.prefix, 0 if options is None else hash(tuple(sorted(options.items()))))

    def ask() -> bool:
        problem = TEMPORARY if options is None else jvm_lists(spark, url(layout.bucket, sample), options)
        _announce(layout, access, problem is None, problem or "")
        return problem is None

    return options if session_answer(spark, key, ask) else None


def jvm_lists(spark: SparkSession, sample: str, options: dict[str, str] | None = None) -> str | None:
    """``None`` if the session's JVM (its driver) lists the file ``sample`` (any URL its filesystems know, with
    the read ``options``), else why not (one line). Nothing is read and no Spark job runs."""
    try:
        frame = spark.read.options(**(options or {})).schema("probe long").parquet(sample)
        _ = frame.schema  # Spark Connect analyses lazily: this lists the file through the server's JVM
    except Exception as exc:
        return first_line(exc)
    return None


@contextlib.contextmanager
def session_settings(spark: SparkSession, settings: list[tuple[str, str]]) -> Iterator[None]:
    """Each ``(key, value)`` set in ``spark``'s session for the block, each set back (or unset) afterwards, also
    when the block fails."""
    with contextlib.ExitStack() as stack:
        for key, value in settings:
            before = spark.conf.get(key, None)
            spark.conf.set(key, value)
            stack.callback(_set_back, spark, key, before)
        yield


def _set_back(spark: SparkSession, key: str, before: str | None) -> None:
    if before is None:
        spark.conf.unset(key)
    else:
        spark.conf.set(key, before)


def listed_on_driver(spark: SparkSession, paths: int) -> contextlib.AbstractContextManager[None]:
    """The block in which Spark resolves a read of ``paths`` objects lists them from the driver, not with a Spark
    job, when there are at most :data:`DRIVER_LISTING_MAX` (module rule)."""
    if paths > DRIVER_LISTING_MAX:
        return contextlib.nullcontext()
    return session_settings(spark, [(LISTING, str(paths))])


def first_line(exc: BaseException) -> str:
    """An error's first non-empty line (at most 300 characters): what a log line says of it."""
    text = str(exc).strip().splitlines()
    first = next((line.strip() for line in text if line.strip()), type(exc).__name__)
    return first[:300]


def _announce(layout: Layout, access: S3Access, yes: bool, why: str) -> None:
    if yes:
        log.info("result store s3://%s/%s: this Spark session reads results with Spark's own Parquet reader "
                 "through s3a:// (%s), each object's stored SHA-256 checked first", layout.bucket, layout.prefix,
                 access.endpoint_url or "AWS S3")
        return
    log.info("result store s3://%s/%s: this Spark session reads results with Python workers, not Spark's own "
             "Parquet reader: %s%s", layout.bucket, layout.prefix, why,
             "" if why == TEMPORARY else f" (to use it, put hadoop-aws on the session's classpath: "
             f"spark.jars.packages={PACKAGES})")

"""Spark I/O, writing through Spark's own Parquet writer: the step's rows written by the JVM to a directory on the
driver's disk, then each file stored content-addressed from the driver.

Why: Spark -> Arrow for Python workers alone costs as much as Spark's whole ``df.write.parquet("s3a://...")``
(``benchmarks/bench_store_paths.py``); Spark's writer to local disk plus our content-addressed upload measured
0.49-0.81x Spark's own s3a write. It needs the JVM to write where the driver process reads: embedded local Spark,
or a Spark Connect server on the driver's machine.

Rules:

* **Asked once per session** (:func:`jvm_writer`): ``[region_failover] store_jvm_io`` ``off`` keeps the Python
  workers' path (:mod:`.parquet`); otherwise the session must run its executors on this host (a ``local`` or
  ``local-cluster`` master, or a standalone master on loopback, where no worker of another host can register) and
  a probe must succeed. With a ``local`` master the executors are the driver's JVM, so the probe asks that JVM
  only, without a Spark job (a job queues behind every other session's tasks: 11-15 s on the critical path of
  the ETL at 1 GB, ``benchmarks/notes/``): this process creates a file named by a fresh token in a fresh 0700
  directory, and the driver must find it (``spark.read.schema(...).parquet(...)`` analysed: the driver lists the
  path, reads nothing). A JVM that can list this process's 0700 directory runs as its user (or root), so it can
  write there too. Any other master (executors in JVMs of their own):
  ``spark.range(1).write.parquet("file://<fresh temp dir>")`` must leave a 1-row part file this process can read.
  The answer is logged once per session, with why when it is no.
* **The write** (:func:`write_local`): into a fresh directory under the system temp dir (:mod:`.scratch`: mode
  0700, removed after the write, also on errors; those of killed processes by the next write on the host),
  Snappy Parquet (Spark's defaults) with timestamps as INT64 microseconds (what the Python reader and pyarrow
  expect; Spark's default INT96 is set back afterwards), in Parquet's format-2 pages (:data:`WRITER_VERSION`), at
  most
  :func:`records_per_file` rows per file; a keyed write (a :class:`~.types.Cut`) puts every row into a file of
  its subpartition (named by its directory), without the tag column: by the session's keyed writer
  (:mod:`.keyed_writer`, up to :data:`MAX_OPEN_WRITERS` subpartitions), else ``partitionBy`` the tag — the same
  bytes either way. Each
  non-empty part file is then stored exactly as the Python path stores an object (:meth:`.types.Target.put`:
  SHA-256 key, announced, create-only PUT carrying the checksum, checked reuse, quarantine), rows from its footer.
* **A keyed write does not sort**: the keyed writer keeps a writer per subpartition open; through Spark's
  ``partitionBy`` (:data:`UNSORTED`), which plans a sort of every row by the tag so that
  each task has one file open at a time; the sort made the write 1.6x the same write unpartitioned (20 M rows,
  2 cores, ``benchmarks/notes/``). The write turns Spark's planned write off for its duration and lets each
  task keep one writer per subpartition open, up to :data:`MAX_OPEN_WRITERS`; past that Spark sorts the rows
  left (correct, slower). Rows reach each writer in the task's order, so a restart writes the same bytes. The
  cost is memory: open Parquet writers share 95 % of the JVM's heap, each counted at its 128 MB row group, and
  Parquet shrinks every row group in proportion when they would exceed it; a row group shrunk below a file's size
  splits that file's rows differently, so a restart's bytes (not its rows) may differ — it re-uploads instead of
  reusing, never reads wrong rows. At the default 1 GB heap one task's 16 writers already shrink row groups to
  ~60 MB: files at the default 64 MiB bound may split with one such task, files a third of it (the demo's line
  items) with three; a larger heap (``spark.driver.memory`` for embedded Spark) moves both up.
* **Format-2 pages** (:data:`WRITER_VERSION`): parquet-mr tries a dictionary on every column chunk and, where it
  does not pay (ids, keys, amounts: near-unique values), falls back to PLAIN in format 1 but to
  ``DELTA_BINARY_PACKED`` (integers) or ``DELTA_BYTE_ARRAY`` (strings) in format 2: the ETL's kept line-item
  columns took 137.9 MB instead of 254.5 MB for 11 % less JVM CPU, and read back faster
  (``benchmarks/notes/``). Spark (3.3 on), pyarrow, DuckDB and delta-rs read these pages; a reader that does
  not (old Hive or Impala) should read results through Spark or
  :meth:`~airflow_region_failover.store.result_store.ResultStore.read_arrow`.
* **No dictionary for wide decimals** (:func:`write_options`): a decimal of more than 18 digits is a
  ``FIXED_LEN_BYTE_ARRAY`` column, which format 1 never dictionary-encodes and format 2 does. parquet-mr's dictionary
  hashes the value's big-endian bytes as ``31 * h + byte``, so values that differ in their last few bytes share few
  hash codes (about 12,000 for 80,000 sums of line items) and its linear probing walks long runs of them: rows like
  the ETL's join output, whose ``sum(revenue)`` is a ``decimal(24,2)``, wrote at 2.5-3.0x the JVM CPU of the same rows
  without that dictionary, into 23 % more bytes (``benchmarks/bench_encoding.py``). Those columns (top level, in
  structs, arrays and maps, by Spark's Parquet paths) go straight to ``DELTA_BYTE_ARRAY``; a name with a dot cannot be
  addressed that way and keeps the default.
* **No dictionary for integer keys** (:func:`write_options`): the columns a keyed write is keyed by
  (``partition_by``), where Parquet stores them as integers (:func:`integer_key_paths`), go straight to
  ``DELTA_BINARY_PACKED``. parquet-mr keeps a dictionary while it beats PLAIN, not the format-2 fallback: a key in the
  producer's order (the ETL's ``l_orderkey``, 7 rows per key, increasing within a task) fills dictionaries of ~131,000
  keys per column chunk whose ids take more bytes than the key's deltas. The ETL's line items at 4 M orders, in 64 MiB
  files: 83.3 MB in 3.66 JVM CPU s with it, 69.6 MB in 2.84 s without (in 1 M-row files, 115.2 MB in 6.35 s against
  69.7 MB in 3.60 s: ``benchmarks/notes/``). A key is near-unique or clustered; the other integer columns keep
  parquet-mr's choice (a low-cardinality code whose values lie far apart is smaller with a dictionary).
* **Manifest order**: Spark task (the part number of the file name), subpartition, file counter within the task —
  the Python path's order (:attr:`.types.Piece.order`).
* **Object size**: Spark cuts files by rows only, so the bound is a row count fixed by the schema alone —
  ``max_object_bytes`` over Spark's own estimate of a row (``DataType.defaultSize``, :func:`row_bytes`), never by
  earlier writes, so a restart cuts the same rows into the same files. Compressed Parquet is usually smaller than
  that estimate (objects below the bound); values far longer than the estimate (strings over 20 characters on
  average) give larger objects, which are stored all the same.
* **Determinism**: Spark's Parquet writer puts no time or random id inside a file (the uuid is in its name only),
  so the same rows in the same Spark partitions give the same bytes and a re-write uploads nothing.
* **Timing** (:class:`~.types.Written` ``work``): ``encode`` is the Spark write job (computing the rows and
  encoding them: one job, inseparable from the driver); ``hash`` and ``upload`` are the driver's per-file seconds
  over the width of its upload pool; ``writers`` is 1 (the job's parts are wall time already); ``spark_writer``
  (1 per write) says the write was Spark's own (``benchmarks/_breakdown.py`` cuts it apart).
"""

from __future__ import annotations

import logging
import re
import secrets
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from airflow_region_failover.exceptions import StoreError
from airflow_region_failover.store.dataplane import keyed_writer, s3a
from airflow_region_failover.store.dataplane.encoding import SUBPARTITION_COLUMN
from airflow_region_failover.store.dataplane.scratch import scratch
from airflow_region_failover.store.dataplane.types import Cut, Piece, Target, Written, written

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

log = logging.getLogger(__name__)

PART = re.compile(r"^part-(?P<task>\d+)-.*[-.]c(?P<counter>\d+)(?:\.[a-z0-9]+)*\.parquet$")
"""A file Spark's writer commits: ``part-<task, 5+ digits>-<job uuid>-c<file counter>.<codec>.parquet``, in a
partitioned (keyed) write ``part-<task>-<job uuid>.c<file counter>.<codec>.parquet``."""
TIMESTAMPS = ("spark.sql.parquet.outputTimestampType", "TIMESTAMP_MICROS")
"""How the write stores timestamps (module rule)."""
MAX_OPEN_WRITERS = 16
"""Writers a keyed write's task keeps open at once, one per subpartition (module rule)."""
UNSORTED = (("spark.sql.optimizer.plannedWrite.enabled", "false"),)
"""How a keyed write keeps Spark from planning a sort (module rule); the writers' count is set beside it."""
CONCURRENT_WRITERS = "spark.sql.maxConcurrentOutputFileWriters"
WRITER_VERSION = ("parquet.writer.version", "v2")
"""The Parquet writer's format version (module rule), a write option."""
NO_DICTIONARY = "parquet.enable.dictionary#"
"""A column's dictionary switch, its Parquet path appended (a write option)."""
LONG_DECIMAL_DIGITS = 18
"""The most digits of a decimal Spark stores in an INT64; more take a FIXED_LEN_BYTE_ARRAY."""
INTEGER_STORED = frozenset({"byte", "short", "integer", "long", "date", "timestamp", "timestamp_ntz"})
"""The types, by their one word in a schema's JSON, that Spark's Parquet writer stores as INT32 or INT64."""
_FIXED = {"boolean": 1, "byte": 1, "short": 2, "integer": 4, "long": 8, "float": 4, "double": 8, "date": 4,
          "timestamp": 8, "timestamp_ntz": 8, "string": 20, "binary": 100, "null": 1, "void": 1, "variant": 2048,
          "interval": 16}
"""Spark's ``defaultSize`` of the types named by one word in a schema's JSON."""


@dataclass(frozen=True)
class LocalFile:
    """One part file Spark wrote: its path, Spark task (``number``), subpartition (-1: not keyed) and file counter
    within the task (``sequence``)."""

    path: Path
    number: int
    subpartition: int
    sequence: int

    @property
    def order(self) -> tuple[int, int, int]:
        """Manifest order (module rule)."""
        return self.number, self.subpartition, self.sequence


def type_bytes(kind: Any) -> int:
    """Spark's ``DataType.defaultSize`` of a type in a schema's JSON form."""
    if isinstance(kind, dict):
        name = kind.get("type")
        if name == "struct":
            return sum(type_bytes(f["type"]) for f in kind["fields"])
        if name == "array":
            return type_bytes(kind["elementType"])
        if name == "map":
            return type_bytes(kind["keyType"]) + type_bytes(kind["valueType"])
        return type_bytes(kind.get("sqlType", "binary"))  # a user-defined type: its SQL type
    text = str(kind)
    if text in _FIXED:
        return _FIXED[text]
    digits = decimal_digits(text)
    if digits is not None:
        return 8 if digits <= LONG_DECIMAL_DIGITS else 16
    if text.startswith(("char(", "varchar(")):
        return int(re.findall(r"\d+", text)[0])
    if text.startswith("interval"):
        return 4 if "year" in text or "month" in text else 8
    return 8  # time(p) and anything newer: a long's size


def write_options(schema_json: dict[str, Any], keys: tuple[str, ...] = ()) -> dict[str, str]:
    """The Parquet writer's options for rows of ``schema_json`` keyed by ``keys`` (a keyed write's
    ``partition_by``; none for an unkeyed one): format-2 pages, and no dictionary for its wide decimals nor for its
    integer-stored key columns (module rule)."""
    off = [*wide_decimal_paths(schema_json), *integer_key_paths(schema_json, keys)]
    return {WRITER_VERSION[0]: WRITER_VERSION[1], **{NO_DICTIONARY + path: "false" for path in off}}


def integer_key_paths(schema_json: dict[str, Any], keys: tuple[str, ...]) -> list[str]:
    """The ``keys`` that are top-level columns Parquet stores as integers (:data:`INTEGER_STORED`, decimals of at
    most :data:`LONG_DECIMAL_DIGITS` digits), in ``keys`` order; none with a dot in its name."""
    types = {f["name"]: f["type"] for f in schema_json["fields"]}
    return [key for key in keys if "." not in key and key in types and integer_stored(types[key])]


def integer_stored(kind: Any) -> bool:
    """Whether Parquet stores a value of this type (a schema's JSON form) as an INT32 or INT64 (never a struct,
    array, map or user-defined type: their JSON form is an object)."""
    if not isinstance(kind, str):
        return False
    digits = decimal_digits(kind)
    return kind in INTEGER_STORED or (digits is not None and digits <= LONG_DECIMAL_DIGITS)


def wide_decimal_paths(kind: Any, path: str = "") -> list[str]:
    """The Parquet column paths of the decimals of more than :data:`LONG_DECIMAL_DIGITS` digits in a type's JSON
    form (Spark's layout: ``<array>.list.element``, ``<map>.key_value.key`` / ``.value``); none below a name with
    a dot."""
    if isinstance(kind, dict):
        name = kind.get("type")
        if name == "struct":
            return [found for f in kind["fields"] if "." not in f["name"]
                    for found in wide_decimal_paths(f["type"], f"{path}.{f['name']}" if path else f["name"])]
        if name == "array":
            return wide_decimal_paths(kind["elementType"], f"{path}.list.element")
        if name == "map":
            return (wide_decimal_paths(kind["keyType"], f"{path}.key_value.key")
                    + wide_decimal_paths(kind["valueType"], f"{path}.key_value.value"))
        return []
    digits = decimal_digits(str(kind))
    return [path] if digits is not None and digits > LONG_DECIMAL_DIGITS else []


def decimal_digits(text: str) -> int | None:
    """The precision of a decimal type named in a schema's JSON (``decimal(24,2)``; plain ``decimal`` is Spark's
    ``decimal(10,0)``), ``None`` for any other type."""
    if not text.startswith("decimal"):
        return None
    precision = re.findall(r"\d+", text)
    return int(precision[0]) if precision else 10


def row_bytes(schema_json: dict[str, Any]) -> int:
    """A row's estimated size (module rule): the sum of its fields' :func:`type_bytes`, at least 1."""
    return max(1, type_bytes(schema_json))


def records_per_file(schema_json: dict[str, Any], max_object_bytes: int) -> int:
    """Spark's ``maxRecordsPerFile`` for objects of about ``max_object_bytes`` (module rule)."""
    return max(1, max_object_bytes // row_bytes(schema_json))


def local_files(root: Path, keyed: bool) -> list[LocalFile]:
    """The part files Spark committed under ``root`` in manifest order; a keyed write's subpartition comes from
    its directory (``<tag>=<j>``). Hidden files, checksums and ``_SUCCESS`` are not part files; any other Parquet
    file is a :class:`StoreError` (never a result silently missing rows). Where the keyed writer recorded the
    attempt Spark counted per task (:func:`.keyed_writer.counted_attempts`: its renames are not coordinated, so
    two attempts of a task may both have published), only that attempt's files are taken (the attempt is in their
    names), so a set is never mixed from two attempts."""
    found: list[LocalFile] = []
    counted = keyed_writer.counted_attempts(root)
    for path in root.rglob("*.parquet"):
        match = PART.match(path.name)
        if match is None:
            if not path.name.startswith((".", "_")):
                raise StoreError(f"{path}: a file Spark wrote that is not named like a part file ({PART.pattern}); "
                                 "set [region_failover] store_jvm_io = off and report the Spark version")
            continue
        if counted is not None and not keyed_writer.counted(path, int(match["task"]), counted):
            continue
        sub = subpartition_of(path.parent.name) if keyed else -1
        found.append(LocalFile(path, int(match["task"]), sub, int(match["counter"])))
    return sorted(found, key=lambda f: f.order)


def subpartition_of(directory: str) -> int:
    """The subpartition a keyed write's directory holds: ``<tag column>=<j>``; ``ValueError`` otherwise."""
    name, _, value = directory.partition("=")
    if name != SUBPARTITION_COLUMN or not value.isdigit():
        raise ValueError(f"{directory!r} is not a directory of {SUBPARTITION_COLUMN}=<subpartition>")
    return int(value)


def same_host(master: str | None) -> bool:
    """Whether a session with this master runs every executor on the driver JVM's host (module rule); ``None``
    (unknown) leaves the decision to the probe."""
    if master is None:
        return True
    if master.startswith("local"):
        return True
    host = re.match(r"^spark://(?:\[([^\]]+)\]|([^:/]+))", master)
    return host is not None and (host[1] or host[2]) in {"127.0.0.1", "localhost", "::1"}


def jvm_writer(spark: SparkSession, mode: s3a.Mode) -> bool:
    """Whether ``spark``'s writes go through Spark's own Parquet writer to local disk (module rule: asked once per
    session, logged once)."""
    if mode is s3a.Mode.OFF:
        return False
    return s3a.session_answer(spark, ("local-write",), lambda: _decide(spark))


def _decide(spark: SparkSession) -> bool:
    master = _master(spark)
    if not same_host(master):
        problem: str | None = f"its master {master} may run executors on other hosts"
    elif master is not None and master.startswith("local") and not master.startswith("local-cluster"):
        problem = _probe_driver(spark)
    else:
        problem = _probe(spark)
    if problem is None:
        log.info("result store: this Spark session writes results with Spark's own Parquet writer to the driver's "
                 "disk, each file then stored content-addressed from the driver")
    else:
        log.info("result store: this Spark session writes results with Python workers (mapInArrow), not Spark's "
                 "own Parquet writer: %s", problem)
    return problem is None


def _master(spark: SparkSession) -> str | None:
    try:
        value = spark.conf.get("spark.master", None)
    except Exception:  # a Connect server that does not expose it: the probe decides
        return None
    return None if value is None else str(value)


def _probe_driver(spark: SparkSession) -> str | None:
    """``None`` if the session's driver JVM finds a file this process just created, else why not (one line;
    module rule)."""
    with scratch("probe") as root:
        path = root / f"probe-{secrets.token_hex(8)}.parquet"
        path.write_bytes(b"")
        return s3a.jvm_lists(spark, path.as_uri())


def _probe(spark: SparkSession) -> str | None:
    """``None`` if the session's JVM writes a 1-row Parquet file the driver reads, else why not (one line)."""
    import pyarrow.parquet as pq

    with scratch("probe") as root:
        out = root / "probe"
        try:
            spark.range(1).write.parquet(out.as_uri())
        except Exception as exc:
            return s3a.first_line(exc)
        files = local_files(out, keyed=False)
        if sum(pq.read_metadata(f.path).num_rows for f in files) != 1:
            return f"the file Spark's JVM wrote to {out} is not on the driver's filesystem"
    return None


def keyed_settings(subpartitions: int) -> list[tuple[str, str]]:
    """The session settings of a keyed write of ``subpartitions`` (module rule). Spark falls back to sorting the
    rows left as soon as its open writers *reach* ``spark.sql.maxConcurrentOutputFileWriters``
    (``DynamicPartitionDataConcurrentWriter``), so the setting is one more than the writers a task may open."""
    return [*UNSORTED, (CONCURRENT_WRITERS, str(min(subpartitions, MAX_OPEN_WRITERS) + 1))]


def write_local(df: DataFrame, target: Target, cut: Cut | None = None) -> Written:
    """Spark's writer to a local directory, then every part file stored content-addressed (module rule)."""
    frame = df if cut is None else cut.tag(df)
    schema = df.schema.jsonValue()
    records = records_per_file(schema, target.max_object_bytes)
    with scratch("write") as root:
        out = root / "out"
        started = time.perf_counter()
        _write(frame, out.as_uri(), records, cut, write_options(schema, cut.partition_by if cut else ()))
        spark_s = time.perf_counter() - started
        return _stored(target, local_files(out, keyed=cut is not None), spark_s)


def _write(frame: DataFrame, uri: str, records: int, cut: Cut | None, options: dict[str, str]) -> None:
    """``frame`` written with Spark's Parquet writer to ``uri`` with the Parquet ``options`` (module rule): a keyed
    write of at most :data:`MAX_OPEN_WRITERS` subpartitions by :mod:`.keyed_writer` when the session has it, else
    ``partitionBy``."""
    spark = frame.sparkSession
    if cut is not None and cut.parallelism <= MAX_OPEN_WRITERS:
        with s3a.session_settings(spark, [TIMESTAMPS]):
            if keyed_writer.write(frame, uri, records, cut.parallelism, secrets.token_hex(8), options):
                return
    writer = frame.write.option("maxRecordsPerFile", str(records)).options(**options)
    settings = [TIMESTAMPS]
    if cut is not None:
        writer = writer.partitionBy(SUBPARTITION_COLUMN)
        settings += keyed_settings(cut.parallelism)
    with s3a.session_settings(spark, settings):
        writer.parquet(uri)


def _stored(target: Target, files: list[LocalFile], spark_s: float) -> Written:
    """Each non-empty file stored through ``target`` on the driver's upload pool; the :class:`Written` of them
    (timing: module rule)."""
    import pyarrow.parquet as pq

    width = max(1, min(target.threads, len(files)))
    objects = target.objects()

    def store(item: LocalFile) -> Piece | None:
        rows = pq.read_metadata(item.path).num_rows
        if rows == 0:
            return None  # Spark's file for an empty result: nothing to store (the Python path stores none either)
        stored = target.put(objects, item.path.read_bytes(), item.subpartition)
        return Piece(stored, rows, item.number, item.sequence)

    with ThreadPoolExecutor(max_workers=width) as pool:
        pieces = [p for p in pool.map(store, files) if p is not None]
    ordered = written(pieces)
    work = {"wait": 0.0, "encode": spark_s, "writers": 1.0, "spark_writer": 1.0,
            "hash": sum(p.stored.hash_s for p in pieces) / width,
            "upload": sum(p.stored.upload_s for p in pieces) / width}
    log.info("%s: Spark's writer %.2f s, %d files; %s", target.partition, spark_s, len(pieces),
             ordered.tally.describe())
    return Written(ordered.objects, ordered.rows, ordered.subpartition_rows, ordered.tally, work)

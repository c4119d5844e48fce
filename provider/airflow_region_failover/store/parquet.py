"""Spark I/O: persist a DataFrame as Parquet objects of one attempt, and read a committed version back.

Two interchangeable paths, both working with embedded Spark and with Spark Connect (nothing relies on a
driver-local staging directory):

* ``executors`` (default): ``df.mapInArrow`` — every Spark task streams its partition through pyarrow's Parquet
  writer into a multipart upload (parts uploaded on threads while encoding continues) and returns one row
  ``(key, size, sha256, rows)``; the driver collects these rows into the manifest. A failed task aborts its
  upload; a retried Spark task writes a different key (``-t<try>``). Reading maps one Spark partition per object
  (``spark.range(n, numPartitions=n).mapInArrow``), each GETting and decoding its object. Executors need boto3
  and pyarrow (with Spark Connect: start the server with ``PYSPARK_PYTHON`` pointing at such a Python).
* ``driver``: ``df.toArrow()`` then one streamed multipart upload from the driver; reading GETs the objects in
  the driver and calls ``spark.createDataFrame(arrow_table)``. Bounded by driver memory; kept for servers whose
  executors cannot reach S3.

Both verify sizes and SHA-256 on read when ``verify`` is set, raising :class:`NotAvailable` naming the object.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from airflow_region_failover.exceptions import NotAvailable
from airflow_region_failover.graph.ids import PartitionId
from airflow_region_failover.store.config import S3Access, client_for
from airflow_region_failover.store.keys import Layout, RunKeys
from airflow_region_failover.store.manifest import Manifest, ObjectEntry
from airflow_region_failover.store.objects import Objects

if TYPE_CHECKING:
    import pyarrow as pa
    from pyspark.sql import DataFrame, SparkSession

_UPLOAD_SCHEMA = "key string, size long, sha256 string, rows long"


@dataclass(frozen=True)
class Target:
    """Where one attempt's objects go: run keys, partition, attempt, writer token, and upload tuning."""

    access: S3Access = field(repr=False)
    layout: Layout
    keys: RunKeys
    partition: PartitionId
    attempt: int
    writer: str
    part_size: int
    threads: int

    def objects(self) -> Objects:
        """Guarded object operations through this process's cached client."""
        return Objects(client_for(self.access), self.layout)


@dataclass(frozen=True)
class Written:
    """What an attempt wrote: its objects (sorted by key) and the total row count."""

    objects: tuple[ObjectEntry, ...]
    rows: int


ROW_GROUP_BYTES = 64 * 1024 * 1024
"""Arrow bytes gathered into one Parquet row group (Spark hands over batches of ~10k-65k rows; one row group per
batch would restart dictionary encoding and statistics every few MB: measured 1.3x the encoding CPU)."""

DICTIONARY_MAX_DISTINCT = 0.5
"""A column is dictionary-encoded only if its first batch has at most this share of distinct values."""


def write_batches(
    target: Target, batches: Iterator[pa.RecordBatch], number: int, task_try: int
) -> tuple[ObjectEntry, int] | None:
    """Stream ``batches`` into one Parquet object: (entry, rows), ``None`` if none. Aborts the upload on error.

    Rules: batches are gathered into row groups of about :data:`ROW_GROUP_BYTES`; dictionary encoding is used only
    for the columns :func:`dictionary_columns` picks from the first batch; Snappy compression (Spark's default).
    """
    import pyarrow.parquet as pq

    first = next(batches, None)
    if first is None:
        return None
    key = target.keys.data_object(target.partition, target.attempt, target.writer, number, task_try)
    rows = 0
    with target.objects().upload(key, target.part_size, target.threads) as stream:
        with pq.ParquetWriter(stream, first.schema, compression="snappy",
                              use_dictionary=dictionary_columns(first)) as writer:
            for group in row_groups(_chain(first, batches), ROW_GROUP_BYTES):
                writer.write_table(group, row_group_size=group.num_rows)
                rows += group.num_rows
        size, sha = stream.finish()
    return ObjectEntry(key[len(target.keys.run_prefix):], size, sha), rows


def _chain(first: pa.RecordBatch, rest: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
    yield first
    yield from rest


def row_groups(batches: Iterator[pa.RecordBatch], limit: int) -> Iterator[pa.Table]:
    """Consecutive batches gathered into tables of at least ``limit`` Arrow bytes (the last may be smaller)."""
    import pyarrow as pa

    pending: list[pa.RecordBatch] = []
    size = 0
    for batch in batches:
        pending.append(batch)
        size += batch.nbytes
        if size >= limit:
            yield pa.Table.from_batches(pending)
            pending, size = [], 0
    if pending:
        yield pa.Table.from_batches(pending)


def dictionary_columns(batch: pa.RecordBatch) -> list[str]:
    """Top-level flat columns worth dictionary encoding: at most :data:`DICTIONARY_MAX_DISTINCT` of the first
    batch's values distinct (ids, measures and hashes are mostly unique: encoding them as a dictionary first
    only costs CPU before Parquet falls back to plain). Nested columns are written plain."""
    import pyarrow.compute as pc

    chosen = []
    for column_field, column in zip(batch.schema, batch.columns, strict=True):
        if column_field.type.num_fields or len(column) == 0:
            continue
        try:
            distinct = pc.count_distinct(column, mode="all").as_py()
        except Exception:  # a type without hashing support: plain encoding
            continue
        if distinct <= DICTIONARY_MAX_DISTINCT * len(column):
            chosen.append(column_field.name)
    return chosen


@dataclass(frozen=True)
class _TaskUploader:
    """The ``mapInArrow`` function: uploads one Spark partition and yields its ``(key, size, sha256, rows)``."""

    target: Target

    def __call__(self, batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        import pyarrow as pa
        from pyspark import TaskContext

        context = TaskContext.get()
        number, task_try = (context.partitionId(), context.attemptNumber()) if context else (0, 0)
        written = write_batches(self.target, iter(batches), number, task_try)
        if written is not None:
            plain, rows = written
            yield pa.RecordBatch.from_pylist(
                [{"key": plain.key, "size": plain.size, "sha256": plain.sha256, "rows": rows}],
                schema=pa.schema([("key", pa.string()), ("size", pa.int64()), ("sha256", pa.string()),
                                  ("rows", pa.int64())]))


def write_with_executors(df: DataFrame, target: Target) -> Written:
    """Every Spark task uploads its own partition; returns the collected objects."""
    rows = df.mapInArrow(_TaskUploader(target), _UPLOAD_SCHEMA).collect()
    entries = sorted(((ObjectEntry(r["key"], int(r["size"]), r["sha256"]), int(r["rows"])) for r in rows),
                     key=lambda pair: pair[0].key)
    return Written(tuple(e for e, _ in entries), sum(n for _, n in entries))


def write_with_driver(df: DataFrame, target: Target) -> Written:
    """Collect the DataFrame as Arrow in the driver and upload it as one object."""
    return write_arrow(df.toArrow(), target)


def write_arrow(table: pa.Table, target: Target) -> Written:
    """Upload an Arrow table as one Parquet object (no Spark needed)."""
    written = write_batches(target, iter(table.to_batches()), 0, 0)
    if written is None:
        return Written((), 0)
    return Written((written[0],), written[1])


def fetch(objects: Objects, keys: RunKeys, entry: ObjectEntry, verify: bool) -> bytes:
    """GET one object of a manifest, checking its size (and SHA-256 if ``verify``)."""
    key = keys.run_prefix + entry.key
    body = objects.get(key)
    if body is None:
        raise NotAvailable(f"object {key} listed in the manifest is missing")
    if len(body) != entry.size:
        raise NotAvailable(f"object {key} has {len(body)} bytes, manifest says {entry.size}")
    if verify and hashlib.sha256(body).hexdigest() != entry.sha256:
        raise NotAvailable(f"object {key} does not match the SHA-256 in its manifest")
    return body


def read_arrow(objects: Objects, keys: RunKeys, manifest: Manifest, verify: bool, threads: int = 4) -> pa.Table:
    """The committed version as one Arrow table (objects fetched in parallel, in manifest order)."""
    import pyarrow as pa
    import pyarrow.parquet as pq
    from pyspark.sql.types import StructType

    with ThreadPoolExecutor(max_workers=max(1, threads)) as pool:
        bodies = list(pool.map(lambda e: fetch(objects, keys, e, verify), manifest.objects))
    tables = [pq.read_table(pa.BufferReader(body)) for body in bodies]
    if tables:
        return pa.concat_tables(tables)
    return _empty_arrow(StructType.fromJson(_schema_json(manifest)))


def _schema_json(manifest: Manifest) -> dict[str, Any]:
    import json

    parsed: dict[str, Any] = json.loads(manifest.spark_schema)
    return parsed


def _empty_arrow(schema: Any) -> pa.Table:
    from pyspark.sql.pandas.types import to_arrow_schema

    return to_arrow_schema(schema).empty_table()


@dataclass(frozen=True)
class _TaskReader:
    """The ``mapInArrow`` function of a read: object number -> that object's record batches."""

    access: S3Access = field(repr=False)
    layout: Layout
    keys: RunKeys
    objects: tuple[ObjectEntry, ...]
    verify: bool

    def __call__(self, batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        import pyarrow as pa
        import pyarrow.parquet as pq

        store = Objects(client_for(self.access), self.layout)
        for batch in batches:
            for number in batch.column(0).to_pylist():
                body = fetch(store, self.keys, self.objects[number], self.verify)
                yield from pq.read_table(pa.BufferReader(body)).to_batches()


def read_dataframe(spark: SparkSession, target: Target, manifest: Manifest, verify: bool, mode: str) -> DataFrame:
    """The committed version as a DataFrame (lazy with ``executors``; fetched now with ``driver``)."""
    from pyspark.sql.types import StructType

    schema = StructType.fromJson(_schema_json(manifest))
    if not manifest.objects:
        return spark.createDataFrame([], schema)
    if mode == "driver":
        table = read_arrow(target.objects(), target.keys, manifest, verify, target.threads)
        return spark.createDataFrame(table, schema=schema)
    count = len(manifest.objects)
    reader = _TaskReader(target.access, target.layout, target.keys, manifest.objects, verify)
    return spark.range(0, count, 1, count).mapInArrow(reader, schema)

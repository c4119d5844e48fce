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

Keyed partitions (a :class:`Cut`): the frame is tagged with each row's subpartition — Spark's own
``pmod(hash(key columns), max_parallelism)`` key group mapped to its consumer's range (:mod:`..graph.keygroups`) —
and sorted by it within each Spark partition (a local sort, no shuffle), so every Spark task streams its rows
subpartition by subpartition into one object per (task, subpartition), in one pass; the tag column is not
stored. A read may name the objects to fetch (a subpartition selection, :meth:`.manifest.Manifest.select`).

Both verify sizes and SHA-256 on read when ``verify`` is set, raising :class:`NotAvailable` naming the object.
Memory rule of a read: an object's body is streamed into one buffer of its recorded size while it is hashed, the
Parquet decoder reads that buffer without copying it, and the buffer is dropped as soon as its table is decoded —
so a read holds each object once, and only the objects in flight (not all of a manifest's) at a time.
Executors receive the store's access with credentials frozen at the moment of each read or write
(:func:`.config.portable`); the driver keeps its own client with refreshing credentials.
"""

from __future__ import annotations

import dataclasses
import hashlib
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from airflow_region_failover.exceptions import NotAvailable, StepOutputError
from airflow_region_failover.graph.ids import PartitionId
from airflow_region_failover.graph.keygroups import key_group_range
from airflow_region_failover.store.config import S3Access, client_for, portable
from airflow_region_failover.store.keys import Layout, RunKeys
from airflow_region_failover.store.manifest import Manifest, ObjectEntry
from airflow_region_failover.store.objects import Objects

if TYPE_CHECKING:
    import pyarrow as pa
    from pyspark.sql import DataFrame, SparkSession

_UPLOAD_SCHEMA = "key string, size long, sha256 string, rows long, subpartition long"
SUBPARTITION_COLUMN = "__region_failover_subpartition"
"""The column a keyed write tags rows with (never stored)."""


@dataclass(frozen=True)
class Cut:
    """How a keyed partition is cut: ``partition_by`` hashed into ``max_parallelism`` key groups, one
    subpartition per consumer subtask of ``parallelism``."""

    partition_by: tuple[str, ...]
    max_parallelism: int
    parallelism: int
    where: str = ""

    @property
    def ranges(self) -> tuple[range, ...]:
        """The key-group range of each subpartition (index order)."""
        return tuple(key_group_range(self.max_parallelism, self.parallelism, j) for j in range(self.parallelism))

    def tag(self, df: DataFrame) -> DataFrame:
        """``df`` with :data:`SUBPARTITION_COLUMN` (:class:`StepOutputError` naming a missing key column)."""
        from pyspark.sql import functions as F

        check_key_columns(self.partition_by, df.columns, self.where or "keyed exchange", "the result",
                          "fix partition_by or the step's output")
        return df.withColumn(SUBPARTITION_COLUMN, self.subpartition_column()).sortWithinPartitions(
            F.col(SUBPARTITION_COLUMN))

    def subpartition_column(self) -> Any:
        """A row's subpartition: its key group mapped to its consumer's range."""
        return (key_group_column(self.partition_by, self.max_parallelism) * self.parallelism
                / self.max_parallelism).cast("int")


def check_key_columns(partition_by: tuple[str, ...], columns: list[str], where: str, of: str, fix: str) -> None:
    """:class:`StepOutputError` naming ``where``, the first key column missing from ``columns`` (those of
    ``of``) and the ``fix``."""
    missing = [c for c in partition_by if c not in columns]
    if missing:
        raise StepOutputError(f"{where}: partition_by column {missing[0]!r} is not a column of {of} (columns: "
                              f"{', '.join(columns)}); {fix}")


def key_group_column(partition_by: tuple[str, ...], max_parallelism: int) -> Any:
    """Spark's key group of a row: ``pmod(hash(key columns), max_parallelism)`` (what ``repartition`` uses)."""
    from pyspark.sql import functions as F

    keys = [F.col("`" + c.replace("`", "``") + "`") for c in partition_by]
    return F.pmod(F.hash(*keys), F.lit(max_parallelism))


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

    def shipped(self) -> Target:
        """This target as it is sent to Spark executors: credentials frozen now (:func:`.config.portable`)."""
        return dataclasses.replace(self, access=portable(self.access))


@dataclass(frozen=True)
class Written:
    """What an attempt wrote: its objects (sorted by key), the total row count and the rows per subpartition."""

    objects: tuple[ObjectEntry, ...]
    rows: int
    subpartition_rows: dict[int, int] = field(default_factory=dict)


ROW_GROUP_BYTES = 64 * 1024 * 1024
"""Arrow bytes gathered into one Parquet row group (Spark hands over batches of ~10k-65k rows; one row group per
batch would restart dictionary encoding and statistics every few MB: measured 1.3x the encoding CPU)."""

DICTIONARY_MAX_DISTINCT = 0.5
"""A column is dictionary-encoded only if its first batch has at most this share of distinct values."""


def write_batches(
    target: Target, batches: Iterator[pa.RecordBatch], number: int, task_try: int, subpartition: int = -1
) -> tuple[ObjectEntry, int] | None:
    """Stream ``batches`` into one Parquet object: (entry, rows), ``None`` if none. Aborts the upload on error.

    Rules: batches are gathered into row groups of about :data:`ROW_GROUP_BYTES`; dictionary encoding is used only
    for the columns :func:`dictionary_columns` picks from the first batch; Snappy compression (Spark's default).
    ``subpartition`` >= 0: the object holds that subpartition of a keyed partition.
    """
    import pyarrow.parquet as pq

    first = next(batches, None)
    if first is None:
        return None
    key = target.keys.data_object(target.partition, target.attempt, target.writer, number, task_try, subpartition)
    rows = 0
    with target.objects().upload(key, target.part_size, target.threads) as stream:
        with pq.ParquetWriter(stream, first.schema, compression="snappy",
                              use_dictionary=dictionary_columns(first)) as writer:
            for group in row_groups(_chain(first, batches), ROW_GROUP_BYTES):
                writer.write_table(group, row_group_size=group.num_rows)
                rows += group.num_rows
        size, sha = stream.finish()
    return ObjectEntry(key[len(target.keys.run_prefix):], size, sha, subpartition), rows


def split_batches(batches: Iterator[pa.RecordBatch]) -> Iterator[tuple[int, pa.RecordBatch]]:
    """Batches sorted by :data:`SUBPARTITION_COLUMN` as ``(subpartition, slice without that column)`` runs."""
    import numpy as np

    for batch in batches:
        if batch.num_rows == 0:
            continue
        subs = batch.column(SUBPARTITION_COLUMN).to_numpy(zero_copy_only=False)
        body = batch.drop_columns([SUBPARTITION_COLUMN])
        starts = [0, *(np.flatnonzero(np.diff(subs)) + 1).tolist()]
        for begin, end in zip(starts, [*starts[1:], batch.num_rows], strict=True):
            yield int(subs[begin]), body.slice(begin, end - begin)


def write_split(target: Target, batches: Iterator[pa.RecordBatch], number: int,
                task_try: int) -> Iterator[tuple[ObjectEntry, int]]:
    """One object per subpartition run of sorted, tagged ``batches`` (see :func:`split_batches`)."""
    import itertools

    for sub, runs in itertools.groupby(split_batches(batches), key=lambda pair: pair[0]):
        written = write_batches(target, (batch for _, batch in runs), number, task_try, sub)
        if written is not None:
            yield written


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
    """The ``mapInArrow`` function: uploads one Spark partition (one object per subpartition when ``split``) and
    yields ``(key, size, sha256, rows, subpartition)`` per object."""

    target: Target
    split: bool = False

    def __call__(self, batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        import pyarrow as pa
        from pyspark import TaskContext

        context = TaskContext.get()
        number, task_try = (context.partitionId(), context.attemptNumber()) if context else (0, 0)
        if self.split:
            written = list(write_split(self.target, iter(batches), number, task_try))
        else:
            one = write_batches(self.target, iter(batches), number, task_try)
            written = [] if one is None else [one]
        if written:
            yield pa.RecordBatch.from_pylist(
                [{"key": e.key, "size": e.size, "sha256": e.sha256, "rows": rows, "subpartition": e.subpartition}
                 for e, rows in written],
                schema=pa.schema([("key", pa.string()), ("size", pa.int64()), ("sha256", pa.string()),
                                  ("rows", pa.int64()), ("subpartition", pa.int64())]))


def _written(pairs: list[tuple[ObjectEntry, int]]) -> Written:
    entries = sorted(pairs, key=lambda pair: pair[0].key)
    per_sub: dict[int, int] = {}
    for entry, rows in entries:
        if entry.subpartition >= 0:
            per_sub[entry.subpartition] = per_sub.get(entry.subpartition, 0) + rows
    return Written(tuple(e for e, _ in entries), sum(n for _, n in entries), per_sub)


def write_with_executors(df: DataFrame, target: Target, cut: Cut | None = None) -> Written:
    """Every Spark task uploads its own partition (cut into subpartitions by ``cut``); returns the objects."""
    frame = df if cut is None else cut.tag(df)
    rows = frame.mapInArrow(_TaskUploader(target.shipped(), cut is not None), _UPLOAD_SCHEMA).collect()
    return _written([(ObjectEntry(r["key"], int(r["size"]), r["sha256"], int(r["subpartition"])), int(r["rows"]))
                     for r in rows])


def write_with_driver(df: DataFrame, target: Target, cut: Cut | None = None) -> Written:
    """Collect the DataFrame as Arrow in the driver and upload it as one object (one per subpartition)."""
    if cut is None:
        return write_arrow(df.toArrow(), target)
    table = cut.tag(df).toArrow().sort_by(SUBPARTITION_COLUMN)
    return _written(list(write_split(target, iter(table.to_batches()), 0, 0)))


def write_arrow(table: pa.Table, target: Target) -> Written:
    """Upload an Arrow table as one Parquet object (no Spark needed)."""
    written = write_batches(target, iter(table.to_batches()), 0, 0)
    if written is None:
        return Written((), 0)
    return Written((written[0],), written[1])


def fetch(objects: Objects, keys: RunKeys, entry: ObjectEntry, verify: bool) -> bytearray:
    """GET one object of a manifest into one buffer of its recorded size, checking the size (and the SHA-256 if
    ``verify``, hashed while streaming): no second copy of the body is made."""
    key = keys.run_prefix + entry.key
    opened = objects.open(key)
    if opened is None:
        raise NotAvailable(f"object {key} listed in the manifest is missing")
    body, length = opened
    if length != entry.size:
        body.close()
        raise NotAvailable(f"object {key} has {length} bytes, manifest says {entry.size}")
    buffer = bytearray(length)
    digest = hashlib.sha256()
    filled = 0
    with memoryview(buffer) as view:
        for chunk in objects.chunks(key, body):
            end = filled + len(chunk)
            if end > length:
                raise NotAvailable(f"object {key} has more than {length} bytes, manifest says {entry.size}")
            view[filled:end] = chunk
            if verify:
                digest.update(chunk)
            filled = end
    if filled != length:
        raise NotAvailable(f"object {key} ended after {filled} of {length} bytes")
    if verify and digest.hexdigest() != entry.sha256:
        raise NotAvailable(f"object {key} does not match the SHA-256 in its manifest")
    return buffer


def load_table(objects: Objects, keys: RunKeys, entry: ObjectEntry, verify: bool) -> pa.Table:
    """One object of a manifest decoded from its fetched buffer (zero-copy input); the buffer is dropped after."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    return pq.read_table(pa.BufferReader(pa.py_buffer(fetch(objects, keys, entry, verify))))


def read_arrow(objects: Objects, keys: RunKeys, manifest: Manifest, verify: bool, threads: int = 4) -> pa.Table:
    """The committed version as one Arrow table (objects fetched and decoded in parallel, in manifest order)."""
    import pyarrow as pa
    from pyspark.sql.types import StructType

    with ThreadPoolExecutor(max_workers=max(1, threads)) as pool:
        tables = list(pool.map(lambda e: load_table(objects, keys, e, verify), manifest.objects))
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
        store = Objects(client_for(self.access), self.layout)
        for batch in batches:
            for number in batch.column(0).to_pylist():
                yield from load_table(store, self.keys, self.objects[number], self.verify).to_batches()


def read_dataframe(spark: SparkSession, target: Target, manifest: Manifest, verify: bool, mode: str,
                   objects: tuple[ObjectEntry, ...] | None = None) -> DataFrame:
    """The committed version as a DataFrame (lazy with ``executors``; fetched now with ``driver``); ``objects``:
    only these of its objects (a subpartition selection), default all."""
    from pyspark.sql.types import StructType

    schema = StructType.fromJson(_schema_json(manifest))
    chosen = manifest.objects if objects is None else objects
    if not chosen:
        return spark.createDataFrame([], schema)
    if mode == "driver":
        table = read_arrow(target.objects(), target.keys, dataclasses.replace(manifest, objects=chosen), verify,
                           target.threads)
        return spark.createDataFrame(table, schema=schema)
    count = len(chosen)
    reader = _TaskReader(portable(target.access), target.layout, target.keys, chosen, verify)
    return spark.range(0, count, 1, count).mapInArrow(reader, schema)

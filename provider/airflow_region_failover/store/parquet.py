"""Spark I/O, writing: persist a DataFrame as content-addressed Parquet objects of one attempt.

Two interchangeable paths, both working with embedded Spark and with Spark Connect (nothing relies on a
driver-local staging directory):

* ``executors`` (default): ``df.mapInArrow`` — every Spark task encodes its partition with pyarrow's Parquet writer
  into bounded objects held in memory (a new object starts once one reaches ``max_object_bytes``), and stores each
  content-addressed (:func:`.content.put_content`: nothing is uploaded for an object already there), logging
  ``uploaded X of Y bytes (N of M objects new)``; it returns one row per object, which the driver collects into the
  manifest. Executors need boto3 and pyarrow (with Spark Connect: start the server with ``PYSPARK_PYTHON``
  pointing at such a Python). Reading is :mod:`.reading`.
* ``driver``: ``df.toArrow()`` then the same encoding and puts from the driver. Bounded by driver memory; kept for
  servers whose executors cannot reach S3.

Where the session's JVM writes to the driver's disk, ``executors`` mode uses Spark's own Parquet writer instead and
stores its files from the driver (:mod:`.local_write`, chosen once per session by the facade); this module remains
the path everywhere else.

Determinism rule: the same rows in the same Spark partitions give the same bytes (fixed writer settings, the
dictionary choice made from the first batch, row groups and object cuts at Arrow/Parquet byte counts:
:mod:`.encoding`), so a restart or a scheduled run that re-produces a partition uploads nothing. The manifest lists
objects in task order, then subpartition, then sequence within the task.

Keyed partitions (a :class:`Cut`): the frame is tagged with each row's subpartition — Spark's own
``pmod(hash(key columns), max_parallelism)`` key group mapped to its consumer's range (:mod:`..graph.keygroups`) —
and every Spark task keeps one open encoder per subpartition (:func:`write_split`): each batch is split by its tag
in Arrow (:func:`.encoding.split_batch`), no sort of the task's rows as a whole (Spark's shuffle does none either:
measured, the sort cost the keyed write ~40 %), so every object holds one subpartition, in one pass; the tag column
is not stored; a key Parquet stores as an integer is delta-encoded without a dictionary (:attr:`Cut.codec`, as
the JVM path). A task's open encoders hold at most :data:`SPLIT_HELD_BYTES` (the largest one writes its pending
row group, or closes its object early, beyond that: decisions made at byte counts, so still deterministic).
Executors receive the store's access with credentials frozen at the moment of each write (:func:`.s3.clients.portable`).
"""

from __future__ import annotations

import dataclasses
import logging
import time
from collections.abc import Iterator
from concurrent.futures import Future
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from airflow_region_failover.exceptions import StepOutputError
from airflow_region_failover.graph.ids import PartitionId
from airflow_region_failover.graph.keygroups import key_group_range
from airflow_region_failover.store.config import MAX_OBJECT_BYTES
from airflow_region_failover.store.content import Stored, Tally, put_content
from airflow_region_failover.store.encoding import (
    RESULTS,
    SUBPARTITION_COLUMN,
    Codec,
    Encoded,
    ObjectEncoder,
    split_batches,
)
from airflow_region_failover.store.keys import Layout, RunKeys, cas_name
from airflow_region_failover.store.manifest import ObjectEntry
from airflow_region_failover.store.s3.clients import S3Access, client_for, portable
from airflow_region_failover.store.s3.objects import Objects
from airflow_region_failover.timeline import Waited

if TYPE_CHECKING:
    import pyarrow as pa
    from pyspark.sql import DataFrame

log = logging.getLogger(__name__)

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
        check_key_columns(self.partition_by, df.columns, self.where or "keyed exchange", "the result",
                          "fix partition_by or the step's output")
        return df.withColumn(SUBPARTITION_COLUMN, self.subpartition_column())

    @property
    def codec(self) -> Codec:
        """The pages of the cut's objects: the results' (:data:`.encoding.RESULTS`), the integer keys delta-encoded
        without a dictionary."""
        return dataclasses.replace(RESULTS, delta_keys=self.partition_by)

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
    max_object_bytes: int = MAX_OBJECT_BYTES

    def objects(self) -> Objects:
        """Guarded object operations through this process's cached client."""
        return Objects(client_for(self.access), self.layout)

    def shipped(self) -> Target:
        """This target as it is sent to Spark executors: credentials frozen now (:func:`.s3.clients.portable`)."""
        return dataclasses.replace(self, access=portable(self.access))

    def put(self, objects: Objects, body: pa.Buffer | bytes, subpartition: int) -> Stored:
        """Store one encoded object content-addressed (:func:`.content.put_content`), announced first under this
        attempt's writer token so that a sweeper never takes it for garbage while the write is under way."""
        def announce(digest: str) -> str:
            return self.keys.announcement(self.partition, self.attempt, self.writer, digest)

        return put_content(objects, self.layout, body, subpartition, part_size=self.part_size, threads=self.threads,
                           announce=announce)


@dataclass(frozen=True)
class Written:
    """What an attempt wrote: its objects (manifest order), the total row count, the rows per subpartition, how
    many bytes/objects it uploaded vs found already stored, and what its writers spent (``work``: seconds by kind,
    ``wait`` for their input rows, ``encode``, ``hash``, ``upload``, summed over the Spark tasks; and ``writers``,
    how many Spark tasks wrote objects)."""

    objects: tuple[ObjectEntry, ...]
    rows: int
    subpartition_rows: dict[int, int] = field(default_factory=dict)
    tally: Tally = field(default_factory=Tally)
    work: dict[str, float] = field(default_factory=dict)


@dataclass(frozen=True)
class Piece:
    """One object a Spark task wrote: where it comes in the manifest (``number``: the task, ``sequence`` within
    it), its rows, whether its bytes were uploaded now, and the seconds the task waited for its rows (``wait_s``)
    and encoded them (``encode_s``)."""

    stored: Stored
    rows: int
    number: int = 0
    sequence: int = 0
    wait_s: float = 0.0
    encode_s: float = 0.0

    @property
    def work(self) -> dict[str, float]:
        """Seconds by kind: ``wait``, ``encode``, ``hash``, ``upload``."""
        return {"wait": self.wait_s, "encode": self.encode_s, "hash": self.stored.hash_s,
                "upload": self.stored.upload_s}

    @property
    def order(self) -> tuple[int, int, int]:
        """Manifest order: task, subpartition, sequence."""
        return self.number, self.stored.entry.subpartition, self.sequence


SPLIT_HELD_BYTES = 192 * 1024 * 1024
"""What one task's open encoders of a keyed write may hold (Arrow rows waiting and open objects' bytes)."""


class _Storing:
    """Stores a task's encoded objects on a background thread while the next one is encoded: at most one in
    flight (so at most two objects in memory beyond the encoders'); an error in either stops the write. The time
    between two submissions that brought objects, less what the task waited for its ``rows`` meanwhile, is
    encoding; both go to the first object submitted (the task's timeline adds them up)."""

    def __init__(self, target: Target, number: int, rows: Waited[pa.RecordBatch] | None = None) -> None:
        from concurrent.futures import ThreadPoolExecutor

        self.target, self.number, self.objects, self.rows = target, number, target.objects(), rows
        self.pieces: list[Piece] = []
        self.sequences: dict[int, int] = {}
        self._pool = ThreadPoolExecutor(max_workers=1)
        self._pending: Future[Piece] | None = None
        self._mark, self._waited = time.perf_counter(), 0.0

    def submit(self, encoded: list[Encoded], subpartition: int) -> None:
        """Store each of ``encoded`` (objects of ``subpartition``, -1: not keyed), in order."""
        if not encoded:
            return
        waited = self.rows.seconds if self.rows is not None else 0.0
        wait_s = waited - self._waited
        encode_s = max(0.0, time.perf_counter() - self._mark - wait_s)
        for body, rows in encoded:
            sequence = self.sequences.get(subpartition, 0)
            self.sequences[subpartition] = sequence + 1
            self._wait()
            self._pending = self._pool.submit(self._store, body, rows, subpartition, sequence, wait_s, encode_s)
            wait_s = encode_s = 0.0
        self._mark, self._waited = time.perf_counter(), waited

    def _store(self, body: pa.Buffer, rows: int, subpartition: int, sequence: int, wait_s: float,
               encode_s: float) -> Piece:
        return Piece(self.target.put(self.objects, body, subpartition), rows, self.number, sequence, wait_s,
                     encode_s)

    def _wait(self) -> None:
        if self._pending is not None:
            self.pieces.append(self._pending.result())
            self._pending = None

    def __enter__(self) -> _Storing:
        return self

    def __exit__(self, kind: object, *rest: object) -> None:
        try:
            if kind is None:
                self._wait()
        finally:
            self._pool.shutdown(wait=True, cancel_futures=True)


def write_batches(target: Target, batches: Iterator[pa.RecordBatch], number: int,
                  subpartition: int = -1, codec: Codec = RESULTS) -> list[Piece]:
    """Encode ``batches`` as bounded objects (:func:`.encoding.encode_objects`, pages as ``codec`` says) and store
    each content-addressed; one :class:`Piece` per object (none for no rows). ``subpartition`` >= 0: they hold
    that subpartition."""
    timed = Waited(batches)
    with _Storing(target, number, timed) as storing:
        encoder = ObjectEncoder(target.max_object_bytes, codec)
        for batch in timed:
            storing.submit(encoder.add(batch), subpartition)
        storing.submit(encoder.finish(), subpartition)
    return storing.pieces


def write_split(target: Target, batches: Iterator[pa.RecordBatch], number: int, codec: Codec = RESULTS) -> list[Piece]:
    """The objects of each subpartition of tagged ``batches``, one open encoder per subpartition (pages as
    ``codec`` says), what they hold bounded by :data:`SPLIT_HELD_BYTES` (module rule)."""
    encoders: dict[int, ObjectEncoder] = {}
    timed = Waited(batches)
    with _Storing(target, number, timed) as storing:
        for sub, part in split_batches(timed):
            encoder = encoders.setdefault(sub, ObjectEncoder(target.max_object_bytes, codec))
            storing.submit(encoder.add(part), sub)
            while sum(e.held_bytes for e in encoders.values()) > SPLIT_HELD_BYTES:
                fullest, largest = max(encoders.items(), key=lambda pair: (pair[1].held_bytes, -pair[0]))
                storing.submit(largest.flush() if largest.pending_bytes else [largest.close()], fullest)
        for sub in sorted(encoders):
            storing.submit(encoders[sub].finish(), sub)
    return storing.pieces


_PIECE_FIELDS = (("sha256", "string"), ("size", "int64"), ("rows", "int64"), ("subpartition", "int64"),
                 ("number", "int64"), ("sequence", "int64"), ("uploaded", "bool_"), ("wait_s", "float64"),
                 ("encode_s", "float64"), ("hash_s", "float64"), ("upload_s", "float64"))
"""The row a task yields per object: (name, pyarrow type factory)."""
_SPARK_TYPES = {"string": "string", "int64": "long", "bool_": "boolean", "float64": "double"}
_UPLOAD_SCHEMA = ", ".join(f"{name} {_SPARK_TYPES[kind]}" for name, kind in _PIECE_FIELDS)


@dataclass(frozen=True)
class _TaskUploader:
    """The ``mapInArrow`` function: writes one Spark partition (split by subpartition with ``cut``), logs what
    it uploaded, and yields one row per object (:data:`_PIECE_FIELDS`)."""

    target: Target
    cut: Cut | None = None

    def __call__(self, batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        from pyspark import TaskContext

        context = TaskContext.get()
        number = context.partitionId() if context else 0
        if self.cut is None:
            pieces = write_batches(self.target, iter(batches), number)
        else:
            pieces = write_split(self.target, iter(batches), number, self.cut.codec)
        log.info("%s task %d: %s", self.target.partition, number, _tally(pieces).describe())
        if pieces:
            yield piece_rows(pieces)


def piece_rows(pieces: list[Piece]) -> pa.RecordBatch:
    """The rows a Spark task yields for its objects (:data:`_PIECE_FIELDS`)."""
    import pyarrow as pa

    return pa.RecordBatch.from_pylist(
        [{"sha256": p.stored.entry.sha256, "size": p.stored.entry.size, "rows": p.rows,
          "subpartition": p.stored.entry.subpartition, "number": p.number, "sequence": p.sequence,
          "uploaded": p.stored.uploaded, "wait_s": p.wait_s, "encode_s": p.encode_s, "hash_s": p.stored.hash_s,
          "upload_s": p.stored.upload_s} for p in pieces],
        schema=pa.schema([(name, getattr(pa, kind)()) for name, kind in _PIECE_FIELDS]))


def written_from_rows(rows: list[Any]) -> Written:
    """The driver's view of what the tasks wrote, from their collected :func:`piece_rows`."""
    return _written([Piece(Stored(ObjectEntry(cas_name(r["sha256"]), int(r["size"]), r["sha256"],
                                              int(r["subpartition"]), shared=True), bool(r["uploaded"]),
                                  float(r["hash_s"]), float(r["upload_s"])),
                           int(r["rows"]), int(r["number"]), int(r["sequence"]), float(r["wait_s"]),
                           float(r["encode_s"])) for r in rows])


def _tally(pieces: list[Piece]) -> Tally:
    tally = Tally()
    for piece in pieces:
        tally = tally.add(piece.stored)
    return tally


def _written(pieces: list[Piece]) -> Written:
    ordered = sorted(pieces, key=lambda piece: piece.order)
    per_sub: dict[int, int] = {}
    for piece in ordered:
        if piece.stored.entry.subpartition >= 0:
            sub = piece.stored.entry.subpartition
            per_sub[sub] = per_sub.get(sub, 0) + piece.rows
    work: dict[str, float] = {}
    for piece in ordered:
        for kind, seconds in piece.work.items():
            work[kind] = work.get(kind, 0.0) + seconds
    work["writers"] = float(len({p.number for p in ordered}))
    return Written(tuple(p.stored.entry for p in ordered), sum(p.rows for p in ordered), per_sub, _tally(ordered),
                   work)


def write_with_executors(df: DataFrame, target: Target, cut: Cut | None = None) -> Written:
    """Every Spark task writes its own partition (cut into subpartitions by ``cut``); returns the objects."""
    frame = df if cut is None else cut.tag(df)
    rows = frame.mapInArrow(_TaskUploader(target.shipped(), cut), _UPLOAD_SCHEMA).collect()
    return written_from_rows(rows)


def write_with_driver(df: DataFrame, target: Target, cut: Cut | None = None) -> Written:
    """Collect the DataFrame as Arrow in the driver and write it from there (split by subpartition with ``cut``)."""
    if cut is None:
        return write_arrow(df.toArrow(), target)
    return _written(write_split(target, iter(cut.tag(df).toArrow().to_batches()), 0, cut.codec))


def write_arrow(table: pa.Table, target: Target, codec: Codec = RESULTS) -> Written:
    """Write an Arrow table as bounded content-addressed objects (no Spark needed), pages as ``codec`` says."""
    return _written(write_batches(target, iter(table.to_batches()), 0, codec=codec))

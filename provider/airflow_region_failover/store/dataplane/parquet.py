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
stores its files from the driver (:mod:`.local_write`, chosen once per session by the result store); this module remains
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

import logging
import time
from collections.abc import Iterator
from concurrent.futures import Future
from dataclasses import dataclass
from typing import TYPE_CHECKING

from airflow_region_failover.store.dataplane.encoding import (
    RESULTS,
    Codec,
    Encoded,
    ObjectEncoder,
    split_batches,
)
from airflow_region_failover.store.dataplane.types import (
    UPLOAD_SCHEMA,
    Cut,
    Piece,
    Target,
    Written,
    piece_rows,
    tally,
    written,
    written_from_rows,
)
from airflow_region_failover.timeline import Waited

if TYPE_CHECKING:
    import pyarrow as pa
    from pyspark.sql import DataFrame

log = logging.getLogger(__name__)

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
        log.info("%s task %d: %s", self.target.partition, number, tally(pieces).describe())
        if pieces:
            yield piece_rows(pieces)


def write_with_executors(df: DataFrame, target: Target, cut: Cut | None = None) -> Written:
    """Every Spark task writes its own partition (cut into subpartitions by ``cut``); returns the objects."""
    frame = df if cut is None else cut.tag(df)
    rows = frame.mapInArrow(_TaskUploader(target.shipped(), cut), UPLOAD_SCHEMA).collect()
    return written_from_rows(rows)


def write_with_driver(df: DataFrame, target: Target, cut: Cut | None = None) -> Written:
    """Collect the DataFrame as Arrow in the driver and write it from there (split by subpartition with ``cut``)."""
    if cut is None:
        return write_arrow(df.toArrow(), target)
    return written(write_split(target, iter(cut.tag(df).toArrow().to_batches()), 0, cut.codec))


def write_arrow(table: pa.Table, target: Target, codec: Codec = RESULTS) -> Written:
    """Write an Arrow table as bounded content-addressed objects (no Spark needed), pages as ``codec`` says."""
    return written(write_batches(target, iter(table.to_batches()), 0, codec=codec))

"""Spark I/O of a clustered result (``cluster_by``): sorted (sub)partitions cut into content-defined Parquet files.

Rules:

* Sequences: a keyed partition (a :class:`~.types.Cut`) is one sequence per subpartition; a whole partition is
  one sequence per *bucket* — ``pmod(hash(cluster key), WHOLE_BUCKETS)`` — so which rows form a sequence depends
  on the rows alone, never on how many Spark tasks the step's DataFrame happened to have. The frame is tagged
  with its sequence (:data:`~.parquet.SUBPARTITION_COLUMN`, never stored), shuffled so that every sequence lies in
  one Spark task (``repartition(n, tag)``; a requested count is one adaptive execution does not coalesce), and
  sorted within each task by tag, cluster key, then the other columns (:func:`~.chunking.sort_order`; columns
  Spark cannot order — maps — are left out, so rows equal in everything else may swap and only cost sharing).
* Every task cuts each of its sequences with :func:`~.chunking.chunk_batches` and stores each chunk's
  :func:`~.chunking.encode`-d body content-addressed (:func:`~..content.put_content`): a chunk whose bytes are
  already in the shared area uploads nothing, which is what makes unchanged rows free in the next run.
* A cluster column missing from the step's output, or nested (array, map, struct: its values are not hashed), is a
  :class:`StepOutputError` naming the step, the edge and the column (like ``partition_by``'s
  :func:`~.types.check_key_columns`), raised on the driver before any task runs.
"""

from __future__ import annotations

import itertools
import logging
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from airflow_region_failover.exceptions import StepOutputError
from airflow_region_failover.store.dataplane.chunking import ChunkPolicy, chunk_batches, encode, sort_order
from airflow_region_failover.store.dataplane.encoding import SUBPARTITION_COLUMN, split_batches
from airflow_region_failover.store.dataplane.types import (
    UPLOAD_SCHEMA,
    Cut,
    Piece,
    Target,
    Written,
    check_key_columns,
    key_group_column,
    piece_rows,
    tally,
    written,
    written_from_rows,
)

if TYPE_CHECKING:
    import pyarrow as pa
    from pyspark.sql import DataFrame

log = logging.getLogger(__name__)
WHOLE_BUCKETS = 8
"""Sequences a whole (unkeyed) clustered partition is cut into, by the hash of its cluster key."""


@dataclass(frozen=True)
class Clustering:
    """A result stored sorted by ``cluster_by`` in content-defined files of ``policy``'s size; ``where`` names the
    producing step and edge in errors."""

    cluster_by: tuple[str, ...]
    policy: ChunkPolicy = field(default_factory=ChunkPolicy)
    where: str = ""

    def check(self, columns: list[str]) -> None:
        """:class:`StepOutputError` naming the first cluster column missing from ``columns`` (module rule)."""
        missing = [c for c in self.cluster_by if c not in columns]
        if missing:
            raise StepOutputError(f"{self.where or 'clustered result'}: cluster_by column {missing[0]!r} is not a "
                                  f"column of the result (columns: {', '.join(columns)}); fix cluster_by or the "
                                  "step's output")

    def prepare(self, df: DataFrame, cut: Cut | None) -> DataFrame:
        """``df`` tagged by sequence, one sequence per Spark task, sorted (module rule)."""
        from pyspark.sql import functions as F
        from pyspark.sql.types import ArrayType, MapType, StructType

        self.check(df.columns)
        for column in df.schema.fields:
            if column.name in self.cluster_by and isinstance(column.dataType, (ArrayType, MapType, StructType)):
                raise StepOutputError(f"{self.where or 'clustered result'}: cluster_by column {column.name!r} is "
                                      f"of type {column.dataType.simpleString()}; cluster by flat columns only")
        if cut is None:
            tag, count = key_group_column(self.cluster_by, WHOLE_BUCKETS), WHOLE_BUCKETS
        else:
            check_key_columns(cut.partition_by, df.columns, cut.where or "keyed exchange", "the result",
                              "fix partition_by or the step's output")
            tag, count = cut.subpartition_column(), cut.parallelism
        orderable = [f.name for f in df.schema.fields if not isinstance(f.dataType, MapType)]
        order = [F.col("`" + c.replace("`", "``") + "`") for c in sort_order(orderable, self.cluster_by)]
        return (df.withColumn(SUBPARTITION_COLUMN, tag).repartition(count, F.col(SUBPARTITION_COLUMN))
                .sortWithinPartitions(F.col(SUBPARTITION_COLUMN), *order))


def write_sequences(target: Target, batches: Iterator[pa.RecordBatch], clustering: Clustering, number: int,
                    keyed: bool) -> list[Piece]:
    """Chunk every tagged, sorted sequence of ``batches`` and store each chunk content-addressed (module rule);
    one :class:`~.types.Piece` per object, in sequence order."""
    objects = target.objects()
    pieces: list[Piece] = []
    sequence = itertools.count()
    for tag, runs in itertools.groupby(split_batches(batches), key=lambda pair: pair[0]):
        sub = tag if keyed else -1
        for chunk in chunk_batches((batch for _, batch in runs), clustering.cluster_by, clustering.policy):
            stored = target.put(objects, encode(chunk), sub)
            pieces.append(Piece(stored, chunk.num_rows, number, next(sequence)))
    return pieces


@dataclass(frozen=True)
class _ClusteredUploader:
    """The ``mapInArrow`` function: one Spark task's sequences as chunk objects, a row per object."""

    target: Target
    clustering: Clustering
    keyed: bool

    def __call__(self, batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        from pyspark import TaskContext

        context = TaskContext.get()
        number = context.partitionId() if context else 0
        pieces = write_sequences(self.target, iter(batches), self.clustering, number, self.keyed)
        log.info("%s task %d: %s", self.target.partition, number, tally(pieces).describe())
        if pieces:
            yield piece_rows(pieces)


def write_with_executors(df: DataFrame, target: Target, cut: Cut | None, clustering: Clustering) -> Written:
    """Every Spark task chunks and stores its sequences; returns the objects (module rule)."""
    frame = clustering.prepare(df, cut)
    rows = frame.mapInArrow(_ClusteredUploader(target.shipped(), clustering, cut is not None),
                            UPLOAD_SCHEMA).collect()
    return written_from_rows(rows)


def write_with_driver(df: DataFrame, target: Target, cut: Cut | None, clustering: Clustering) -> Written:
    """Collect the prepared frame as Arrow in the driver, then chunk and upload it there."""
    table = clustering.prepare(df, cut).toArrow()
    batches = iter(table.to_batches())
    return written(write_sequences(target, batches, clustering, 0, cut is not None))

"""The write protocol's types, shared by the three writers (:mod:`.parquet`: ``mapInArrow``, :mod:`.local_write`:
Spark's JVM writer, :mod:`.clustered`: sorted chunks) and the engines that call them.

Rules: a write goes to one :class:`Target` (one attempt's keys, its writer token and upload tuning); a keyed write
is cut by a :class:`Cut` (Spark's own ``pmod(hash(key columns), max_parallelism)`` key group mapped to its
consumer's range); every object a Spark task stores is a :class:`Piece`, and what an attempt wrote is the
:class:`Written` made of its pieces by :func:`written`, in manifest order (task, subpartition, sequence) whatever
the writer. A Python writer's tasks hand their pieces to the driver as rows of :data:`UPLOAD_SCHEMA`
(:func:`piece_rows`, read back by :func:`written_from_rows`).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from airflow_region_failover.exceptions import StepOutputError
from airflow_region_failover.graph.ids import PartitionId
from airflow_region_failover.graph.keygroups import key_group_range
from airflow_region_failover.store.config import MAX_OBJECT_BYTES
from airflow_region_failover.store.content import Stored, Tally, put_content
from airflow_region_failover.store.dataplane.encoding import RESULTS, SUBPARTITION_COLUMN, Codec
from airflow_region_failover.store.key_checks import cas_name
from airflow_region_failover.store.keys import Layout, RunKeys
from airflow_region_failover.store.manifest import ObjectEntry
from airflow_region_failover.store.s3.clients import S3Access, client_for, portable
from airflow_region_failover.store.s3.objects import Objects

if TYPE_CHECKING:
    import pyarrow as pa
    from pyspark.sql import DataFrame


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


def column(name: str) -> Any:
    """The Spark column named ``name`` exactly (back-quoted: a dot or a back-quote in it is part of the name)."""
    from pyspark.sql import functions as F

    return F.col("`" + name.replace("`", "``") + "`")


def key_group_column(partition_by: tuple[str, ...], max_parallelism: int) -> Any:
    """Spark's key group of a row: ``pmod(hash(key columns), max_parallelism)`` (what ``repartition`` uses)."""
    from pyspark.sql import functions as F

    return F.pmod(F.hash(*[column(c) for c in partition_by]), F.lit(max_parallelism))


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


PIECE_FIELDS = (("sha256", "string"), ("size", "int64"), ("rows", "int64"), ("subpartition", "int64"),
                 ("number", "int64"), ("sequence", "int64"), ("uploaded", "bool_"), ("wait_s", "float64"),
                 ("encode_s", "float64"), ("hash_s", "float64"), ("upload_s", "float64"))
"""The row a task yields per object: (name, pyarrow type factory)."""
SPARK_TYPES = {"string": "string", "int64": "long", "bool_": "boolean", "float64": "double"}
UPLOAD_SCHEMA = ", ".join(f"{name} {SPARK_TYPES[kind]}" for name, kind in PIECE_FIELDS)
"""The Spark schema of those rows (``mapInArrow``'s output)."""


def piece_rows(pieces: list[Piece]) -> pa.RecordBatch:
    """The rows a Spark task yields for its objects (:data:`PIECE_FIELDS`)."""
    import pyarrow as pa

    return pa.RecordBatch.from_pylist(
        [{"sha256": p.stored.entry.sha256, "size": p.stored.entry.size, "rows": p.rows,
          "subpartition": p.stored.entry.subpartition, "number": p.number, "sequence": p.sequence,
          "uploaded": p.stored.uploaded, "wait_s": p.wait_s, "encode_s": p.encode_s, "hash_s": p.stored.hash_s,
          "upload_s": p.stored.upload_s} for p in pieces],
        schema=pa.schema([(name, getattr(pa, kind)()) for name, kind in PIECE_FIELDS]))


def written_from_rows(rows: list[Any]) -> Written:
    """The driver's view of what the tasks wrote, from their collected :func:`piece_rows`."""
    return written([Piece(Stored(ObjectEntry(cas_name(r["sha256"]), int(r["size"]), r["sha256"],
                                              int(r["subpartition"]), shared=True), bool(r["uploaded"]),
                                  float(r["hash_s"]), float(r["upload_s"])),
                           int(r["rows"]), int(r["number"]), int(r["sequence"]), float(r["wait_s"]),
                           float(r["encode_s"])) for r in rows])


def tally(pieces: list[Piece]) -> Tally:
    """What ``pieces`` uploaded vs found already stored."""
    tally = Tally()
    for piece in pieces:
        tally = tally.add(piece.stored)
    return tally


def written(pieces: list[Piece]) -> Written:
    """What an attempt wrote, from its pieces in any order: manifest order (:attr:`Piece.order`), rows in all and
    per subpartition, the tally, the work summed (and ``writers``: how many Spark tasks wrote objects)."""
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
    return Written(tuple(p.stored.entry for p in ordered), sum(p.rows for p in ordered), per_sub, tally(ordered),
                   work)

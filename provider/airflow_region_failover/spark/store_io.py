"""A subtask's view of the result store: write a partition for one try, read exactly a published one.

Rule: :meth:`StoreIO.read` reads the version a :class:`~.exchange.PartitionRef` names and nothing else: if the
store's current version of that partition is another attempt (a newer try superseded it, or it was retired),
the read fails with :class:`~airflow_region_failover.exceptions.NotAvailable` instead of returning other data.
A keyed read (:meth:`StoreIO.read_keys`) fetches only the subpartitions the reader's key groups overlap and
drops other key groups' rows when a subpartition holds some (a partition cut another way). :attr:`StoreIO.reads`
counts what this process read — bytes and objects fetched, and the bytes of the partitions they belong to —
which a subtask reports (read amplification). The store is the deployment's
(:func:`~airflow_region_failover.store.result_store.default_store`), built once per process.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING

from airflow_region_failover.exceptions import NotAvailable
from airflow_region_failover.graph.ids import PartitionId
from airflow_region_failover.graph.model import Edge
from airflow_region_failover.spark.exchange import PartitionRef
from airflow_region_failover.store.dataplane.clustered import Clustering
from airflow_region_failover.store.dataplane.reading import JvmRead
from airflow_region_failover.store.dataplane.types import Cut, check_key_columns, key_group_column
from airflow_region_failover.store.manifest import InputVersion, Manifest
from airflow_region_failover.store.result_store import ResultStore, default_store

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession


@dataclass
class ReadCounter:
    """What was read: bytes and objects fetched, and the bytes of the partitions they belong to."""

    bytes: int = 0
    objects: int = 0
    partition_bytes: int = 0

    def add(self, fetched: int, objects: int, partition: int) -> None:
        """Count one read."""
        self.bytes += fetched
        self.objects += objects
        self.partition_bytes += partition


@dataclass(frozen=True)
class StoreIO:
    """Reads and writes partitions of the step operator through one :class:`ResultStore`."""

    store: ResultStore
    reads: ReadCounter = field(default_factory=ReadCounter, compare=False)
    #: every committed manifest this process wrote or looked up, by partition (the task's lineage, :mod:`.ledger`)
    seen: dict[PartitionId, Manifest] = field(default_factory=dict, compare=False)
    #: the reads given to Spark's own reader, confirmed unchanged before each write commits (store/dataplane/reading.py)
    jvm_reads: list[JvmRead] = field(default_factory=list, compare=False)

    def write(self, frame: DataFrame, ref: PartitionRef, inputs: tuple[InputVersion, ...] = (),
              code: str = "", cut: Cut | None = None, clustering: Clustering | None = None) -> PartitionRef:
        """Persist and commit ``frame`` as ``ref``'s partition and attempt (cut into subpartitions by ``cut``),
        recording the BLOCKING ``inputs`` it was computed from and the fingerprint of the ``code`` that computed
        it, stored sorted in content-defined files when ``clustering`` is given; returns ``ref`` with its rows."""
        manifest, _ = self.store.write(frame, ref.attempt_id, inputs, code, cut, clustering, tuple(self.jvm_reads))
        self.seen[ref.partition] = manifest
        return replace(ref, rows=manifest.row_count)

    def committed(self, dag_id: str, run_id: str, partition: PartitionId) -> Manifest | None:
        """The current committed manifest of ``partition``, or None if it has none."""
        try:
            manifest = self.store.manifest(dag_id, run_id, partition)
        except NotAvailable:
            return None
        self.seen[partition] = manifest
        return manifest

    def read(self, spark: SparkSession, ref: PartitionRef, current: Manifest | None = None) -> DataFrame:
        """The DataFrame of exactly ``ref``'s attempt (``NotAvailable`` if the current version is another);
        ``current`` is that version when the caller already looked it up with :meth:`current`."""
        manifest = current if current is not None else self.current(ref)
        self.reads.add(manifest.total_bytes, len(manifest.objects), manifest.total_bytes)
        return self.store.read_version(spark, manifest, checked=self.jvm_reads)

    def read_keys(self, spark: SparkSession, ref: PartitionRef, edge: Edge, key_groups: range,
                  current: Manifest | None = None) -> DataFrame:
        """The rows of ``key_groups`` of exactly ``ref``'s attempt, read over the keyed ``edge`` (module rule)."""
        manifest = current if current is not None else self.current(ref)
        selection = manifest.select(key_groups, edge.partition_by, edge.max_parallelism)
        self.reads.add(selection.bytes, len(selection.objects), manifest.total_bytes)
        frame = self.store.read_version(spark, manifest, selection.objects, self.jvm_reads)
        if not selection.filtered:
            return frame
        check_key_columns(edge.partition_by, frame.columns, f"step {edge.target!r}, {edge}", str(ref.partition),
                          "fix partition_by")
        group = key_group_column(edge.partition_by, edge.max_parallelism)
        return frame.filter(group.between(key_groups.start, key_groups.stop - 1))

    def current(self, ref: PartitionRef) -> Manifest:
        """The current committed manifest of ``ref``'s partition, which must be ``ref``'s attempt
        (``NotAvailable`` otherwise)."""
        current = self.store.manifest(ref.dag_id, ref.run_id, ref.partition)
        if current.attempt != ref.attempt:
            raise NotAvailable(f"{ref.partition}: its producer published attempt {ref.attempt}, but the current "
                               f"version is attempt {current.attempt}")
        self.seen[ref.partition] = current
        return current


def open_store_io() -> StoreIO:
    """The process-wide :class:`StoreIO` (the deployment's store, see the module rule)."""
    return StoreIO(default_store())

"""A subtask's view of the result store: write a partition for one try, read exactly a published one.

Rule: :meth:`StoreIO.read` reads the version a :class:`~.exchange.PartitionRef` names and nothing else: if the
store's current version of that partition is another attempt (a newer try superseded it, or it was retired),
the read fails with :class:`~airflow_region_failover.exceptions.NotAvailable` instead of returning other data.
The store is the deployment's (:func:`~airflow_region_failover.store.facade.default_store`), built once per
process.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

from airflow_region_failover.exceptions import NotAvailable
from airflow_region_failover.graph.ids import PartitionId
from airflow_region_failover.spark.exchange import PartitionRef
from airflow_region_failover.store.facade import ResultStore, default_store
from airflow_region_failover.store.manifest import InputVersion, Manifest

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession


@dataclass(frozen=True)
class StoreIO:
    """Reads and writes partitions of the step operator through one :class:`ResultStore`."""

    store: ResultStore

    def write(self, frame: DataFrame, ref: PartitionRef, inputs: tuple[InputVersion, ...] = (),
              code: str = "") -> PartitionRef:
        """Persist and commit ``frame`` as ``ref``'s partition and attempt, recording the BLOCKING ``inputs`` it
        was computed from and the fingerprint of the ``code`` that computed it; returns ``ref`` with its rows."""
        manifest = self.store.write(frame, ref.dag_id, ref.run_id, ref.partition, ref.attempt, inputs, code)
        return replace(ref, rows=manifest.row_count)

    def committed(self, dag_id: str, run_id: str, partition: PartitionId) -> Manifest | None:
        """The current committed manifest of ``partition``, or None if it has none."""
        try:
            return self.store.manifest(dag_id, run_id, partition)
        except NotAvailable:
            return None

    def read(self, spark: SparkSession, ref: PartitionRef, current: Manifest | None = None) -> DataFrame:
        """The DataFrame of exactly ``ref``'s attempt (``NotAvailable`` if the current version is another);
        ``current`` is that version when the caller already looked it up with :meth:`current`."""
        return self.store.read_version(spark, current if current is not None else self.current(ref))

    def current(self, ref: PartitionRef) -> Manifest:
        """The current committed manifest of ``ref``'s partition, which must be ``ref``'s attempt
        (``NotAvailable`` otherwise)."""
        current = self.store.manifest(ref.dag_id, ref.run_id, ref.partition)
        if current.attempt != ref.attempt:
            raise NotAvailable(f"{ref.partition}: its producer published attempt {ref.attempt}, but the current "
                               f"version is attempt {current.attempt}")
        return current


def open_store_io() -> StoreIO:
    """The process-wide :class:`StoreIO` (the deployment's store, see the module rule)."""
    return StoreIO(default_store())

"""The step operator's view of the result store: write a partition for one try, read exactly a published one.

Rule: :meth:`StoreIO.read` reads the version a :class:`~.exchange.PartitionRef` names and nothing else: if the
store's current version of that partition is another attempt (a newer try superseded it, or the failover loop
retired it), the read fails with :class:`~airflow_region_failover.store.errors.NotAvailable` instead of
returning other data. The store is built once per process from ``[region_failover]`` and its ``aws``
connection (``ResultStore.from_airflow``).
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

from airflow_region_failover.spark.exchange import PartitionRef

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

    from airflow_region_failover.store import ResultStore

_LOCK = threading.Lock()
_STORE: list[ResultStore] = []


@dataclass(frozen=True)
class StoreIO:
    """Reads and writes partitions of the step operator through one :class:`ResultStore`."""

    store: ResultStore

    def write(self, frame: DataFrame, ref: PartitionRef) -> PartitionRef:
        """Persist and commit ``frame`` as ``ref``'s partition and attempt; returns ``ref`` with its row count."""
        manifest = self.store.write(frame, ref.dag_id, ref.run_id, ref.partition, ref.attempt)
        return replace(ref, rows=manifest.row_count)

    def read(self, spark: SparkSession, ref: PartitionRef) -> DataFrame:
        """The DataFrame of exactly ``ref``'s attempt (``NotAvailable`` if the current version is another)."""
        from airflow_region_failover.store.errors import NotAvailable

        current = self.store.manifest(ref.dag_id, ref.run_id, ref.partition)
        if current.attempt != ref.attempt:
            raise NotAvailable(f"{ref.partition}: its producer published attempt {ref.attempt}, but the current "
                               f"version is attempt {current.attempt}")
        return self.store.read(spark, ref.dag_id, ref.run_id, ref.partition)


def open_store_io() -> StoreIO:
    """The process-wide :class:`StoreIO` (store configured from airflow.cfg + its aws connection)."""
    if not _STORE:
        with _LOCK:
            if not _STORE:
                from airflow_region_failover.store import ResultStore

                _STORE.append(ResultStore.from_airflow())
    return StoreIO(_STORE[0])


def reset_store_io() -> None:
    """Forget the cached store (tests that switch servers or configuration)."""
    with _LOCK:
        _STORE.clear()

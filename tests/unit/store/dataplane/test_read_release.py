"""A decoded object's buffer is gone when its decode returns (store/dataplane/reading.py's memory rule: "the
buffer is dropped as soon as its table is decoded"), so a read holds only the objects in flight.

CI failed ``test_store_memory.py`` with a third object alive in a read of two threads: ``pq.read_table`` decodes
through Arrow's dataset scanner, whose threads drop their reference to the input a moment after the call returns
(here in about one decode in twelve, more on a loaded machine); a ``ParquetFile`` read with neither pre-buffering nor
Arrow's threads drops it before returning."""

from __future__ import annotations

import io
import weakref

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from airflow_region_failover.graph.ids import PartitionId
from airflow_region_failover.store.dataplane import reading
from airflow_region_failover.store.manifest import ObjectEntry


class _Body(bytearray):
    """A fetched body that can be watched with a weak reference (a plain ``bytearray`` cannot)."""


def test_the_fetched_buffer_is_released_before_its_decode_returns(monkeypatch: pytest.MonkeyPatch) -> None:
    table = pa.table({"k": list(range(20_000)), "s": [f"customer-{i}" for i in range(20_000)]})
    sink = io.BytesIO()
    pq.write_table(table, sink)
    watched: list[weakref.ref[_Body]] = []

    def fetch(*_: object) -> bytearray:
        body = _Body(sink.getvalue())
        watched.append(weakref.ref(body))
        return body

    monkeypatch.setattr(reading, "fetch", fetch)
    entry = ObjectEntry("objects/0.parquet", len(sink.getvalue()), "0" * 64)
    for _ in range(300):
        decoded = reading.load_table(None, None, entry, True, PartitionId("orders->join", 0))  # type: ignore[arg-type]
        released = watched[-1]() is None
        assert released, f"decode {len(watched)} returned with its input buffer still alive"
        assert decoded.equals(table)

"""Partition indexes up to 999999 are legal; keys write ``p{index:05d}``, six digits from 100000 on — readers, the
availability check and the sweeper must see those partitions too (moto, in-process)."""

from __future__ import annotations

import time

import pyarrow as pa
import pytest

from airflow_region_failover.graph.ids import PartitionId
from airflow_region_failover.store.keys import AttemptId
from airflow_region_failover.store.result_store import ResultStore

WIDE = PartitionId("clean->join", 123456)
RUN = ("etl", "manual__1")


def test_a_six_digit_partition_is_read_back_and_available(store: ResultStore) -> None:
    manifest, _ = store.write_arrow(pa.table({"x": [1, 2, 3]}), AttemptId(*RUN, WIDE, 1))
    assert store.run_keys(*RUN).manifest(WIDE, 1).endswith("/p123456/a000001.json")
    assert store.manifest(*RUN, WIDE) == manifest
    assert store.read_arrow(store.manifest(*RUN, WIDE)).column("x").to_pylist() == [1, 2, 3]
    assert store.is_available(*RUN, WIDE, "fast") and store.checker(*RUN, "deep").is_available(WIDE)
    assert store.partitions(*RUN, WIDE.result) == (WIDE,)


def test_a_six_digit_partition_is_superseded_like_any_other(store: ResultStore) -> None:
    store.write_arrow(pa.table({"x": [1]}), AttemptId(*RUN, WIDE, 2))
    with pytest.raises(Exception, match=r"has committed|retired"):
        store.write_arrow(pa.table({"x": [9]}), AttemptId(*RUN, WIDE, 1))
    assert store.read_arrow(store.manifest(*RUN, WIDE)).column("x").to_pylist() == [1]


def test_the_sweeper_keeps_a_committed_six_digit_partition(store: ResultStore) -> None:
    manifest, _ = store.write_arrow(pa.table({"x": [1, 2, 3]}), AttemptId(*RUN, WIDE, 1))
    keys = store.run_keys(*RUN)
    before = sorted(i.key for i in store.objects.listing(keys.run_prefix) if not i.key.endswith(".ref"))

    store.sweep(grace_seconds=3600, now=time.time() + 3605)

    assert sorted(i.key for i in store.objects.listing(keys.run_prefix)) == before  # announcements swept
    assert store.objects.head_size(keys.object_key(manifest.objects[0].key, manifest.objects[0].shared)) is not None

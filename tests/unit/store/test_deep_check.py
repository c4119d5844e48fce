"""The deep availability check sends one HEAD per distinct shared object, several at a time, however many
partitions list it (it sent one per listing, one after the other: 12,800 sequential HEADs for a consumer of 200
partitions of 64 objects) — on moto's in-memory S3, counting the HEADs the client sends.

    r#0 .. r#3: three objects each of their own, three shared by all four ==> one consumer reads all of them
"""

from __future__ import annotations

from airflow_region_failover.graph.ids import PartitionId
from airflow_region_failover.store import commit as protocol
from airflow_region_failover.store.availability import Mode
from airflow_region_failover.store.content import put_content
from airflow_region_failover.store.manifest import Manifest
from airflow_region_failover.store.result_store import ResultStore
from tests.support.store import HeadCounter

PARTITIONS = 4


def commit_partitions(store: ResultStore) -> int:
    """Commit r#0..r#3 (three own objects each, three shared by all) and return the number of distinct objects."""
    common = [put_content(store.objects, store.layout, f"common {k}".encode()).entry for k in range(3)]
    keys = store.run_keys("d", "r1")
    for index in range(PARTITIONS):
        own = [put_content(store.objects, store.layout, f"own {index} {k}".encode()).entry for k in range(3)]
        manifest = Manifest("d", "r1", PartitionId("r", index), 1, "0123456789abcdef", "{}", 0, (*common, *own),
                            protocol.now_iso())
        protocol.commit(store.objects, keys, manifest)
    return 3 + 3 * PARTITIONS


def test_the_deep_check_heads_each_distinct_object_once_several_at_a_time(store: ResultStore) -> None:
    distinct = commit_partitions(store)
    counter = HeadCounter(store.objects.client)
    checker = store.checker("d", "r1", Mode.DEEP)
    assert all(checker.is_available(PartitionId("r", i)) for i in range(PARTITIONS))
    assert (counter.sent, counter.most > 1) == (distinct, True), \
        f"{counter.sent} HEADs for {distinct} distinct objects, at most {counter.most} at a time"

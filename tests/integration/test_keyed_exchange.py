"""Keyed exchanges through the real store (SeaweedFS) and real Spark (embedded and Spark Connect): key groups
agree with Spark's own hash partitioning, one pass writes one subpartition per consumer, each consumer reads
exactly its subpartition (read amplification 1.0), and a consumer at another parallelism still reads exactly its
keys."""

from __future__ import annotations

import secrets
from collections.abc import Iterator
from typing import Any

import pytest

from airflow_region_failover import JobGraphBuilder
from airflow_region_failover.exceptions import StepOutputError
from airflow_region_failover.graph.ids import PartitionId
from airflow_region_failover.graph.keygroups import key_group_range
from airflow_region_failover.graph.model import Exchange
from airflow_region_failover.spark.exchange import PartitionRef
from airflow_region_failover.spark.store_io import StoreIO
from airflow_region_failover.standalone.seaweedfs import S3Endpoint
from airflow_region_failover.store.dataplane.types import Cut, key_group_column
from airflow_region_failover.store.keys import AttemptId
from airflow_region_failover.store.result_store import ResultStore
from tests.support.spark import spark_session

pytestmark = pytest.mark.integration

P = PartitionId("orders", 0)
KEYS = ("customer", "region")


@pytest.fixture(scope="module", params=["embedded", "connect"])
def spark(request: pytest.FixtureRequest) -> Iterator[Any]:
    yield from spark_session(request)


def rows(spark: Any, n: int = 20_000) -> Any:
    """Keys of several types, with nulls: an int customer (null every 101st row) and a string region."""
    return spark.range(0, n, 1, 3).selectExpr(
        "id", "IF(id % 101 = 0, NULL, id % 977) AS customer", "concat('r', id % 7) AS region",
        "cast(id * 0.5 AS double) AS amount")


def edge_to(parallelism: int, max_parallelism: int = 128) -> Any:
    graph = (JobGraphBuilder().step("p").step("c", parallelism=parallelism)
             .edge("p", "c", exchange="BLOCKING", result="orders", partition_by=list(KEYS),
                   max_parallelism=max_parallelism).build())
    return graph.edges[0]


def test_key_groups_are_the_partitions_spark_repartition_uses(spark: Any) -> None:
    from pyspark.sql import functions as F

    df = rows(spark, 5_000)
    ours = df.withColumn("kg", key_group_column(KEYS, 128))
    spark_side = ours.repartition(128, *KEYS).withColumn("pid", F.spark_partition_id())
    mismatched = spark_side.filter(F.col("kg") != F.col("pid")).count()
    assert mismatched == 0
    assert spark_side.select("pid").distinct().count() > 100, "the sample spreads over the key groups"


@pytest.fixture()
def store(s3_server: S3Endpoint, request: pytest.FixtureRequest) -> ResultStore:
    mode = getattr(request, "param", "executors")
    return ResultStore.from_endpoint(s3_server.endpoint_url, s3_server.access_key, s3_server.secret_key,
                                     s3_server.bucket, prefix=f"keyed-{secrets.token_hex(4)}", spark_io=mode)


def _collect(df: Any) -> list[tuple[Any, ...]]:
    return sorted(tuple(r) for r in df.collect())


@pytest.mark.parametrize("store", ["executors", "driver"], indirect=True)
def test_one_subpartition_per_consumer_each_read_exactly_once(spark: Any, store: ResultStore) -> None:
    df = rows(spark)
    edge = edge_to(4)
    manifest, _ = store.write(df, AttemptId("etl", "run", P, 1), cut=Cut(KEYS, 128, 4))
    cut = manifest.partitioning
    assert cut is not None and [s.key_groups for s in cut.subpartitions] == [key_group_range(128, 4, j)
                                                                             for j in range(4)]
    assert sum(s.rows for s in cut.subpartitions) == manifest.row_count == 20_000
    assert sum(s.bytes for s in cut.subpartitions) == manifest.total_bytes
    assert all(o.subpartition in range(4) for o in manifest.objects)
    io = StoreIO(store)
    ref = PartitionRef("orders", 0, Exchange.BLOCKING, "etl", "run", 1)
    parts = []
    for j in range(4):
        groups = key_group_range(128, 4, j)
        part = io.read_keys(spark, ref, edge, groups)
        assert "__region_failover_subpartition" not in part.columns and part.schema == df.schema
        assert part.filter(~key_group_column(KEYS, 128).between(groups.start, groups.stop - 1)).count() == 0
        assert part.count() == cut.subpartitions[j].rows
        parts.extend(_collect(part))
    assert sorted(parts) == _collect(df)
    assert io.reads.bytes == io.reads.partition_bytes / 4 == manifest.total_bytes, "read amplification 1.0"


def test_a_consumer_at_another_parallelism_reads_exactly_its_keys(spark: Any, store: ResultStore) -> None:
    """Written for 4 consumers, read by 3 (a DAG edit between runs): each reads only the subpartitions its key
    groups overlap, drops the other rows, and together they read every row once."""
    df = rows(spark)
    store.write(df, AttemptId("etl", "run", P, 1), cut=Cut(KEYS, 128, 4))
    io = StoreIO(store)
    ref = PartitionRef("orders", 0, Exchange.BLOCKING, "etl", "run", 1)
    edge = edge_to(3)
    seen: list[tuple[Any, ...]] = []
    for j in range(3):
        seen.extend(_collect(io.read_keys(spark, ref, edge, key_group_range(128, 3, j))))
    assert sorted(seen) == _collect(df)
    assert io.reads.bytes < 2 * io.reads.partition_bytes / 3, "each of the 3 readers fetches at most 2 of 4"


def test_an_unknown_key_column_is_named_at_run_time(spark: Any, store: ResultStore) -> None:
    with pytest.raises(StepOutputError, match="step 'p', edge p -> c: partition_by column 'nope' is not a column"):
        store.write(rows(spark, 10), AttemptId("etl", "run", P, 1), cut=Cut(("nope",), 128, 2,
                                                                            where="step 'p', edge p -> c"))

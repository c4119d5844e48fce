"""Clustered results through real Spark and a real S3 server (SeaweedFS): a result written twice with a few rows
changed shares most of its objects byte for byte (the same SHA-256), whatever Spark's partitioning of the input."""

from __future__ import annotations

import secrets
from collections.abc import Iterator
from typing import Any

import pytest

from airflow_region_failover.exceptions import StepOutputError
from airflow_region_failover.graph.ids import PartitionId
from airflow_region_failover.standalone.seaweedfs import S3Endpoint
from airflow_region_failover.store.dataplane.chunking import ChunkPolicy
from airflow_region_failover.store.dataplane.clustered import Clustering
from airflow_region_failover.store.dataplane.types import Cut
from airflow_region_failover.store.keys import AttemptId
from airflow_region_failover.store.result_store import ResultStore
from tests.support.spark import spark_session

pytestmark = pytest.mark.integration

P = PartitionId("events", 0)
CLUSTER = Clustering(("customer",), ChunkPolicy(rows=2048), where="step 'p', edge p -> c")
N = 120_000


@pytest.fixture(scope="module", params=["embedded", "connect"])
def spark(request: pytest.FixtureRequest) -> Iterator[Any]:
    yield from spark_session(request, shuffle_partitions=4)


@pytest.fixture()
def store(s3_server: S3Endpoint, request: pytest.FixtureRequest) -> ResultStore:
    mode = getattr(request, "param", "executors")
    return ResultStore.from_endpoint(s3_server.endpoint_url, s3_server.access_key, s3_server.secret_key,
                                     s3_server.bucket, prefix=f"clustered-{secrets.token_hex(4)}", spark_io=mode)


def events(spark: Any, slices: int, changed: tuple[int, ...] = ()) -> Any:
    """N rows, unique ``customer`` key spread over the id range; rows whose id is in ``changed`` get a new amount."""
    marks = ", ".join(str(i) for i in changed) or "-1"
    return spark.range(0, N, 1, slices).selectExpr(
        "id", "(id * 7919) % 1000003 AS customer", "concat('r', id % 7) AS region",
        f"IF(id IN ({marks}), -1.0, cast(id * 0.5 AS double)) AS amount")


def shas(manifest: Any) -> set[str]:
    return {o.sha256 for o in manifest.objects}


def _collect(df: Any) -> list[tuple[Any, ...]]:
    return sorted(tuple(r) for r in df.collect())


@pytest.mark.parametrize("store", ["executors", "driver"], indirect=True)
def test_rewriting_with_a_few_rows_changed_shares_most_objects(spark: Any, store: ResultStore) -> None:
    first, _ = store.write(events(spark, 3), AttemptId("etl", "r1", P, 1), clustering=CLUSTER)
    assert first.row_count == N and len(first.objects) > 20  # ~2.5k rows a chunk
    changed = (5, 40_000, 99_999)
    # the next run: other rows changed, and Spark slices the input differently
    second, _ = store.write(events(spark, 5, changed), AttemptId("etl", "r2", P, 1), clustering=CLUSTER)
    assert second.row_count == N
    new = shas(second) - shas(first)
    assert 1 <= len(new) <= len(changed), f"{len(new)} of {len(second.objects)} objects changed"
    assert _collect(store.read(spark, "etl", "r2", P)) == _collect(events(spark, 2, changed))
    # each object holds one ascending run of the cluster key
    table = store.read_arrow(store.manifest("etl", "r2", P))
    assert table.num_rows == N


def test_a_keyed_clustered_result_keeps_its_subpartitions(spark: Any, store: ResultStore) -> None:
    cut = Cut(("region",), 128, 2)
    first, _ = store.write(events(spark, 3), AttemptId("etl", "k1", P, 1), cut=cut, clustering=CLUSTER)
    assert {o.subpartition for o in first.objects} == {0, 1}
    second, _ = store.write(events(spark, 4, (77,)), AttemptId("etl", "k2", P, 1), cut=cut, clustering=CLUSTER)
    assert len(shas(second) - shas(first)) == 1
    for sub in (0, 1):
        mine = [o for o in second.objects if o.subpartition == sub]
        back = store.read_version(spark, second, tuple(mine))
        regions = {r["region"] for r in back.select("region").distinct().collect()}
        others = {r["region"] for r in store.read_version(spark, second, tuple(
            o for o in second.objects if o.subpartition != sub)).select("region").distinct().collect()}
        assert regions and not regions & others


def test_bad_cluster_or_key_columns_are_named_at_run_time(spark: Any, store: ResultStore) -> None:
    bad = Clustering(("nope",), where="step 'p', edge p -> c")
    with pytest.raises(StepOutputError, match="step 'p', edge p -> c: cluster_by column 'nope' is not a column of "
                                              "the result"):
        store.write(events(spark, 1), AttemptId("etl", "bad", P, 1), clustering=bad)
    nested = Clustering(("tags",), where="step 'p', edge p -> c")
    with pytest.raises(StepOutputError, match="step 'p', edge p -> c: cluster_by column 'tags' is of type "
                                              "array<bigint>; cluster by flat columns only"):
        store.write(events(spark, 1).selectExpr("*", "array(id) AS tags"), AttemptId("etl", "bad", P, 1),
                    clustering=nested)
    with pytest.raises(StepOutputError, match="step 'p', edge p -> c: partition_by column 'nah' is not a column"):
        store.write(events(spark, 1), AttemptId("etl", "bad", P, 1), clustering=CLUSTER,
                    cut=Cut(("nah",), 128, 2, where="step 'p', edge p -> c"))

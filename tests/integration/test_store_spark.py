"""Spark I/O through the store: embedded local Spark and the test session's Spark Connect server (loopback)."""

from __future__ import annotations

import secrets
import time
from collections.abc import Iterator
from typing import Any

import pytest

from airflow_region_failover.graph.ids import PartitionId
from airflow_region_failover.standalone.seaweedfs import S3Endpoint
from airflow_region_failover.store.keys import AttemptId
from airflow_region_failover.store.result_store import ResultStore
from tests.support.spark import spark_session

pytestmark = pytest.mark.integration

P = PartitionId("clean->join", 1)


@pytest.fixture(scope="module", params=["embedded", "connect"])
def spark(request: pytest.FixtureRequest) -> Iterator[Any]:
    yield from spark_session(request, shuffle_partitions=4)


@pytest.mark.parametrize("spark_io", ["executors", "driver"])
def test_dataframe_round_trip(spark: Any, s3_server: S3Endpoint, spark_io: str) -> None:
    store = ResultStore.from_endpoint(s3_server.endpoint_url, s3_server.access_key, s3_server.secret_key,
                                      s3_server.bucket, prefix=f"spark-{secrets.token_hex(4)}", spark_io=spark_io)
    df = spark.range(0, 20_000, 1, 4).selectExpr(
        "id", "cast(id * 1.5 as double) AS v", "concat('k', id % 97) AS k", "to_date('2024-01-01') AS d",
        "array(id, id + 1) AS arr")
    manifest, _ = store.write(df, AttemptId("etl", "spark", P, 1))
    assert manifest.row_count == 20_000
    assert len(manifest.objects) == (4 if spark_io == "executors" else 1)
    back = store.read(spark, "etl", "spark", P)
    assert back.schema == df.schema
    assert back.count() == 20_000
    assert sorted(back.exceptAll(df).collect()) == [] and sorted(df.exceptAll(back).collect()) == []
    again, _ = store.write(df.repartition(1).sortWithinPartitions("id"), AttemptId("etl", "spark", P, 2))
    assert store.manifest("etl", "spark", P) == again and store.read(spark, "etl", "spark", P).count() == 20_000


def test_empty_dataframe_round_trip(spark: Any, s3_server: S3Endpoint) -> None:
    store = ResultStore.from_endpoint(s3_server.endpoint_url, s3_server.access_key, s3_server.secret_key,
                                      s3_server.bucket, prefix=f"spark-{secrets.token_hex(4)}")
    df = spark.range(0, 0).selectExpr("id", "cast(id as string) AS s")
    manifest, _ = store.write(df, AttemptId("etl", "empty", P, 1))
    assert manifest.row_count == 0 and manifest.objects == ()
    back = store.read(spark, "etl", "empty", P)
    assert back.count() == 0 and back.schema == df.schema


def test_failed_spark_task_commits_nothing_and_rerun_commits(spark: Any, s3_server: S3Endpoint) -> None:
    store = ResultStore.from_endpoint(s3_server.endpoint_url, s3_server.access_key, s3_server.secret_key,
                                      s3_server.bucket, prefix=f"spark-{secrets.token_hex(4)}",
                                      part_size=5 * 1024 * 1024, upload_threads=2)
    wide = "concat(" + ", ".join(f"sha2(cast(id * {k} AS string), 256)" for k in range(1, 9)) + ")"
    df = spark.range(0, 60_000, 1, 2).selectExpr("id", f"{wide} AS payload")
    failing = df.selectExpr("id", "payload", "assert_true(id < 50000, 'injected failure') AS ok")
    with pytest.raises(Exception, match="injected failure"):
        store.write(failing, AttemptId("etl", "fail", P, 1))
    keys = store.run_keys("etl", "fail")
    assert not store.checker("etl", "fail", "deep").is_available(P)
    assert store.partitions("etl", "fail", P.result) == ()
    manifest, _ = store.write(df, AttemptId("etl", "fail", P, 2))
    assert store.read(spark, "etl", "fail", P).count() == 60_000 == manifest.row_count
    listed = {i.key for i in store.objects.listing(store.layout.cas_root + "/")}
    assert {keys.object_key(o.key, o.shared) for o in manifest.objects} <= listed
    store.sweep(grace_seconds=3600, now=time.time() + 3601)  # removes the failed attempt's completed objects
    assert {i.key for i in store.objects.listing(store.layout.cas_root + "/")} == {
        keys.object_key(o.key, o.shared) for o in manifest.objects}
    assert store.is_available("etl", "fail", P, "deep", verify_checksums=True)


def test_a_restart_reproducing_the_same_rows_uploads_nothing(spark: Any, s3_server: S3Endpoint) -> None:
    """Spark tasks cut their output into bounded content-addressed objects; the same rows give the same bytes, so a
    restart (attempt 2) and a later run upload nothing and list the same objects."""
    MiB = 1024 * 1024
    store = ResultStore.from_endpoint(s3_server.endpoint_url, s3_server.access_key, s3_server.secret_key,
                                      s3_server.bucket, prefix=f"spark-{secrets.token_hex(4)}", max_object_bytes=MiB)
    df = spark.range(0, 100_000, 1, 2).selectExpr("id", "sha2(cast(id AS string), 256) AS h")
    first, written = store.write(df, AttemptId("etl", "cas", P, 1))
    assert len(first.objects) > 2 and all(o.shared for o in first.objects)  # several objects per task
    assert written.new_bytes == written.bytes == first.total_bytes
    again, restart = store.write(df, AttemptId("etl", "cas", P, 2))
    later, scheduled = store.write(df, AttemptId("etl", "cas-next", P, 1))
    assert again.objects == later.objects == first.objects
    assert (restart.new_bytes, restart.new_objects, scheduled.new_bytes) == (0, 0, 0)
    assert restart.bytes == written.bytes
    back = store.read(spark, "etl", "cas", P)
    assert back.count() == 100_000 and sorted(df.exceptAll(back).collect()) == []


def test_a_corrupt_object_read_by_spark_tasks_names_its_partition_in_the_driver(spark: Any,
                                                                                 s3_server: S3Endpoint) -> None:
    """``executors`` mode reads in Spark's Python workers, whose errors reach the driver as text: the text names
    the unreadable partition (the step's failure cause), and the object was moved aside, so the producer's restart
    writes it again and the next read succeeds."""
    from airflow_region_failover.exceptions import unreadable_in

    store = ResultStore.from_endpoint(s3_server.endpoint_url, s3_server.access_key, s3_server.secret_key,
                                      s3_server.bucket, prefix=f"spark-{secrets.token_hex(4)}")
    df = spark.range(0, 20_000, 1, 2).selectExpr("id", "sha2(cast(id AS string), 256) AS h")
    manifest, _ = store.write(df, AttemptId("etl", "rot", P, 1))
    key = store.layout.cas_object(manifest.objects[0].sha256)
    body = bytearray(store.objects.get(key) or b"")
    body[len(body) // 2] ^= 0x01
    store.objects.client.put_object(Bucket=store.layout.bucket, Key=key, Body=bytes(body))
    with pytest.raises(Exception) as caught:
        store.read(spark, "etl", "rot", P).count()
    found = unreadable_in(str(caught.value))
    assert found is not None and found[0] == P, str(caught.value)[-2000:]
    _, tally = store.write(df, AttemptId("etl", "rot", P, 2))
    assert tally.new_objects == 1 and store.read(spark, "etl", "rot", P).count() == 20_000

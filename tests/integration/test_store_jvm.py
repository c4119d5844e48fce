"""The store's reads through Spark's own Parquet reader (``s3a://``, store/dataplane/reading.py), on embedded Spark and
on the test session's Spark Connect server, both with the pinned s3a jars, against SeaweedFS: the read is a file scan
over exactly the manifest's objects; an object replaced by other bytes is refused naming the partition before Spark
reads anything; an object S3 keeps no SHA-256 for is read (and hashed) by the Python path, which refuses it too;
``store_jvm_io = off`` keeps the Python path; a keyed consumer reads exactly its subpartition's objects; a read whose
objects were just checked is resolved without Spark listing them (store/dataplane/listed.py)."""

from __future__ import annotations

import dataclasses
import secrets
from collections.abc import Iterator
from typing import Any

import pytest

from airflow_region_failover.exceptions import NotAvailable
from airflow_region_failover.graph.ids import PartitionId
from airflow_region_failover.standalone.seaweedfs import S3Endpoint
from airflow_region_failover.store.dataplane import listed, s3a
from airflow_region_failover.store.dataplane.keyed_writer import JarSource
from airflow_region_failover.store.dataplane.types import Cut
from airflow_region_failover.store.keys import AttemptId
from airflow_region_failover.store.result_store import ResultStore
from tests.support.spark import spark_session
from tests.support.spark import typed_rows as rows
from tests.support.store import on_server

pytestmark = pytest.mark.integration

P = PartitionId("orders->join", 2)


@pytest.fixture(scope="module", params=["embedded", "connect"])
def spark(request: pytest.FixtureRequest) -> Iterator[Any]:
    yield from spark_session(request, shuffle_partitions=4)


def make_store(endpoint: S3Endpoint, **tuning: Any) -> ResultStore:
    return on_server(endpoint, f"jvm-{secrets.token_hex(4)}", **tuning)


def object_urls(store: ResultStore, manifest: Any, objects: Any = None) -> list[str]:
    keys = store.run_keys(manifest.dag_id, manifest.run_id)
    return sorted(f"s3a://{store.layout.bucket}/{keys.object_key(o.key, o.shared)}"
                  for o in (manifest.objects if objects is None else objects))


def test_a_read_is_sparks_file_scan_over_exactly_the_manifests_objects(spark: Any, s3_server: S3Endpoint) -> None:
    store = make_store(s3_server)
    df = rows(spark)
    manifest, _ = store.write(df, AttemptId("etl", "run", P, 1))
    back = store.read(spark, "etl", "run", P)
    assert sorted(back.inputFiles()) == object_urls(store, manifest)
    assert back.schema == df.schema and back.count() == manifest.row_count == 30_000
    assert sorted(back.collect(), key=lambda r: r.id) == sorted(df.collect(), key=lambda r: r.id)
    python = ResultStore(dataclasses.replace(store.config, jvm_io="off"), client=store.objects.client)
    assert python.read(spark, "etl", "run", P).inputFiles() == []  # store_jvm_io = off: the Python workers' path


def test_a_replaced_object_is_refused_naming_the_partition(spark: Any, s3_server: S3Endpoint) -> None:
    store = make_store(s3_server)
    manifest, _ = store.write(rows(spark), AttemptId("etl", "bad", P, 1))
    victim = manifest.objects[1]
    key = store.run_keys("etl", "bad").object_key(victim.key, victim.shared)
    client, bucket = store.objects.client, store.layout.bucket
    body = client.get_object(Bucket=bucket, Key=key)["Body"].read()
    other = body[:100] + bytes(b ^ 0x01 for b in body[100:200]) + body[200:]  # same size, other bytes
    client.put_object(Bucket=bucket, Key=key, Body=other, ChecksumAlgorithm="SHA256")
    with pytest.raises(NotAvailable, match=rf"orders->join#2 is unreadable: object {key} listed in its manifest "
                                           "holds other bytes"):
        store.read(spark, "etl", "bad", P)
    assert store.objects.head_size(key) is None, "the wrong shared object is moved aside (quarantined)"
    client.put_object(Bucket=bucket, Key=key, Body=other)  # S3 keeps no SHA-256 of it: the Python path hashes it
    with pytest.raises(Exception, match="does not match the SHA-256 in its manifest"):
        store.read(spark, "etl", "bad", P).collect()
    client.put_object(Bucket=bucket, Key=key, Body=body)  # the same bytes again (S3 keeps a CRC only) ...
    assert store.read(spark, "etl", "bad", P).count() == 30_000  # ... read and hashed by the Python path
    client.delete_object(Bucket=bucket, Key=key)
    with pytest.raises(NotAvailable, match=rf"orders->join#2 is unreadable: object {key} listed in its manifest "
                                           "is missing"):
        store.read(spark, "etl", "bad", P)


def test_a_keyed_consumer_scans_exactly_its_subpartitions_objects(spark: Any, s3_server: S3Endpoint) -> None:
    store = make_store(s3_server)
    df = rows(spark)
    manifest, _ = store.write(df, AttemptId("etl", "keyed", P, 1), cut=Cut(("k",), 128, 4))
    assert manifest.partitioning is not None
    seen = 0
    for j, sub in enumerate(manifest.partitioning.subpartitions):
        selection = manifest.select(sub.key_groups, ("k",), 128)
        part = store.read_version(spark, manifest, selection.objects)
        assert sorted(part.inputFiles()) == object_urls(store, manifest, selection.objects)
        assert all(o.subpartition == j for o in selection.objects) and part.count() == sub.rows
        seen += sub.rows
    assert seen == 30_000


def test_a_read_of_many_objects_lists_them_without_a_spark_job(spark: Any, s3_server: S3Endpoint) -> None:
    """Spark lists more than 32 paths with a Spark job, which queues behind every other session's tasks (+11.7 s
    on the ETL's critical path at 5 GB); the store's read lists its objects on the driver
    (store/dataplane/reading.py)."""
    if not hasattr(spark, "sparkContext") or "connect" in type(spark).__module__:
        pytest.skip("the jobs are counted by the embedded session's SparkContext")
    from pyspark.sql import functions as F

    store = make_store(s3_server, max_object_bytes=1024 * 1024)  # 10 binary columns: ~1,000 rows per object
    wide = spark.range(60_000).select("id", *[F.lit(b"x").alias(f"b{i}") for i in range(10)])
    manifest, _ = store.write(wide, AttemptId("etl", "many", P, 1))
    assert len(manifest.objects) > int(spark.conf.get("spark.sql.sources.parallelPartitionDiscovery.threshold"))
    tracker = spark.sparkContext.statusTracker()
    before = set(tracker.getJobIdsForGroup(None))
    back = store.read(spark, "etl", "many", P)
    assert set(tracker.getJobIdsForGroup(None)) == before, "listing the objects ran a Spark job"
    assert sorted(back.inputFiles()) == object_urls(store, manifest) and back.count() == 60_000
    assert spark.conf.get("spark.sql.sources.parallelPartitionDiscovery.threshold") == "32", "the setting is restored"


def test_a_checked_read_is_resolved_without_spark_listing_its_objects(spark: Any, s3_server: S3Endpoint) -> None:
    """Spark's own listing sends two HEADs and a LIST per object (~70 ms a keyed consumer's read); a checked read gives
    Spark the sizes its manifest records instead: resolving a read of objects that are not there succeeds where
    ``spark.read.parquet`` refuses them, and reading them fails (nothing is made up)."""
    store = make_store(s3_server)
    manifest, _ = store.write(rows(spark), AttemptId("etl", "listed", P, 1))
    embedded = hasattr(spark, "sparkContext") and "connect" not in type(spark).__module__
    metrics = spark.sparkContext._jvm.org.apache.spark.metrics.source.HiveCatalogMetrics if embedded else None
    counts = (lambda: (metrics.METRIC_FILES_DISCOVERED().getCount(), metrics.METRIC_FILE_CACHE_HITS().getCount())
              ) if embedded else (lambda: (0, 0))
    store.read(spark, "etl", "listed", P)  # the session's first read asks once whether its JVM lists the store
    before = counts()
    back = store.read(spark, "etl", "listed", P)
    assert sorted(back.inputFiles()) == object_urls(store, manifest) and back.count() == 30_000
    if embedded:  # Spark's file index counts what it listed, and what it found given
        assert counts() == (before[0], before[1] + len(manifest.objects)), (before, counts())
    options = s3a.hadoop_options(store.config.access, s3a.Mode.AUTO)
    assert options is not None
    gone = [f"{url}.gone" for url in object_urls(store, manifest)]
    sizes = [o.size for o in manifest.objects]
    unlisted = listed.read(spark, options, gone, sizes, back.schema)
    assert unlisted is not None and sorted(unlisted.inputFiles()) == gone
    with pytest.raises(Exception, match="PATH_NOT_FOUND"):
        _ = spark.read.options(**options).schema(back.schema).parquet(*gone).schema
    with pytest.raises(Exception, match=r"FileNotFound|No such file|does not exist"):
        unlisted.count()
    with pytest.raises(Exception, match="2 paths but 1 sizes"):
        _ = listed.read(spark, options, gone[:2], sizes[:1], back.schema)


def test_a_session_without_the_listed_reader_gets_none_and_is_remembered(spark: Any, s3_server: S3Endpoint,
                                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    store = make_store(s3_server)
    manifest, _ = store.write(rows(spark), AttemptId("etl", "unlisted", P, 1))
    options = s3a.hadoop_options(store.config.access, s3a.Mode.AUTO)
    assert options is not None
    monkeypatch.setattr(listed, "FORMAT", "org.regionfailover.spark.NotOnTheClassPath")
    monkeypatch.setattr(listed, "READER", JarSource(listed.FORMAT, "Spark lists"))
    urls, sizes = object_urls(store, manifest), [o.size for o in manifest.objects]
    assert listed.read(spark, options, urls, sizes, rows(spark).schema) is None
    assert listed.READER.known_missing(spark), "remembered: the next read lists without trying"
    back = store.read(spark, "etl", "unlisted", P)
    assert sorted(back.inputFiles()) == urls and back.count() == 30_000, "the store's read falls back to listing"

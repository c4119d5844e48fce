"""The store's writes through Spark's own Parquet writer to the driver's disk (store/dataplane/local_write.py), on
embedded Spark and on the test session's Spark Connect server (same machine), against SeaweedFS: the session's probe
says yes; the rows round-trip identical to the Python workers' path (``store_jvm_io = off``, which keeps that path), and
each path's objects read back through the other reader; a keyed write's subpartitions hold exactly their rows and a
consumer reads exactly their objects; a re-write of the same rows uploads nothing; objects stay within the bound;
an empty result commits no object; no temporary directory is left behind."""

from __future__ import annotations

import dataclasses
import os
import secrets
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from airflow_region_failover.graph.ids import PartitionId
from airflow_region_failover.standalone.seaweedfs import S3Endpoint
from airflow_region_failover.store.dataplane import local_write, s3a, scratch
from airflow_region_failover.store.dataplane.types import Cut
from airflow_region_failover.store.keys import AttemptId
from airflow_region_failover.store.result_store import ResultStore
from tests.support.spark import spark_session, typed_rows
from tests.support.store import on_server

pytestmark = pytest.mark.integration

P = PartitionId("orders->join", 1)
MiB = 1024 * 1024


@pytest.fixture(scope="module", params=["embedded", "connect"])
def spark(request: pytest.FixtureRequest) -> Iterator[Any]:
    yield from spark_session(request, shuffle_partitions=4)


def make_store(endpoint: S3Endpoint, **tuning: Any) -> ResultStore:
    return on_server(endpoint, f"lw-{secrets.token_hex(4)}", **tuning)


def python_path(store: ResultStore) -> ResultStore:
    return ResultStore(dataclasses.replace(store.config, jvm_io="off"), client=store.objects.client)


def writers(store: ResultStore, manifest: Any) -> set[str]:
    """Which Parquet writer made each object (its footer's ``created_by``, first word)."""
    keys = store.run_keys(manifest.dag_id, manifest.run_id)
    found = set()
    for entry in manifest.objects:
        body = store.objects.client.get_object(Bucket=store.layout.bucket, Key=keys.object_key(entry.key, True))
        found.add(pq.read_metadata(pa.BufferReader(body["Body"].read())).created_by.split(" ")[0])
    return found


def scratch_dirs() -> set[str]:
    """This process's write and probe directories (store/dataplane/scratch.py) now under the system temp dir (another
    process's writes on this host are not this test's)."""
    temp, me = Path(tempfile.gettempdir()), f"{scratch._host()}-{os.getpid()}-"
    return {p.name for kind in ("write", "probe") for p in temp.glob(f"region-failover-{kind}-{me}*")}


def test_rows_round_trip_identical_to_the_python_workers_path(spark: Any, s3_server: S3Endpoint) -> None:
    store, before = make_store(s3_server), scratch_dirs()
    df = typed_rows(spark)
    assert local_write.jvm_writer(spark, s3a.Mode.AUTO), "the session's JVM writes where the driver reads"
    jvm, _ = store.write(df, AttemptId("etl", "jvm", P, 1))
    python, _ = python_path(store).write(df, AttemptId("etl", "py", P, 1))
    assert writers(store, jvm) == {"parquet-mr"} and writers(store, python) == {"parquet-cpp-arrow"}
    assert jvm.spark_schema == python.spark_schema == df.schema.json()
    assert jvm.row_count == python.row_count == 30_000 and len(jvm.objects) == 3  # one file per Spark task
    expected = sorted(df.collect(), key=lambda r: r.id)
    for reader in (store, python_path(store)):  # Spark's reader (s3a) and the Python workers' reader
        for manifest in (jvm, python):
            back = reader.read_version(spark, manifest)
            assert back.schema == df.schema and sorted(back.collect(), key=lambda r: r.id) == expected
    assert scratch_dirs() <= before, "the write's temporary directories are removed"


def test_a_keyed_write_puts_each_subpartitions_rows_in_its_own_objects(spark: Any, s3_server: S3Endpoint) -> None:
    store = make_store(s3_server)
    df = typed_rows(spark)
    cut = Cut(("k",), 128, 4)
    manifest, _ = store.write(df, AttemptId("etl", "keyed", P, 1), cut=cut)
    python, _ = python_path(store).write(df, AttemptId("etl", "keyed-py", P, 1), cut=cut)
    assert writers(store, manifest) == {"parquet-mr"} and manifest.partitioning is not None
    assert python.partitioning is not None
    assert [(s.index, s.key_groups, s.rows) for s in manifest.partitioning.subpartitions] == [
        (s.index, s.key_groups, s.rows) for s in python.partitioning.subpartitions]
    for j, sub in enumerate(manifest.partitioning.subpartitions):
        selection = manifest.select(sub.key_groups, ("k",), 128)
        assert selection.objects and all(o.subpartition == j for o in selection.objects)
        part = store.read_version(spark, manifest, selection.objects)
        assert part.schema == df.schema, "the subpartition tag is not stored"
        assert part.count() == sub.rows and part.where(cut.subpartition_column() != j).count() == 0
        assert sorted(part.collect()) == sorted(python_path(store).read_version(
            spark, python, python.select(sub.key_groups, ("k",), 128).objects).collect())


def test_a_rewrite_of_the_same_rows_uploads_nothing(spark: Any, s3_server: S3Endpoint) -> None:
    store = make_store(s3_server, max_object_bytes=MiB)
    df = typed_rows(spark)
    first, uploaded = store.write(df, AttemptId("etl", "a", P, 1))
    assert len(first.objects) == 6 and all(o.size <= MiB for o in first.objects)  # two files per Spark task
    assert uploaded.new_bytes == uploaded.bytes > 0
    for run, attempt in (("a", 2), ("b", 1)):  # a restart of the producer, a scheduled run of the same rows
        again, tally = store.write(df, AttemptId("etl", run, P, attempt))
        assert [o.sha256 for o in again.objects] == [o.sha256 for o in first.objects]
        assert (tally.new_bytes, tally.new_objects, tally.bytes) == (0, 0, uploaded.bytes)
    cut = Cut(("k",), 128, 4)
    keyed, _ = store.write(df, AttemptId("etl", "k1", P, 1), cut=cut)
    rekeyed, tally = store.write(df, AttemptId("etl", "k2", P, 1), cut=cut)
    assert rekeyed.objects == keyed.objects and tally.new_bytes == 0


def test_an_empty_result_commits_no_object(spark: Any, s3_server: S3Endpoint) -> None:
    store = make_store(s3_server)
    empty = typed_rows(spark).where("id < 0")
    for cut in (None, Cut(("k",), 128, 4)):
        manifest, _ = store.write(empty, AttemptId("etl", f"empty-{cut is None}", P, 1), cut=cut)
        assert manifest.objects == () and manifest.row_count == 0
        back = store.read_version(spark, manifest)
        assert back.schema == empty.schema and back.count() == 0


def test_a_local_master_is_probed_without_a_spark_job(spark: Any) -> None:
    """A probe job queues behind every other session's tasks (11-15 s on the ETL's critical path at 1 GB); with a
    local master the driver finding this process's file is the probe (module rule of store/dataplane/local_write.py)."""
    if not hasattr(spark, "sparkContext") or "connect" in type(spark).__module__:
        pytest.skip("the jobs are counted by the embedded session's SparkContext")
    tracker = spark.sparkContext.statusTracker()
    before = set(tracker.getJobIdsForGroup(None))
    assert local_write._decide(spark), "the embedded local[2] JVM writes where this process reads"
    assert set(tracker.getJobIdsForGroup(None)) == before, "deciding ran a Spark job"


def last_write_plan(spark: Any) -> str:
    """The physical plan of the embedded session's last SQL execution (Spark's SQL status store)."""
    executions = spark._jsparkSession.sharedState().statusStore().executionsList()
    return str(executions.apply(executions.size() - 1).physicalPlanDescription())


def test_a_keyed_write_does_not_sort_its_rows(spark: Any, s3_server: S3Endpoint,
                                             monkeypatch: pytest.MonkeyPatch) -> None:
    """``partitionBy`` plans a sort of every row by the subpartition tag (1.6x the write without, 20 M rows on 2
    cores); the store's keyed write opens one writer per subpartition instead. With fewer writers allowed than
    subpartitions (here 2 of 4) Spark sorts what is left: the same rows in the same subpartitions. (All 4 open:
    every other keyed test of this module.)"""
    if not hasattr(spark, "_jsparkSession"):
        pytest.skip("the plan is read from the embedded session's SQL status store")
    writers = 2
    monkeypatch.setattr(local_write, "MAX_OPEN_WRITERS", writers)
    store, df, cut = make_store(s3_server), typed_rows(spark), Cut(("k",), 128, 4)
    manifest, _ = store.write(df, AttemptId("etl", f"unsorted-{writers}", P, 1), cut=cut)
    plan = last_write_plan(spark)
    assert "InsertIntoHadoopFsRelationCommand" in plan and "Sort [" not in plan, plan
    python, _ = python_path(store).write(df, AttemptId("etl", f"unsorted-py-{writers}", P, 1), cut=cut)
    assert manifest.partitioning is not None and python.partitioning is not None
    for j, sub in enumerate(manifest.partitioning.subpartitions):
        ours = store.read_version(spark, manifest, manifest.select(sub.key_groups, ("k",), 128).objects)
        assert ours.where(cut.subpartition_column() != j).count() == 0
        theirs = python_path(store).read_version(spark, python, python.select(sub.key_groups, ("k",), 128).objects)
        assert sorted(ours.collect()) == sorted(theirs.collect())
    assert spark.conf.get("spark.sql.optimizer.plannedWrite.enabled") == "true", "the session's setting is restored"


def encodings(store: ResultStore, manifest: Any, column: str) -> set[str]:
    """The encodings of ``column``'s pages in every object of ``manifest`` (from the footers)."""
    keys = store.run_keys(manifest.dag_id, manifest.run_id)
    found: set[str] = set()
    for entry in manifest.objects:
        body = store.objects.client.get_object(Bucket=store.layout.bucket, Key=keys.object_key(entry.key, True))
        meta = pq.read_metadata(pa.BufferReader(body["Body"].read()))
        for group in range(meta.num_row_groups):
            chunk = meta.row_group(group)
            found |= set(next(chunk.column(i) for i in range(chunk.num_columns)
                              if chunk.column(i).path_in_schema == column).encodings)
    return found


def test_a_write_delta_encodes_integers_whose_dictionary_does_not_pay(spark: Any, s3_server: S3Endpoint) -> None:
    """Parquet's format-2 writer (store/dataplane/local_write.py, WRITER_VERSION): a near-unique, increasing long key
    falls back from its dictionary to DELTA_BINARY_PACKED, not PLAIN (line items' 2 columns: 254.5 -> 137.9 MB)."""
    store = make_store(s3_server)
    df = spark.range(0, 200_000, 1, 2).selectExpr("id * 3 AS key", "id % 5 AS small")
    manifest, _ = store.write(df, AttemptId("etl", "v2", P, 1))
    assert "DELTA_BINARY_PACKED" in encodings(store, manifest, "key")
    assert "RLE_DICTIONARY" in encodings(store, manifest, "small")  # a dictionary where it pays
    back = store.read_version(spark, manifest)
    assert sorted(r.key for r in back.collect()) == [i * 3 for i in range(200_000)]


def test_a_keyed_writes_integer_key_is_delta_encoded_from_its_first_row(spark: Any, s3_server: S3Endpoint) -> None:
    """parquet-mr keeps a dictionary while it beats PLAIN: a key in its producer's order (7 rows per key,
    increasing, as the ETL's line items' ``l_orderkey``) kept one, in more bytes than its deltas and for 29 % more
    CPU (store/dataplane/local_write.py,
    :func:`~airflow_region_failover.store.dataplane.local_write.integer_key_paths`). A keyed write writes its integer
    key without one, on either path; a low-cardinality code whose values lie far apart keeps its dictionary."""
    df = spark.range(0, 210_000, 1, 2).selectExpr("CAST(id / 7 AS BIGINT) AS k", "(id % 3) * 1000000007 AS code")
    for store in (make_store(s3_server), python_path(make_store(s3_server))):
        manifest, _ = store.write(df, AttemptId("etl", "keyed-key", P, 1), cut=Cut(("k",), 128, 4))
        found = encodings(store, manifest, "k")
        assert not found & {"RLE_DICTIONARY", "PLAIN_DICTIONARY"} and "DELTA_BINARY_PACKED" in found, found
        assert "RLE_DICTIONARY" in encodings(store, manifest, "code")
        back = store.read_version(spark, manifest)
        assert sorted(back.collect()) == sorted(df.collect())


def test_a_wide_decimal_is_written_without_parquets_dictionary(spark: Any, s3_server: S3Endpoint) -> None:
    """A decimal of more than 18 digits is a FIXED_LEN_BYTE_ARRAY column. Format-2 pages give it a dictionary
    (format 1 never does), whose hash of big-endian bytes collides wherever values are close: the ETL's
    ``sum(revenue)`` cost 2.5-3.0x the JVM CPU of the same write without it (store/dataplane/local_write.py,
    :func:`~airflow_region_failover.store.dataplane.local_write.write_options`). Without one, for keyed and unkeyed
    writes: DELTA_BYTE_ARRAY pages, the same rows; a narrow decimal and a string keep theirs where it pays."""
    store = make_store(s3_server)
    df = spark.range(0, 120_000, 1, 2).selectExpr(
        "id AS k", "CAST(id % 60000 AS DECIMAL(24, 2)) AS revenue", "CAST(id % 7 AS DECIMAL(12, 2)) AS price",
        "named_struct('total', CAST(id % 50000 AS DECIMAL(30, 2))) AS nested", "CAST(id % 5 AS STRING) AS segment",
        "array(CAST(id % 40000 AS DECIMAL(20, 2))) AS xs")
    for cut in (None, Cut(("k",), 128, 4)):
        manifest, _ = store.write(df, AttemptId("etl", f"wide-{cut is None}", P, 1), cut=cut)
        for column in ("revenue", "nested.total", "xs.list.element"):
            found = encodings(store, manifest, column)
            assert not found & {"RLE_DICTIONARY", "PLAIN_DICTIONARY"} and "DELTA_BYTE_ARRAY" in found, (column, found)
        assert "RLE_DICTIONARY" in encodings(store, manifest, "price")
        assert "RLE_DICTIONARY" in encodings(store, manifest, "segment")
        back = store.read_version(spark, manifest)
        assert back.schema == df.schema and sorted(back.collect()) == sorted(df.collect())

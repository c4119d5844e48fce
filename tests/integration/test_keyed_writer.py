"""The keyed write's own JVM writer (store/dataplane/keyed_writer.py, store/dataplane/jvm/KeyedParquet.java), on
embedded Spark and on the test session's Spark Connect server: it writes, file for file, the bytes Spark's
``partitionBy`` writes of the same rows (so switching paths never changes a content address); the store's keyed writes
go through it; a session without it writes through ``partitionBy`` and remembers that; a failed task leaves no part
file."""

from __future__ import annotations

import hashlib
import secrets
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from airflow_region_failover.graph.ids import PartitionId
from airflow_region_failover.standalone.seaweedfs import S3Endpoint
from airflow_region_failover.store.dataplane import keyed_writer, local_write
from airflow_region_failover.store.dataplane.local_write import (
    PART,
    TIMESTAMPS,
    WRITER_VERSION,
    keyed_settings,
    local_files,
)
from airflow_region_failover.store.dataplane.s3a import session_settings
from airflow_region_failover.store.dataplane.types import Cut
from airflow_region_failover.store.keys import AttemptId
from tests.support.spark import spark_session, typed_rows
from tests.support.store import on_server

pytestmark = pytest.mark.integration

P = PartitionId("orders->join", 1)
CUT = Cut(("k",), 128, 4)
RECORDS = 1_000  # about 3 files per task and subpartition (2,500 rows each)


@pytest.fixture(scope="module", params=["embedded", "connect"])
def spark(request: pytest.FixtureRequest) -> Iterator[Any]:
    yield from spark_session(request, shuffle_partitions=4)


def files(root: Path) -> list[tuple[int, int, int, str]]:
    """(Spark task, subpartition, file counter, SHA-256) of every part file under ``root``, in manifest order."""
    return [(f.number, f.subpartition, f.sequence, hashlib.sha256(f.path.read_bytes()).hexdigest())
            for f in local_files(root, keyed=True)]


def flat_rows(spark: Any, n: int = 30_000) -> Any:
    """``n`` rows in 3 Spark partitions of every top-level column kind the flat writer writes itself
    (``jvm/FlatParquetWriteSupport.java``), nulls in most: decimals of all three encodings, negative ones among
    them, dates before 1970, timestamps with and without a time zone."""
    return spark.range(0, n, 1, 3).selectExpr(
        "id", "id % 13 AS k", "IF(id % 5 = 0, NULL, id % 2 = 0) AS b", "CAST(id % 100 AS TINYINT) AS by",
        "CAST(id % 1000 - 500 AS SMALLINT) AS sh", "IF(id % 7 = 0, NULL, CAST(id AS INT)) AS i",
        "date_add(to_date('1900-01-01'), CAST(id % 50000 AS INT)) AS d", "timestamp_seconds(id * 1000) AS ts",
        "IF(id % 3 = 0, NULL, CAST(timestamp_seconds(id) AS TIMESTAMP_NTZ)) AS ntz", "CAST(id / 3 AS FLOAT) AS f",
        "IF(id % 3 = 1, NULL, id * 0.5D) AS v", "concat('s', id % 101) AS s",
        "IF(id % 11 = 0, NULL, unhex(hex(id))) AS bin", "CAST(id - 100 AS DECIMAL(7, 2)) AS d7",
        "CAST(id * 1000 AS DECIMAL(15, 3)) AS d15",
        "IF(id % 4 = 0, NULL, CAST((id - 15000) * 123456789012 AS DECIMAL(30, 4))) AS d30")


def partition_by(frame: Any, out: Path, options: dict[str, str] | None = None) -> None:
    with session_settings(frame.sparkSession, [TIMESTAMPS, *keyed_settings(CUT.parallelism)]):
        frame.write.option("maxRecordsPerFile", str(RECORDS)).option(*WRITER_VERSION).options(**(options or {})) \
            .partitionBy(frame.columns[-1]).parquet(out.as_uri())


def ours(frame: Any, out: Path, options: dict[str, str] | None = None) -> bool:
    with session_settings(frame.sparkSession, [TIMESTAMPS]):
        return keyed_writer.write(frame, out.as_uri(), RECORDS, CUT.parallelism, secrets.token_hex(8),
                                  {**dict([WRITER_VERSION]), **(options or {})})


def flat_rows_written(spark: Any) -> int | None:
    """Rows the session's JVM wrote column by column so far; ``None`` where the test cannot reach its JVM
    (Spark Connect)."""
    from pyspark.sql.connect.session import SparkSession as ConnectSession

    if isinstance(spark, ConnectSession):
        return None
    return int(spark.sparkContext._jvm.org.regionfailover.spark.FlatParquetWriteSupport.flatRows())


def test_it_writes_the_bytes_partition_by_writes(spark: Any, tmp_path: Path) -> None:
    frame = CUT.tag(typed_rows(spark))
    assert ours(frame, tmp_path / "ours"), "the session has the keyed writer (./dev bootstrap builds its jar)"
    partition_by(frame, tmp_path / "spark")
    mine, theirs = files(tmp_path / "ours"), files(tmp_path / "spark")
    assert len(mine) > 3 * CUT.parallelism, "several files per task and subpartition"
    assert mine == theirs
    named = [p for p in (tmp_path / "ours").rglob("*") if p.is_file() and not p.name.startswith((".", "_"))]
    assert named and all(PART.match(p.name) for p in named), named
    counted = keyed_writer.counted_attempts(tmp_path / "ours")  # the attempt Spark counted, one per task
    assert counted is not None and set(counted) == {f[0] for f in mine} and set(counted.values()) == {0}, counted


def test_it_writes_a_flat_rows_values_straight_to_their_columns_and_the_same_bytes(spark: Any,
                                                                                   tmp_path: Path) -> None:
    """Rows of top-level primitive columns skip parquet-mr's record consumer (the flat writer), and the files are
    still, byte for byte, those Spark's own writer makes: with the store's options (the wide decimal's dictionary
    off), and with the flat writer turned off."""
    rows = flat_rows(spark)
    frame, options = CUT.tag(rows), local_write.write_options(rows.schema.jsonValue())
    before = flat_rows_written(spark)
    assert ours(frame, tmp_path / "flat", options)
    after = flat_rows_written(spark)
    if before is not None and after is not None:
        assert after - before == 30_000, "every row went the flat writer's way"
    assert ours(frame, tmp_path / "spark-writer", {**options, "flatWriter": "false"})
    assert flat_rows_written(spark) == after, "the switch turns it off"
    partition_by(frame, tmp_path / "partition-by", options)
    flat = files(tmp_path / "flat")
    assert len(flat) > 3 * CUT.parallelism, "several files per task and subpartition"
    assert flat == files(tmp_path / "spark-writer") == files(tmp_path / "partition-by")


def test_a_flat_file_cut_into_row_groups_and_small_pages_is_still_the_same_bytes(spark: Any, tmp_path: Path) -> None:
    """The flat writer takes each new row group's column writers (parquet-mr makes a new column store per row
    group) and leaves the page cuts to parquet-mr: files of several row groups of small pages are Spark's bytes."""
    import pyarrow.parquet as pq

    rows = flat_rows(spark, 12_000)
    frame = CUT.tag(rows)
    options = {**local_write.write_options(rows.schema.jsonValue()), "parquet.block.size": "4096",
               "parquet.page.size": "512"}
    assert ours(frame, tmp_path / "flat", options)
    partition_by(frame, tmp_path / "partition-by", options)
    flat = files(tmp_path / "flat")
    assert flat == files(tmp_path / "partition-by")
    groups = [pq.ParquetFile(f.path).metadata.num_row_groups for f in local_files(tmp_path / "flat", keyed=True)]
    assert max(groups) > 1, groups


def test_the_stores_keyed_writes_go_through_it(spark: Any, s3_server: S3Endpoint,
                                               monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[bool] = []
    real = keyed_writer.write

    def counted(*args: Any) -> bool:
        calls.append(real(*args))
        return calls[-1]

    monkeypatch.setattr(keyed_writer, "write", counted)
    store = on_server(s3_server, f"kw-{secrets.token_hex(4)}")
    manifest, _ = store.write(typed_rows(spark), AttemptId("etl", "keyed", P, 1), cut=CUT)
    assert calls == [True] and manifest.partitioning is not None
    assert manifest.row_count == 30_000
    store.write(typed_rows(spark), AttemptId("etl", "unkeyed", P, 1))
    assert calls == [True], "an unkeyed write does not"
    monkeypatch.setattr(local_write, "MAX_OPEN_WRITERS", CUT.parallelism - 1)
    store.write(typed_rows(spark), AttemptId("etl", "many", P, 1), cut=CUT)
    assert calls == [True], "nor a cut into more subpartitions than a task may keep open"


def test_a_session_without_it_writes_through_partition_by_and_remembers(spark: Any, s3_server: S3Endpoint,
                                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    store = on_server(s3_server, f"kw-{secrets.token_hex(4)}")
    with_it, _ = store.write(typed_rows(spark), AttemptId("etl", "with", P, 1), cut=CUT)
    monkeypatch.setattr(keyed_writer, "FORMAT", "org.regionfailover.spark.NotOnTheClassPath")
    monkeypatch.setattr(keyed_writer, "WRITER", keyed_writer.JarSource(keyed_writer.FORMAT, "partitionBy"))
    without, _ = store.write(typed_rows(spark), AttemptId("etl", "without", P, 1), cut=CUT)
    assert keyed_writer.WRITER.known_missing(spark)
    assert without.objects == with_it.objects, "the same objects, content addresses and all"
    assert not keyed_writer.write(CUT.tag(typed_rows(spark)), "file:///nowhere", RECORDS, 4, "t", {})


def test_a_failed_task_leaves_no_part_file(spark: Any, tmp_path: Path) -> None:
    frame = typed_rows(spark).selectExpr("*", "CAST(IF(id = 29999, 9, id % 4) AS INT) AS _tag")
    with pytest.raises(Exception, match=r"_tag 9 is outside 0\.\.3"), session_settings(spark, [TIMESTAMPS]):
        keyed_writer.write(frame, (tmp_path / "out").as_uri(), RECORDS, 4, "t", {})
    # the tasks without the bad row published their files (the caller removes the failed write's directory); the
    # task with it, number 2, none: neither a part file nor a hidden one
    left = [p.name for p in (tmp_path / "out").rglob("*") if p.is_file()]
    assert [name for name in left if PART.match(name)], "the other tasks' files"
    assert not [name for name in left if "-00002-" in name], left

"""Building the keyed writer's jar (store/dataplane/keyed_writer.py): compiled from the provider's Java source against
the running pyspark, named by the source's hash, the same bytes every build, older builds replaced; without a JDK one
error naming the fix; of its output, only the task attempt Spark counted is taken. (Its writes:
tests/integration/test_keyed_writer.py.)"""

from __future__ import annotations

import hashlib
import shutil
import zipfile
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from airflow_region_failover.store.dataplane import keyed_writer

needs_javac = pytest.mark.skipif(shutil.which("javac") is None, reason="no JDK on this machine")


def test_the_jar_is_named_by_its_source() -> None:
    digest = hashlib.sha256(b"".join(s.read_bytes() for s in keyed_writer.SOURCES)).hexdigest()[:12]
    assert [s.name for s in keyed_writer.SOURCES] == ["FlatParquetWriteSupport.java", "KeyedParquet.java",
                                                    "ListedParquet.java"]
    assert keyed_writer.jar_name() == f"region-failover-keyed-parquet-{digest}.jar"
    assert f"package {keyed_writer.FORMAT.rsplit('.', 1)[0]};" in keyed_writer.SOURCE.read_text()


@needs_javac
def test_a_build_holds_the_writer_and_replaces_older_builds(tmp_path: Path) -> None:
    old = tmp_path / "region-failover-keyed-parquet-000000000000.jar"
    old.write_bytes(b"an older build")
    jar = keyed_writer.build(tmp_path)
    assert jar.name == keyed_writer.jar_name() and not old.exists()
    with zipfile.ZipFile(jar) as built:
        names = built.namelist()
        classes = ("FlatParquetWriteSupport", "KeyedParquet", "ListedParquet")
        assert {f"org/regionfailover/spark/{c}.class" for c in classes} <= set(names)
        assert {info.date_time for info in built.infolist()} == {(1980, 1, 1, 0, 0, 0)}, "no build time inside"
    before = jar.read_bytes()
    assert keyed_writer.build(tmp_path) == jar and jar.read_bytes() == before, "an existing build is kept"
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".")], "no partial jar left"


def test_without_a_jdk_the_error_names_the_fix(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("JAVA_HOME", raising=False)
    monkeypatch.setattr(keyed_writer.shutil, "which", lambda name: None)
    with pytest.raises(FileNotFoundError, match=r"javac.*JAVA_HOME.*partitionBy"):
        keyed_writer.javac()


class Session:
    """A stand-in for a Spark session (the sessions are held weakly)."""


def test_a_session_without_a_jar_class_is_remembered_only_for_that_class() -> None:
    source = keyed_writer.JarSource("org.regionfailover.spark.ListedParquet", "Spark lists")
    spark, other = Session(), Session()
    assert not source.missing(spark, RuntimeError("[DATA_SOURCE_NOT_FOUND] Failed to find data source: other.Class"))
    assert not source.missing(spark, RuntimeError("Connection refused: org.regionfailover.spark.ListedParquet"))
    assert not source.known_missing(spark)
    assert source.missing(spark, RuntimeError(
        "[DATA_SOURCE_NOT_FOUND] Failed to find the data source: org.regionfailover.spark.ListedParquet."))
    assert source.known_missing(spark) and not source.known_missing(other)
    with source.passed_over(other):
        assert source.known_missing(other)
    assert not source.known_missing(other), "passed over for the block only"
    with source.passed_over(spark):
        pass
    assert source.known_missing(spark), "a session found without the class stays so after a block"


def test_only_the_attempt_spark_counted_is_taken_when_two_attempts_of_a_task_published(tmp_path: Path) -> None:
    """The keyed writer's renames are not Spark's output-commit protocol: attempt 0 of task 0 published two files
    of subpartition 1 and one of subpartition 2, then attempt 1 (the one Spark counted, its rows in another order)
    published one file of subpartition 1. Before the fix the driver took all four files of task 0 (a mixed set:
    rows twice, or of two orders); now only attempt 1's, and task 1's own counted attempt.

        task 0: a0 -> j=1 c000, j=1 c001, j=2 c000 (not counted)    a1 -> j=1 c000 (counted)
        task 1: a0 -> j=2 c000 (counted)
    """
    from airflow_region_failover.store.dataplane import local_write as lw
    from airflow_region_failover.store.dataplane.encoding import SUBPARTITION_COLUMN

    def publish(task: int, attempt: int, sub: int, counter: int) -> None:
        name = f"part-{task:05d}-tok-a{attempt}.c{counter:03d}.snappy.parquet"
        path = tmp_path / f"{SUBPARTITION_COLUMN}={sub}" / name
        path.parent.mkdir(parents=True, exist_ok=True)
        pq.write_table(pa.table({"id": [task, attempt, sub, counter]}), path)

    for task, attempt, sub, counter in ((0, 0, 1, 0), (0, 0, 1, 1), (0, 0, 2, 0), (0, 1, 1, 0), (1, 0, 2, 0)):
        publish(task, attempt, sub, counter)
    (tmp_path / "_attempts").write_text("1 0\n0 1")
    got = [(f.number, f.subpartition, f.sequence, f.path.name) for f in lw.local_files(tmp_path, keyed=True)]
    assert got == [(0, 1, 0, "part-00000-tok-a1.c000.snappy.parquet"),
                   (1, 2, 0, "part-00001-tok-a0.c000.snappy.parquet")], got

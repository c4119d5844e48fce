"""Building the keyed writer's jar (store/dataplane/keyed_writer.py): compiled from the provider's Java source against
the running pyspark, named by the source's hash, the same bytes every build, older builds replaced; without a JDK one
error naming the fix. (Its writes: tests/integration/test_keyed_writer.py.)"""

from __future__ import annotations

import hashlib
import shutil
import zipfile
from pathlib import Path

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

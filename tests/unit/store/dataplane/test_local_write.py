"""The write through Spark's own Parquet writer to the driver's disk (store/dataplane/local_write.py), its pure parts:
which part files count and in what order, a keyed file's subpartition from its directory, the rows-per-file bound from
the schema, whether a session may use it (asked once, a fake session), and how the files are stored (moto's
in-memory S3; files written by pyarrow under Spark's names). The real sessions are in
tests/integration/test_store_local_write.py."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from airflow_region_failover.exceptions import StoreError
from airflow_region_failover.graph.ids import PartitionId
from airflow_region_failover.store.dataplane import local_write as lw
from airflow_region_failover.store.dataplane import s3a
from airflow_region_failover.store.dataplane.encoding import SUBPARTITION_COLUMN
from airflow_region_failover.store.keys import AttemptId
from airflow_region_failover.store.result_store import ResultStore

UUID = "c8a98b48-8f3b-4d7e-9a61-0c1d2e3f4a5b"  # a uuid segment like a file counter (c8...): not taken for one


def part(task: int, counter: int, keyed: bool = False) -> str:
    """Spark's name of a part file (a partitioned write puts a dot before the counter)."""
    return f"part-{task:05d}-{UUID}{'.' if keyed else '-'}c{counter:03d}.snappy.parquet"


def touch(path: Path, rows: int = 1, first: int = 0) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    pq.write_table(pa.table({"id": list(range(first, first + rows))}), path)
    return path


def test_part_files_come_in_task_then_counter_order_and_nothing_else_counts(tmp_path: Path) -> None:
    for task, counter in ((10, 0), (2, 1), (2, 0), (2, 10), (0, 1000)):
        touch(tmp_path / part(task, counter))
    (tmp_path / "_SUCCESS").write_bytes(b"")
    (tmp_path / f".{part(2, 0)}.crc").write_bytes(b"crc")
    got = [(f.number, f.subpartition, f.sequence) for f in lw.local_files(tmp_path, keyed=False)]
    assert got == [(0, -1, 1000), (2, -1, 0), (2, -1, 1), (2, -1, 10), (10, -1, 0)]
    touch(tmp_path / "part-00003.parquet")  # a name of another Spark: refused, never left out
    with pytest.raises(StoreError, match=r"part-00003\.parquet: a file Spark wrote that is not named like a part"):
        lw.local_files(tmp_path, keyed=False)


def test_a_keyed_files_subpartition_is_its_directory(tmp_path: Path) -> None:
    for sub, task, counter in ((3, 0, 0), (0, 1, 0), (12, 0, 1), (0, 0, 0), (3, 0, 1)):
        touch(tmp_path / f"{SUBPARTITION_COLUMN}={sub}" / part(task, counter, keyed=True))
    got = [(f.number, f.subpartition, f.sequence) for f in lw.local_files(tmp_path, keyed=True)]
    assert got == [(0, 0, 0), (0, 3, 0), (0, 3, 1), (0, 12, 1), (1, 0, 0)]
    assert lw.subpartition_of(f"{SUBPARTITION_COLUMN}=7") == 7
    for bad in ("other=1", f"{SUBPARTITION_COLUMN}=", f"{SUBPARTITION_COLUMN}=__HIVE_DEFAULT_PARTITION__"):
        with pytest.raises(ValueError, match="is not a directory of"):
            lw.subpartition_of(bad)


def test_rows_per_file_follow_sparks_default_size_of_the_schema() -> None:
    from pyspark.sql.types import (
        ArrayType,
        DecimalType,
        IntegerType,
        LongType,
        MapType,
        StringType,
        StructField,
        StructType,
        TimestampType,
    )

    schema = StructType([StructField("id", LongType()), StructField("n", IntegerType()),
                         StructField("small", DecimalType(12, 2)), StructField("big", DecimalType(30, 2)),
                         StructField("s", StringType()), StructField("ts", TimestampType()),
                         StructField("arr", ArrayType(LongType())), StructField("m", MapType(StringType(), LongType())),
                         StructField("st", StructType([StructField("a", IntegerType())]))])
    assert lw.row_bytes(schema.jsonValue()) == 8 + 4 + 8 + 16 + 20 + 8 + 8 + (20 + 8) + 4
    assert lw.records_per_file(schema.jsonValue(), 16 * 1024 * 1024) == 16 * 1024 * 1024 // 104
    assert lw.records_per_file(StructType([]).jsonValue(), 1024) == 1024  # no columns: one byte a row
    assert lw.type_bytes("varchar(30)") == 30 and lw.type_bytes("interval year to month") == 4
    assert lw.type_bytes("interval") == 16 and lw.type_bytes("interval day to second") == 8


def test_executors_on_other_hosts_are_ruled_out_by_the_master() -> None:
    for master in ("local", "local[2]", "local[*, 3]", "local-cluster[2, 1, 1024]", "spark://127.0.0.1:7077",
                   "spark://localhost:7077", "spark://[::1]:7077", None):
        assert lw.same_host(master), master
    for master in ("yarn", "k8s://https://api:6443", "spark://10.0.0.5:7077", "spark://127.0.0.1.example:7077",
                   "spark://host-a:7077,host-b:7077"):
        assert not lw.same_host(master), master


class FakeSession:
    """``spark.conf.get("spark.master")``; ``spark.range(1).write.parquet(url)`` (a master other than ``local``):
    writes a 1-row part file (``writes``), a file elsewhere (``elsewhere``), or raises ``error``;
    ``spark.read.schema(s).parquet(url).schema`` (a ``local`` master): finds the file where it is (``elsewhere``:
    as a driver on another filesystem would not) or raises ``error``. ``asked``: probes; ``jobs``: Spark jobs."""

    def __init__(self, master: str = "local[2]", *, error: str = "", elsewhere: bool = False) -> None:
        self.master, self.error, self.elsewhere, self.asked, self.jobs = master, error, elsewhere, 0, 0
        self.conf, self.write, self.read = self, Writer(self), Reader(self)

    def get(self, key: str, default: Any = None) -> Any:
        assert key == "spark.master"
        return self.master

    def range(self, n: int) -> FakeSession:
        assert n == 1
        return self

    def fail(self) -> None:
        self.asked += 1
        if self.error:
            raise RuntimeError(self.error + "\n\tat org.apache.spark.sql.execution.datasources.DataSource")


class Writer:
    def __init__(self, session: FakeSession) -> None:
        self.session = session

    def parquet(self, url: str) -> None:
        self.session.jobs += 1
        self.session.fail()
        out = Path(url.removeprefix("file://"))
        touch((out.parent / "elsewhere" if self.session.elsewhere else out) / part(0, 0))
        self.session.wrote = out


class Reader:
    def __init__(self, session: FakeSession) -> None:
        self.session = session

    def options(self, **options: str) -> Reader:
        assert options == {}, "a local file needs no read options"
        return self

    def schema(self, schema: str) -> Reader:
        assert schema == "probe long"
        return self

    def parquet(self, url: str) -> Reader:
        self.session.fail()
        path = Path(url.removeprefix("file://"))
        self.session.wrote = path
        if self.session.elsewhere or not path.exists():
            raise RuntimeError(f"[PATH_NOT_FOUND] Path does not exist: {url}.")
        return self


def test_a_session_is_asked_once_and_off_asks_nothing(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger=lw.__name__)
    good = FakeSession()
    assert all(lw.jvm_writer(good, s3a.Mode.AUTO) for _ in range(3)) and lw.jvm_writer(good, s3a.Mode.CLUSTER)
    assert good.asked == 1 and not good.wrote.parent.exists(), "the probe's directory is removed"
    off = FakeSession()
    assert not lw.jvm_writer(off, s3a.Mode.OFF) and off.asked == 0
    remote = FakeSession("yarn")
    assert not any(lw.jvm_writer(remote, s3a.Mode.AUTO) for _ in range(2)) and remote.asked == 0
    failing = FakeSession("spark://127.0.0.1:7077", error="[PATH_NOT_FOUND] denied")
    assert not lw.jvm_writer(failing, s3a.Mode.AUTO) and failing.asked == 1
    apart = FakeSession("spark://127.0.0.1:7077", elsewhere=True)
    assert not lw.jvm_writer(apart, s3a.Mode.AUTO) and not apart.wrote.parent.exists()
    lines = [r.getMessage() for r in caplog.records]
    assert len(lines) == 4
    assert "writes results with Spark's own Parquet writer to the driver's disk" in lines[0]
    assert lines[1].endswith("not Spark's own Parquet writer: its master yarn may run executors on other hosts")
    assert lines[2].endswith("not Spark's own Parquet writer: [PATH_NOT_FOUND] denied")
    assert "is not on the driver's filesystem" in lines[3]


def test_a_local_master_is_asked_without_a_spark_job(caplog: pytest.LogCaptureFixture) -> None:
    """A job queues behind every other session's tasks (11-15 s on the ETL's critical path at 1 GB); with a local
    master the executors are the driver's JVM, so the driver finding this process's file is the whole probe."""
    caplog.set_level(logging.INFO, logger=lw.__name__)
    local = FakeSession("local[2]")
    assert lw.jvm_writer(local, s3a.Mode.AUTO) and (local.asked, local.jobs) == (1, 0)
    assert not local.wrote.parent.exists(), "the probe's directory is removed"
    apart = FakeSession("local[*]", elsewhere=True)
    assert not lw.jvm_writer(apart, s3a.Mode.AUTO) and apart.jobs == 0
    for master in ("local-cluster[2, 1, 1024]", "spark://127.0.0.1:7077", None):
        other = FakeSession(master)
        assert lw.jvm_writer(other, s3a.Mode.AUTO) and (other.asked, other.jobs) == (1, 1), master
    lines = [r.getMessage() for r in caplog.records]
    assert "[PATH_NOT_FOUND] Path does not exist" in lines[1], lines


def test_files_are_stored_content_addressed_in_order_with_their_footer_rows(store: ResultStore,
                                                                             tmp_path: Path) -> None:
    touch(tmp_path / f"{SUBPARTITION_COLUMN}=1" / part(0, 0), rows=5)
    touch(tmp_path / f"{SUBPARTITION_COLUMN}=0" / part(1, 0), rows=7, first=100)
    touch(tmp_path / f"{SUBPARTITION_COLUMN}=0" / part(0, 0), rows=3, first=200)
    touch(tmp_path / f"{SUBPARTITION_COLUMN}=0" / part(0, 1), rows=0)  # Spark's file of an empty task
    target = store.target(AttemptId("etl", "r1", PartitionId("r", 0), 1))
    written = lw._stored(target, lw.local_files(tmp_path, keyed=True), spark_s=2.5)
    assert [(o.subpartition, o.size) for o in written.objects] == [
        (0, (tmp_path / f"{SUBPARTITION_COLUMN}=0" / part(0, 0)).stat().st_size),
        (1, (tmp_path / f"{SUBPARTITION_COLUMN}=1" / part(0, 0)).stat().st_size),
        (0, (tmp_path / f"{SUBPARTITION_COLUMN}=0" / part(1, 0)).stat().st_size)]
    assert written.rows == 15 and written.subpartition_rows == {0: 10, 1: 5}
    assert (written.tally.objects, written.tally.new_objects) == (3, 3)
    assert written.work["encode"] == 2.5 and written.work["writers"] == 1.0 and written.work["upload"] > 0
    body = store.objects.client.get_object(Bucket="bkt", Key=store.layout.cas_object(written.objects[0].sha256))
    assert pq.read_table(pa.BufferReader(body["Body"].read()))["id"].to_pylist() == [200, 201, 202]
    again = lw._stored(store.target(AttemptId("etl", "r2", PartitionId("r", 0), 1)), lw.local_files(tmp_path,
                                                                                                    keyed=True), 1.0)
    assert again.objects == written.objects and again.tally.new_bytes == 0


def test_a_keyed_write_lets_every_subpartition_have_its_writer_before_spark_would_sort() -> None:
    """Spark sorts the rows left once its open writers reach ``maxConcurrentOutputFileWriters``: with the setting
    equal to the subpartitions, the last subpartition's first row made the write sort (JFR: the ETL's keyed
    writes spent their time in ``UnsafeExternalRowSorter`` under ``DynamicPartitionDataConcurrentWriter``)."""
    for subpartitions, setting in ((1, "2"), (2, "3"), (16, "17"), (17, "17"), (1000, "17")):
        assert dict(lw.keyed_settings(subpartitions)) == {
            "spark.sql.optimizer.plannedWrite.enabled": "false",
            "spark.sql.maxConcurrentOutputFileWriters": setting}, subpartitions


def test_the_write_turns_the_dictionary_off_for_every_wide_decimal_by_its_parquet_path() -> None:
    """Decimals of more than 18 digits, where Spark's Parquet schema puts them: a struct's field by a dot, an
    array's element under ``list.element``, a map's key and value under ``key_value``; none under a name with a
    dot (Parquet's column path would split it), none for 18 digits or fewer."""
    wide, narrow = "decimal(24,2)", "decimal(18,2)"
    schema = {"type": "struct", "fields": [
        {"name": "revenue", "type": wide}, {"name": "price", "type": narrow}, {"name": "a.b", "type": wide},
        {"name": "s", "type": {"type": "struct", "fields": [{"name": "total", "type": "decimal(38,0)"}]}},
        {"name": "xs", "type": {"type": "array", "elementType": wide, "containsNull": True}},
        {"name": "m", "type": {"type": "map", "keyType": wide, "valueType": narrow, "valueContainsNull": True}}]}
    paths = ["revenue", "s.total", "xs.list.element", "m.key_value.key"]
    assert lw.wide_decimal_paths(schema) == paths
    assert lw.write_options(schema) == {
        "parquet.writer.version": "v2", **{f"parquet.enable.dictionary#{path}": "false" for path in paths}}
    assert lw.write_options({"type": "struct", "fields": [{"name": "id", "type": "long"}]}) == {
        "parquet.writer.version": "v2"}


def test_the_write_turns_the_dictionary_off_for_a_keyed_writes_integer_keys() -> None:
    """The keys (``partition_by``) Parquet stores as integers — ints, longs, dates, timestamps, decimals of up to 18
    digits — in the keys' order; not a string key, not a struct or array key, not a column that is not a key, not a
    name with a dot; a wide decimal key once, as a wide decimal."""
    fields = [("id", "long"), ("day", "date"), ("name", "string"), ("n", "integer"), ("amount", "decimal(12,2)"),
              ("total", "decimal(24,2)"), ("at", "timestamp"), ("a.b", "long"), ("other", "long"),
              ("pair", {"type": "struct", "fields": [{"name": "x", "type": "long"}]}),
              ("xs", {"type": "array", "elementType": "long", "containsNull": True})]
    schema = {"type": "struct", "fields": [{"name": n, "type": t} for n, t in fields]}
    keys = ("name", "at", "id", "day", "n", "amount", "total", "a.b", "missing", "pair", "xs")
    assert lw.integer_key_paths(schema, keys) == ["at", "id", "day", "n", "amount"]
    assert lw.write_options(schema, keys) == {
        "parquet.writer.version": "v2",
        **{f"parquet.enable.dictionary#{path}": "false" for path in ("total", "at", "id", "day", "n", "amount")}}
    assert lw.write_options(schema) == {"parquet.writer.version": "v2", "parquet.enable.dictionary#total": "false"}

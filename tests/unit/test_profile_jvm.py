"""The Spark JVM's CPU samples cut by kind of work (``benchmarks/profile_jvm.py``), on made-up samples."""

from __future__ import annotations

from benchmarks.profile_jvm import OTHER, busy, category, innermost, inside, table

ENCODE = ["org.apache.parquet.column.impl.ColumnWriterV1.write",
          "org.apache.spark.sql.execution.datasources.parquet.ParquetOutputWriter.write",
          "org.apache.spark.sql.execution.datasources.FileFormatWriter$.executeTask"]
SORT = ["org.apache.spark.util.collection.unsafe.sort.RadixSort.sortKeyPrefixArray",
        "org.apache.spark.sql.execution.UnsafeExternalRowSorter.sort",
        "org.apache.spark.sql.execution.datasources.FileFormatWriter$.executeTask"]


def test_a_sample_is_filed_under_its_innermost_named_work() -> None:
    assert category(ENCODE) == "Parquet encoding"
    assert category(SORT) == "sorting", "the sort's own frame, not the writer that called it"
    assert category(["org.apache.spark.scheduler.TaskSetManager.resourceOffer"]).startswith("other Spark")
    assert category(["java.util.HashMap.get"]) == OTHER and category([]) == OTHER
    keyed = ["org.regionfailover.spark.KeyedParquet$Part.call", "org.apache.spark.rdd.RDD.foreachPartition"]
    assert category(keyed) == "Parquet encoding", "the keyed writer's own row loop is the store's write"


def test_each_runs_share_of_samples_is_scaled_to_its_jvm_cpu_seconds() -> None:
    found = [(1.0, "Parquet encoding", "m"), (2.0, "sorting", "a"), (3.0, "sorting", "b"), (4.0, "sorting", "a"),
             (11.0, "sorting", "a"), (12.0, "shuffle write", "w"), (99.0, "Parquet encoding", "m")]  # last: no run
    runs = {"ours": (0.0, 5.0, 40.0), "(a)": (10.0, 15.0, 10.0)}
    lines = table(found, runs)
    assert "| Parquet encoding | 10.0 | 0.0 | +10.0 |" in lines
    assert "| sorting | 30.0 | 5.0 | +25.0 |" in lines and "| shuffle write | 0.0 | 5.0 | -5.0 |" in lines
    assert lines[2].startswith("| sorting"), "largest difference first"
    assert "| **Spark JVM CPU s** (process accounting) | **40.0** | **10.0** | **+30.0** |" in lines
    assert inside(found, runs, "sorting")[3:] == ["| `a` | 66.7% |", "| `b` | 33.3% |"], "ours' samples only"


def test_the_method_of_a_sample_is_its_innermost_frame_outside_the_jdk() -> None:
    assert innermost(["java.lang.Integer.equals", "shaded.parquet.Long2IntMap.get", "x.Y.z"]) == (
        "shaded.parquet.Long2IntMap.get")
    assert innermost(["java.lang.Thread.run"]) == "java.lang.Thread.run" and innermost([]) == "?"


def test_the_machines_load_is_averaged_over_each_runs_window() -> None:
    found = [(1.0, 1.0), (2.0, 0.5), (3.0, 0.9), (11.0, 0.25), (12.0, 0.75), (20.0, 0.0)]  # the last: no run
    runs = {"ours": (0.0, 5.0, 40.0), "(a)": (10.0, 15.0, 10.0)}
    assert busy(found, runs) == "machine CPU load (jdk.CPULoad, once a second): ours 80.0% over 3 s, (a) 50.0% over 2 s"

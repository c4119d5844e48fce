"""What the Spark JVM's threads were doing in ours and in (a): Java Flight Recorder's CPU samples of one
``bench_breakdown.py`` run pair, split by the two runs' time windows and cut by the innermost frame that names a
kind of work (Parquet encoding, decoding, shuffle, sort, join, generated stage code, ...).

``JAVA_TOOL_OPTIONS="-XX:StartFlightRecording=filename=DIR/,settings=profile,dumponexit=true" \\
python benchmarks/bench_breakdown.py --sizes 1 --json run.json``, then
``python benchmarks/profile_jvm.py DIR/<recording>.jfr run.json [--inside "Parquet encoding"]``

The environment variable reaches the stack's Spark Connect server (the only JVM of the stack: ours' step tasks and
(a) are its clients), which dumps the recording when it stops. A sample (``jdk.ExecutionSample``, every 10-20 ms
per running Java thread) is filed under the first category, innermost frame first, whose pattern matches a frame;
each run's share of samples is scaled to that run's Spark JVM CPU seconds (process accounting, from the JSON).
JFR samples Java code only: garbage collection, JIT compilation and native code (JNI codecs) are spread over the
categories in proportion. ``--inside CATEGORY``: also the methods ours' samples of that category were in (the
innermost frame outside the JDK and Scala's runtime), most frequent first. Below the table, the machine's mean CPU
load during each run (``jdk.CPULoad``, once a second): whether the cores were ever idle.
"""

from __future__ import annotations

import argparse
import collections
import datetime
import json
import re
import subprocess
import sys
from typing import Any

CATEGORIES = (
    ("Parquet encoding", r"org\.apache\.parquet\.(column\.(impl|values)\.|hadoop\.(ColumnChunkPageWriteStore|"
                         r"InternalParquetRecordWriter|ParquetRecordWriter|CodecFactory\$HeapBytesCompressor))|"
                         r"ParquetWriteSupport|ParquetOutputWriter|FileFormatDataWriter|"
                         r"org\.regionfailover\.spark\.KeyedParquet"),
    ("Parquet decoding", r"Vectorized(ParquetRecordReader|ColumnReader|RleValuesReader|PlainValuesReader|"
                         r"DeltaBinaryPacked)|org\.apache\.parquet\.(hadoop\.ParquetFileReader|bytes|column\.values)|"
                         r"CodecFactory\$HeapBytesDecompressor|ParquetFileFormat|ParquetColumnVector|"
                         r"(OnHeap|Writable)ColumnVector|FileScanRDD"),
    ("compression codecs (snappy, lz4, zstd)", r"org\.xerial\.snappy|io\.airlift\.compress|net\.jpountz|"
                                               r"com\.github\.luben\.zstd|org\.apache\.hadoop\.io\.compress"),
    ("shuffle write", r"UnsafeShuffleWriter|SortShuffleWriter|ShuffleExternalSorter|BypassMergeSortShuffleWriter|"
                      r"DiskBlockObjectWriter|ShuffleWriteProcessor"),
    ("shuffle read", r"ShuffleBlockFetcherIterator|BlockStoreShuffleReader|UnsafeRowSerializer|ShuffledRowRDD"),
    ("sorting", r"UnsafeExternalSorter|UnsafeInMemorySorter|RadixSort|UnsafeExternalRowSorter|UnsafeSorterSpill|"
                r"TimSort|SortExec"),
    ("joins", r"SortMergeJoin|HashJoin|HashedRelation"),
    ("aggregation", r"HashAggregate|UnsafeFixedWidthAggregationMap|BytesToBytesMap|ObjectAggregation"),
    ("s3a and HTTP", r"org\.apache\.hadoop\.fs\.s3a|software\.amazon|org\.apache\.http"),
    ("Spark Connect, gRPC, Arrow", r"org\.apache\.spark\.sql\.connect|io\.grpc|io\.netty|org\.apache\.arrow|"
                                   r"ArrowConverters"),
    ("analysis and planning", r"org\.apache\.spark\.sql\.catalyst\.(analysis|optimizer|rules|trees)|"
                              r"QueryExecution|SparkPlanner|AdaptiveSparkPlan|InMemoryFileIndex|HadoopFSUtils"),
    ("generated stage code (computing rows)", r"GeneratedClass|GeneratedIteratorForCodegenStage|BufferedRowIterator"),
    ("expressions, hashing", r"XXH64|Murmur3|catalyst\.expressions"),
    ("other Spark (scheduler, RPC, memory)", r"org\.apache\.spark"),
)
OTHER = "other (JDK, Scala)"
PATTERNS = tuple((name, re.compile(pattern)) for name, pattern in CATEGORIES)


def category(frames: list[str]) -> str:
    """The first category, innermost frame first, whose pattern matches a frame (module rule)."""
    for frame in frames:
        for name, pattern in PATTERNS:
            if pattern.search(frame):
                return name
    return OTHER


def innermost(frames: list[str]) -> str:
    """The innermost frame outside the JDK and Scala's runtime (the first frame when all are)."""
    return next((f for f in frames if not f.startswith(("java.", "jdk.", "sun.", "scala."))), frames[0] if frames
                else "?")


def events(recording: str, name: str, *options: str) -> list[tuple[float, dict[str, Any]]]:
    """(epoch seconds, values) of every event ``name`` in the recording (``jfr print --json``)."""
    printed = subprocess.run(["jfr", "print", "--json", *options, "--events", name, recording], capture_output=True,
                             text=True, check=True).stdout
    return [(datetime.datetime.fromisoformat(e["values"]["startTime"].replace("Z", "+00:00")).timestamp(), e["values"])
            for e in json.loads(printed)["recording"]["events"]]


def samples(recording: str) -> list[tuple[float, str, str]]:
    """(epoch seconds, category, innermost frame) of every CPU sample in the recording."""
    out = []
    for at, values in events(recording, "jdk.ExecutionSample", "--stack-depth", "48"):
        frames = [f'{f["method"]["type"]["name"]}.{f["method"]["name"]}'.replace("/", ".")  # JFR: a/b/C
                  for f in (values.get("stackTrace") or {}).get("frames", [])]
        out.append((at, category(frames), innermost(frames)))
    return out


def loads(recording: str) -> list[tuple[float, float]]:
    """(epoch seconds, the machine's CPU load 0..1) of every ``jdk.CPULoad`` event (once a second)."""
    return [(at, float(values["machineTotal"])) for at, values in events(recording, "jdk.CPULoad")]


def busy(found: list[tuple[float, float]], runs: dict[str, tuple[float, float, float]]) -> str:
    """How busy the machine's CPUs were during each run: the mean of the load events inside its window. Where both
    runs keep the CPUs equally busy, each turns CPU seconds into wall time at the same rate, so ours' extra wall time
    is its extra CPU seconds over that rate."""
    parts = []
    for run, (lo, hi, _) in runs.items():
        inside_run = [load for at, load in found if lo <= at <= hi]
        mean = sum(inside_run) / len(inside_run) if inside_run else float("nan")
        parts.append(f"{run} {mean:.1%} over {len(inside_run)} s")
    return "machine CPU load (jdk.CPULoad, once a second): " + ", ".join(parts)


def windows(pair: dict[str, Any]) -> dict[str, tuple[float, float, float]]:
    """Per run of the pair: (start, end, Spark JVM CPU s)."""
    ours, app = pair["ours"][0], pair["app"][0]
    return {"ours": (ours["run_started"], ours["run_ended"], ours["cpu"]["Spark JVM"]),
            "(a)": (app["timeline"]["process_started"], app["ended"], app["cpu"]["Spark JVM"])}


def table(found: list[tuple[float, str, str]], runs: dict[str, tuple[float, float, float]]) -> list[str]:
    """The markdown table: per category, each run's CPU seconds (its share of samples x its JVM CPU s)."""
    counts = {run: collections.Counter(c for at, c, _ in found if lo <= at <= hi)
              for run, (lo, hi, _) in runs.items()}
    totals = {run: max(1, sum(c.values())) for run, c in counts.items()}
    seconds = {run: {c: n / totals[run] * runs[run][2] for c, n in counts[run].items()} for run in runs}
    names = sorted({c for run in counts for c in counts[run]},
                   key=lambda c: -(seconds["ours"].get(c, 0.0) - seconds["(a)"].get(c, 0.0)))
    lines = ["| what the Spark JVM's threads were doing | ours CPU s | (a) CPU s | ours - (a) |",
             "|---|---:|---:|---:|"]
    for name in names:
        mine, theirs = seconds["ours"].get(name, 0.0), seconds["(a)"].get(name, 0.0)
        lines.append(f"| {name} | {mine:.1f} | {theirs:.1f} | {mine - theirs:+.1f} |")
    lines.append(f"| **Spark JVM CPU s** (process accounting) | **{runs['ours'][2]:.1f}** | **{runs['(a)'][2]:.1f}** "
                 f"| **{runs['ours'][2] - runs['(a)'][2]:+.1f}** |")
    lines.append(f"\nsamples: ours {sum(counts['ours'].values())}, (a) {sum(counts['(a)'].values())}")
    return lines


def inside(found: list[tuple[float, str, str]], runs: dict[str, tuple[float, float, float]], name: str,
           most: int = 15) -> list[str]:
    """The methods ours' samples of category ``name`` were in, with their share of that category."""
    lo, hi, _ = runs["ours"]
    methods = collections.Counter(m for at, c, m in found if c == name and lo <= at <= hi)
    total = max(1, sum(methods.values()))
    return [f"\n{name}, ours: {sum(methods.values())} samples", "| method | share |", "|---|---:|"] + [
        f"| `{method}` | {count / total:.1%} |" for method, count in methods.most_common(most)]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("recording", help="the .jfr file the Spark Connect server dumped")
    parser.add_argument("runs", help="bench_breakdown.py's --json file (its first run pair is used)")
    parser.add_argument("--inside", help="also the methods ours' samples of this category were in")
    args = parser.parse_args(argv)
    with open(args.runs) as handle:
        runs = windows(json.load(handle)[0])
    found = samples(args.recording)
    print("\n".join(table(found, runs) + [busy(loads(args.recording), runs)]
                    + (inside(found, runs, args.inside) if args.inside else [])))
    return 0


if __name__ == "__main__":
    sys.exit(main())

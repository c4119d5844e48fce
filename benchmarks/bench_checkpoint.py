"""Checkpointed steps, side by side with the same step unchecked: recovery after a late failure, overhead without
failure, and incremental uploads (issue 24's targets).

``SPARK_LOCAL_IP=127.0.0.1 python benchmarks/bench_checkpoint.py [--size-mb 1024] [--epochs 20] [--keys 1000000]
[--repeat 1]``

One SeaweedFS server and an embedded Spark session (``local[2]``); the step runs through the provider's own run
path (:func:`~airflow_region_failover.spark.run.start`, :func:`~airflow_region_failover.spark.checkpointed.
run_checkpointed`), without Airflow (whose per-task cost is the same for both sides). The input is one BLOCKING
partition of ``--size-mb`` (rows ``(id, key, value, pad)``, written as one Spark partition per epoch); the step
keeps a running count and sum per key for ``--keys`` keys (all of them from epoch 0 on) and each epoch's rows touch
exactly ``5 %`` of the keys, scattered: row ``id`` of epoch ``e`` counts for key ``(id mod K/20)·20 + e mod 20``
(the key is derived from the epoch, not read from the input's ``key`` column: the epoch plan cuts the input's
objects into epochs of equal bytes, and an epoch's objects may come from two Spark partitions — before 2026-11-26
that made 18 of 19 epochs touch 10 % of the keys); it outputs the epoch's per-key aggregates.
``Checkpoint(epochs=E)``; the unchecked side is the same step with ``Checkpoint(..., enabled=False)`` (same epochs,
same state hand-over, no checkpoint).

Reported: (1) a run that fails in epoch ``E-2`` (on its first try) and its second try: the epochs it recomputed and
its wall time (failure to success: the second try, restore included), checked vs unchecked; (2) a run without
failure, checked vs unchecked, and the overhead (with ``--repeat`` > 1 each round's figure too); (3) per checkpoint
after the first, the state bytes uploaded ÷ **the full state at that checkpoint**: the bytes a full,
non-incremental checkpoint of the same state would upload (after the run, untimed: each checkpoint's runs read
back, merged and encoded as one base run as the store encodes runs), median and max — over every checkpoint and
over the incremental ones alone (compactions upload merged runs) — with the bytes per changed key of the
incremental ones, and beside it the ratio to the first checkpoint's upload (the figure reported before); and the
checkpoint duration.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import sys
import tempfile
import time
import zlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import _repo_path  # noqa: F401 - puts the repository root on sys.path
from airflow_region_failover.store.keys import AttemptId

DAG = "bench_checkpoint"
SHARE = 20
"""Epoch ``e`` touches the keys ``k ≡ e (mod SHARE)``: 5 % of them."""


@dataclass
class FakeTI:
    """What the run path reads of an Airflow task instance."""

    ref: dict[str, Any]
    run_id: str
    try_number: int
    task_id: str = "agg.0"
    dag_id: str = DAG
    pushed: dict[str, Any] = field(default_factory=dict)

    def xcom_pull(self, *, task_ids: str, key: str) -> Any:
        return self.ref

    def xcom_push(self, *, key: str, value: Any) -> None:
        self.pushed[key] = value


def make_step(keys: int, fail_at: int, salt: int) -> Any:
    """The stateful step: running count and sum per key (starting at ``salt``, so that no run's state or output
    bytes equal another's and every run uploads what it writes); fails on try 1 in epoch ``fail_at`` (-1: never)."""

    def aggregate(spark: Any, inputs: Any, state: Any, context: Any) -> Any:
        from pyspark.sql import functions as F

        if context.epoch.index == fail_at and context.try_number == 1:
            raise RuntimeError(f"injected failure in epoch {fail_at}")
        touched = (F.col("id") % (keys // SHARE)) * SHARE + context.epoch.index % SHARE
        seen = inputs["src"].groupBy(touched.alias("key")).agg(F.count("*").alias("d"), F.sum("value").alias("s"))
        if context.epoch.index == 0:
            state = spark.range(keys).select(F.col("id").alias("key"), F.lit(0).cast("long").alias("n"),
                                             F.lit(float(salt)).alias("total"))
        new = state.join(seen, "key", "left_outer").select(
            "key", (F.col("n") + F.coalesce("d", F.lit(0))).alias("n"),
            (F.col("total") + F.coalesce("s", F.lit(0.0))).alias("total"))
        return seen.withColumn("epoch", F.lit(context.epoch.index)).withColumn("salt", F.lit(salt)), new

    return aggregate


def write_input(spark: Any, store: Any, size_mb: int, epochs: int, keys: int) -> Any:
    """The input partition: ``size_mb`` of rows, one Spark partition per epoch; its ref."""
    from pyspark.sql import functions as F

    from airflow_region_failover.graph.ids import PartitionId
    from airflow_region_failover.graph.model import Exchange
    from airflow_region_failover.spark.exchange import PartitionRef

    rows = size_mb * 1024 * 1024 // 60
    per_epoch = rows // epochs
    frame = spark.range(0, per_epoch * epochs, numPartitions=epochs).select(
        "id", ((((F.col("id") % (keys // SHARE)) * SHARE) + (F.col("id") / per_epoch).cast("long")) % keys)
        .alias("key"), (F.col("id") % 997).cast("double").alias("value"),
        F.sha1(F.col("id").cast("string")).substr(1, 24).alias("pad"))
    manifest, _ = store.write(frame, AttemptId(DAG, "input", PartitionId("src->agg", 0), 1))
    print(f"input: {manifest.row_count} rows, {manifest.total_bytes / 2**20:.0f} MB, {len(manifest.objects)} "
          "objects", flush=True)
    return PartitionRef("src->agg", 0, Exchange.BLOCKING, DAG, "input", 1, manifest.row_count).to_json()


def run_try(spark: Any, store: Any, ref: Any, run_id: str, try_number: int, epochs: int, keys: int,
            enabled: bool, fail_at: int = -1, sizes: bool = False) -> dict[str, Any]:
    """One try of the step in run ``run_id``; its figures (``failed``: it raised the injected failure; with
    ``sizes``, each checkpoint's full-state bytes, measured after the try)."""
    from airflow_region_failover import Checkpoint, JobGraphBuilder, SubtaskId
    from airflow_region_failover.checkpoint.declared import chain_checkpoint
    from airflow_region_failover.job import JobRuntime, JobSpec, StepImpl
    from airflow_region_failover.spark.checkpointed import run_checkpointed
    from airflow_region_failover.spark.run import start
    from airflow_region_failover.spark.store_io import StoreIO

    graph = JobGraphBuilder().step("src").step("agg").edge("src", "agg", exchange="BLOCKING").build()
    decl = Checkpoint(["key"], "key long, n long, total double", epochs=epochs, enabled=enabled)
    salt = zlib.crc32(run_id.encode())
    impls = {"src": StepImpl("src", fn=print),
             "agg": StepImpl("agg", fn=make_step(keys, fail_at, salt), checkpoint=decl)}
    runtime = JobRuntime(JobSpec(graph, {"state.checkpoints.num-retained": "2"}), impls)
    run = start(runtime, (SubtaskId("agg", 0),), {"ti": FakeTI(ref, run_id, try_number), "params": {}},
                StoreIO(store))
    chain = chain_checkpoint(graph, ["agg"], impls)
    events: list[Any] = []
    began = time.monotonic()
    try:
        run_checkpointed(spark, run, chain, events.append)  # type: ignore[arg-type]
        failed = False
    except RuntimeError as exc:
        if "injected" not in str(exc):
            raise
        failed = True
    wall = time.monotonic() - began
    started = events[0]
    checkpoints = events[1:]
    full = full_state_bytes(store, run_id, checkpoints) if sizes else [None] * len(checkpoints)
    return {"wall_s": wall, "failed": failed, "skipped": started.skipped,
            "recomputed": epochs - started.skipped if not failed else None,
            "checkpoints": [{"epoch": c.epoch, "uploaded": c.uploaded_bytes, "state": c.state_bytes,
                             "ms": c.duration_ms, "runs": [r.rows for s in c.states for r in s.runs],
                             "full": f, "kind": _kind(before, c)}
                            for before, c, f in zip([None, *checkpoints], checkpoints, full, strict=False)]}


def _kind(before: Any, manifest: Any) -> str:
    """``incremental`` (one run of the changed keys appended), ``compaction`` (runs merged) or ``full``."""
    runs = [r for s in manifest.states for r in s.runs]
    old = [] if before is None else [r for s in before.states for r in s.runs]
    if old and len(runs) == len(old) + 1 and runs[:-1] == old:
        return "incremental"
    return "full" if len(runs) == 1 and runs[0].base else "compaction"


def full_state_bytes(store: Any, run_id: str, manifests: list[Any]) -> list[int]:
    """Per checkpoint, the bytes a full, non-incremental checkpoint of its state uploads: its runs read back,
    merged (:func:`~airflow_region_failover.checkpoint.lsm.restore`) and encoded as one base run as the store
    encodes runs (:func:`~airflow_region_failover.checkpoint.storage.run_codec`); nothing uploaded."""
    from airflow_region_failover.checkpoint import lsm
    from airflow_region_failover.checkpoint.storage import CheckpointStorage, run_codec
    from airflow_region_failover.graph.ids import PartitionId
    from airflow_region_failover.store.dataplane.encoding import encode_objects

    storage = CheckpointStorage(store.objects, store.run_keys(DAG, run_id), PartitionId("agg", 0),
                                store.config.min_grace_seconds)
    loaded: dict[str, Any] = {}
    sizes = []
    for manifest in manifests:
        runs = [r for s in manifest.states for r in s.runs]
        loaded = {r.objects[0].sha256: loaded[r.objects[0].sha256] if r.objects[0].sha256 in loaded
                  else storage.load_run(r) for r in runs}
        state = lsm.base_run(lsm.restore([loaded[r.objects[0].sha256] for r in runs], ["key"]))
        sizes.append(sum(body.size for body, _ in encode_objects(iter(state.to_batches()),
                                                                 store.config.max_object_bytes, run_codec(state))))
    return sizes


def measure(spark: Any, store: Any, ref: Any, epochs: int, keys: int, repeat: int) -> dict[str, Any]:
    """The three scenarios of the module doc, checked and unchecked side by side (after one unmeasured warm-up
    run; ``repeat`` rounds alternating the sides, each figure the median of its rounds)."""
    late = epochs - 2
    run_try(spark, store, ref, "warm-up", 1, epochs, keys, False)
    rounds: dict[str, list[dict[str, Any]]] = {"unchecked": [], "checked": []}
    for n in range(repeat):
        for side, enabled in (("unchecked", False), ("checked", True)) if n % 2 == 0 else (
                ("checked", True), ("unchecked", False)):
            clean = run_try(spark, store, ref, f"{side}-clean-{n}", 1, epochs, keys, enabled, sizes=enabled and n == 0)
            first = run_try(spark, store, ref, f"{side}-fail-{n}", 1, epochs, keys, enabled, late)
            second = run_try(spark, store, ref, f"{side}-fail-{n}", 2, epochs, keys, enabled, late)
            rounds[side].append({"clean": clean, "first": first, "second": second})
            print(json.dumps({side: {k: {f: v[f] for f in ("wall_s", "skipped", "recomputed")} for k, v in
                                     rounds[side][-1].items()}}), flush=True)
    out = {side: _median(runs) for side, runs in rounds.items()}
    out["rounds"] = {side: [{k: r[k]["wall_s"] for k in ("clean", "second")} for r in runs]
                     for side, runs in rounds.items()}
    return out


def _median(runs: list[dict[str, Any]]) -> dict[str, Any]:
    """The rounds of one side as one: wall times are medians, the rest is the first round's."""
    merged = json.loads(json.dumps(runs[0]))
    for scenario in merged:
        merged[scenario]["wall_s"] = statistics.median(r[scenario]["wall_s"] for r in runs)
    return merged


def report(out: dict[str, Any], epochs: int) -> str:
    """The Markdown table of the figures."""
    u, c = out["unchecked"], out["checked"]
    cps = c["clean"]["checkpoints"]
    later = cps[1:]
    ratios = [cp["uploaded"] / cp["full"] for cp in later]
    incremental = [cp for cp in later if cp["kind"] == "incremental"]
    per_key = [cp["uploaded"] / cp["runs"][-1] for cp in incremental]
    inc = [cp["uploaded"] / cp["full"] for cp in incremental]
    first = [cp["uploaded"] / cps[0]["uploaded"] for cp in later]
    overheads = [100 * (cr["clean"] / ur["clean"] - 1) for ur, cr in zip(out["rounds"]["unchecked"],
                                                                          out["rounds"]["checked"], strict=True)]
    recoveries = [cr["second"] / ur["second"] for ur, cr in zip(out["rounds"]["unchecked"], out["rounds"]["checked"],
                                                                 strict=True)]
    rows = ["| figure | unchecked | checked | target |", "|---|---:|---:|---|",
            f"| epochs recomputed after a failure in epoch {epochs - 2} | {u['second']['recomputed']} | "
            f"{c['second']['recomputed']} | ≤ 2 |",
            f"| failure → success: the second try (s) | {u['second']['wall_s']:.1f} | {c['second']['wall_s']:.1f} "
            f"| checked ≤ 0.2× unchecked: **{c['second']['wall_s'] / u['second']['wall_s']:.2f}×** (rounds: "
            f"{', '.join(f'{r:.2f}×' for r in recoveries)}) |",
            f"| run without failure (s) | {u['clean']['wall_s']:.1f} | {c['clean']['wall_s']:.1f} | overhead ≤ 10 %: "
            f"**{100 * (c['clean']['wall_s'] / u['clean']['wall_s'] - 1):+.1f} %** (rounds: "
            f"{', '.join(f'{o:+.1f} %' for o in overheads)}) |",
            f"| state bytes uploaded per checkpoint ÷ the full state at that checkpoint ({cps[-1]['full'] / 2**20:.2f}"
            f" MB at the last), median / max: every checkpoint after the first ({len(later)}) | — | "
            f"{statistics.median(ratios):.3f} / {max(ratios):.3f} | ≤ 0.1 |",
            f"| the same, incremental checkpoints only ({len(incremental)}; changed keys per run "
            f"{statistics.median(cp['runs'][-1] for cp in incremental):,.0f}, "
            f"{statistics.median(per_key):.2f} bytes per changed key) | — | "
            f"{statistics.median(inc):.3f} / {max(inc):.3f} | ≤ 0.1 |",
            f"| the same ÷ the first checkpoint's upload ({cps[0]['uploaded'] / 2**20:.2f} MB; reported before) "
            f"| — | {statistics.median(first):.3f} / {max(first):.3f} | — |",
            f"| checkpoint duration (ms), median / max | — | {statistics.median(cp['ms'] for cp in cps):.0f} / "
            f"{max(cp['ms'] for cp in cps)} | — |"]
    return "\n".join(rows)


def main(argv: list[str] | None = None) -> int:
    """Start SeaweedFS and Spark, write the input, measure, print the table."""
    from pyspark.sql import SparkSession

    from airflow_region_failover.standalone.seaweedfs import SeaweedFS
    from airflow_region_failover.store.result_store import ResultStore

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--size-mb", type=int, default=1024)
    parser.add_argument("--epochs", type=int, default=20)
    parser.add_argument("--keys", type=int, default=1_000_000)
    parser.add_argument("--repeat", type=int, default=1, help="rounds per side (default 1)")
    args = parser.parse_args(argv)
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    os.environ["PYSPARK_PYTHON"] = sys.executable
    work = Path(tempfile.mkdtemp(prefix="bench-checkpoint-"))
    s3 = SeaweedFS(bucket="region-failover", data_dir=work / "s3")
    spark = None
    try:
        endpoint = s3.start()
        store = ResultStore.from_endpoint(endpoint.endpoint_url, endpoint.access_key, endpoint.secret_key,
                                          endpoint.bucket)
        spark = SparkSession.builder.master("local[2]").config("spark.ui.enabled", "false").config(
            "spark.sql.shuffle.partitions", "4").config("spark.driver.memory", "4g").getOrCreate()
        spark.sparkContext.setLogLevel("ERROR")
        ref = write_input(spark, store, args.size_mb, args.epochs, args.keys)
        out = measure(spark, store, ref, args.epochs, args.keys, args.repeat)
        print(json.dumps(out), flush=True)
        print(report(out, args.epochs))
        return 0
    finally:
        if spark is not None:
            spark.stop()
        s3.cleanup()
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    raise SystemExit(main())

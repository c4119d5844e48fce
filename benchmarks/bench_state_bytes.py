"""Where the bytes of a checkpoint's state runs go: per Parquet column, an incremental run of the changed keys beside
a full state, with the codec result objects use (Snappy, plain keys: what state runs were written with before) and
the state runs' own (:func:`~airflow_region_failover.checkpoint.storage.run_codec`). Pure pyarrow, no Spark or S3.

``python benchmarks/bench_state_bytes.py [--keys 1000000] [--epochs 20] [--size-mb 1024] [--scatter modulo]``

The state is bench_checkpoint.py's, computed in numpy: a running count ``n`` and sum ``total`` (starting at a salt)
per ``key`` of ``--keys`` (all of them from epoch 0 on), each row tagged with its key group as the Spark engine
tags it (``pmod(hash(key), 128)``: Spark's Murmur3 of a long, seed 42, reproduced here), sorted by (key group,
key). Epoch ``e`` reads ``--size-mb`` / ``--epochs`` of input rows (``id``, ``value = id % 997``) and touches 5 % of
the keys: ``key ≡ e (mod 20)`` (``--scatter modulo``, the bench's) or a fresh random 5 % (``--scatter random``). Per
epoch ``e ≥ 1``: the run :func:`~airflow_region_failover.checkpoint.lsm.diff` gives (the bytes an incremental
checkpoint uploads) and the whole state as a base run (the bytes a full, non-incremental checkpoint of the same
state uploads at that epoch); reported: bytes per changed key, their ratio (median / max), and the per-column
compressed bytes (Parquet metadata) of the median epoch's run and of the last full state.
"""

from __future__ import annotations

import argparse
import statistics
import zlib
from collections.abc import Callable
from typing import Any

import numpy as np

import _repo_path  # noqa: F401 - puts the repository root on sys.path
from bench_checkpoint import SHARE

MAX_PARALLELISM = 128
"""Key groups of the bench's state (its input is not keyed: the default max parallelism)."""


def spark_key_groups(keys: np.ndarray, groups: int) -> np.ndarray:
    """``pmod(hash(key), groups)`` as Spark computes it for a long column (Murmur3_x86_32.hashLong, seed 42)."""
    u32 = np.uint32

    def rotl(x: np.ndarray, r: int) -> np.ndarray:
        return (x << u32(r)) | (x >> u32(32 - r))

    def mix_k(k: np.ndarray) -> np.ndarray:
        return rotl(k * u32(0xCC9E2D51), 15) * u32(0x1B873593)

    def mix_h(h: np.ndarray, k: np.ndarray) -> np.ndarray:
        return rotl(h ^ k, 13) * u32(5) + u32(0xE6546B64)

    v = keys.astype(np.int64).view(np.uint64)
    with np.errstate(over="ignore"):
        h = mix_h(np.full(v.shape, 42, u32), mix_k((v & np.uint64(0xFFFFFFFF)).astype(u32)))
        h = mix_h(h, mix_k((v >> np.uint64(32)).astype(u32))) ^ u32(8)
        h = (h ^ (h >> u32(16))) * u32(0x85EBCA6B)
        h = (h ^ (h >> u32(13))) * u32(0xC2B2AE35)
        h = h ^ (h >> u32(16))
    return (h.view(np.int32).astype(np.int64) % groups).astype(np.int32)


def epochs_of_state(keys: int, epochs: int, size_mb: int, scatter: str) -> Any:
    """Per epoch, the normalised state table after it (module doc)."""
    import pyarrow as pa

    from airflow_region_failover.checkpoint import lsm

    per_epoch = size_mb * 1024 * 1024 // 60 // epochs
    ids = np.arange(keys, dtype=np.int64)
    groups = spark_key_groups(ids, MAX_PARALLELISM)
    n, total = np.zeros(keys, np.int64), np.full(keys, float(zlib.crc32(b"checked-clean-0")))
    rng = np.random.default_rng(24)
    for e in range(epochs):
        rows = np.arange(e * per_epoch, (e + 1) * per_epoch, dtype=np.int64)
        if scatter == "modulo":
            touched = ((rows % (keys // SHARE)) * SHARE + e % SHARE) % keys
        else:
            chosen = rng.choice(keys, keys // SHARE, replace=False)
            touched = chosen[rows % len(chosen)]
        n = n + np.bincount(touched, minlength=keys)
        total = total + np.bincount(touched, weights=(rows % 997).astype(float), minlength=keys)
        table = pa.table({"key": ids, "n": n, "total": total, lsm.KEY_GROUP: groups})
        yield lsm.normalise(table, ["key"], "bench state")


def encoded(table: Any, codec: Any) -> tuple[int, dict[str, int]]:
    """The bytes of ``table`` encoded as the store encodes a run with ``codec``, and per column (compressed)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    from airflow_region_failover.store.dataplane.encoding import encode_objects

    size, columns = 0, {}
    for body, _ in encode_objects(iter(table.to_batches()), 16 * 1024 * 1024, codec):
        size += body.size
        meta = pq.ParquetFile(pa.BufferReader(body)).metadata
        for g in range(meta.num_row_groups):
            for c in range(meta.num_columns):
                chunk = meta.row_group(g).column(c)
                columns[chunk.path_in_schema] = columns.get(chunk.path_in_schema, 0) + chunk.total_compressed_size
    columns["(footer and headers)"] = size - sum(columns.values())
    return size, columns


def measure(args: argparse.Namespace, codecs: dict[str, Callable[[Any], Any]]) -> dict[str, Any]:
    """Per codec: each epoch's (changed keys, run bytes, full bytes, run columns, full columns)."""
    from airflow_region_failover.checkpoint import lsm

    out: dict[str, list[tuple[int, int, int, dict[str, int], dict[str, int]]]] = {name: [] for name in codecs}
    previous = None
    for state in epochs_of_state(args.keys, args.epochs, args.size_mb, args.scatter):
        if previous is not None:
            run, full = lsm.diff(previous, state, ["key"]), lsm.base_run(state)
            for name, codec in codecs.items():
                run_bytes, run_columns = encoded(run, codec(run))
                full_bytes, full_columns = encoded(full, codec(full))
                out[name].append((run.num_rows, run_bytes, full_bytes, run_columns, full_columns))
        previous = state
    return out


def report(out: dict[str, Any], keys: int) -> str:
    """The Markdown tables: the summary per codec, then the per-column bytes."""
    lines = ["| codec | changed keys per run | run bytes per changed key | full state bytes per key | run ÷ full "
             "state at that epoch, median / max |", "|---|---:|---:|---:|---:|"]
    columns = ["| column | " + " | ".join(f"{name}: run (median epoch) | {name}: full state (last)" for name in out)
               + " |", "|---|" + "---:|" * (2 * len(out))]
    for name, epochs in out.items():
        ratios = [run / full for _, run, full, _, _ in epochs]
        middle = sorted(epochs, key=lambda e: e[1])[len(epochs) // 2]
        lines.append(f"| {name} | {middle[0]:,} | {middle[1] / middle[0]:.2f} | {epochs[-1][2] / 10 ** 6:.2f} MB, "
                     f"{epochs[-1][2] / keys:.2f} | {statistics.median(ratios):.4f} / "
                     f"{max(ratios):.4f} |")
    first = next(iter(out.values()))
    for column in first[0][3]:
        cells = []
        for epochs in out.values():
            middle = sorted(epochs, key=lambda e: e[1])[len(epochs) // 2]
            cells += [f"{middle[3].get(column, 0):,}", f"{epochs[-1][4].get(column, 0):,}"]
        columns.append(f"| {column} | " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n\n" + "\n".join(columns)


def main(argv: list[str] | None = None) -> int:
    """Simulate the state, encode each epoch's run and full state with both codecs, print the tables."""
    from airflow_region_failover.checkpoint.storage import run_codec
    from airflow_region_failover.store.dataplane.encoding import RESULTS

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--keys", type=int, default=1_000_000)
    parser.add_argument("--epochs", type=int, default=20)
    parser.add_argument("--size-mb", type=int, default=1024)
    parser.add_argument("--scatter", choices=("modulo", "random"), default="modulo")
    args = parser.parse_args(argv)
    out = measure(args, {"before (results' Snappy)": lambda _: RESULTS, "now (run_codec)": run_codec})
    print(f"keys {args.keys:,}, epochs {args.epochs}, input {args.size_mb} MB, scatter {args.scatter}")
    print(report(out, args.keys))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

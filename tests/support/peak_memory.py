"""The peak of Python's allocations during one read of a committed partition, measured in a child process.

Why a child that never stops ``tracemalloc``: on CPython 3.11, ``tracemalloc.stop()`` races with a thread that
enters Python's allocator without the GIL (CPython gh-128679, fixed in 3.12.9 and 3.13.2 only), and in a process
that has read Parquet through pyarrow such a native thread exists. Stopping the tracer in the test process
segfaulted CI (``test_store_memory.py``, exit 139); here a loop of start, ``pq.read_table`` of an in-memory buffer
and stop segfaults within a second, with or without ``pre_buffer``, ``use_threads`` or a thread pool of ours, and the
same loop that never stops the tracer does not. The child warms up untraced, starts the tracer, reads once, and
leaves with ``os._exit`` (no finalisation, no ``stop``).

Run as ``python -m tests.support.peak_memory`` with a :class:`PeakRead` as JSON on stdin (it holds the store's
secret key: stdin, never argv); it prints ``{"peak": <bytes>}``.
"""

from __future__ import annotations

import dataclasses
import json
import os
import subprocess
import sys
import tracemalloc
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


@dataclass(frozen=True)
class PeakRead:
    """Which partition to read (partition ``orders->join``/0 of DAG ``etl``, run ``run_id``) from which store."""

    endpoint_url: str
    access_key: str = dataclasses.field(repr=False)
    secret_key: str = dataclasses.field(repr=False)
    bucket: str
    prefix: str
    part_size: int
    threads: int
    run_id: str


def peak_in_child(read: PeakRead, timeout: float = 120.0) -> int:
    """The child's measured peak in bytes; a child that does not exit 0 fails with its output."""
    done = subprocess.run([sys.executable, "-m", "tests.support.peak_memory"], cwd=REPO,
                          input=json.dumps(dataclasses.asdict(read)), capture_output=True, text=True,
                          timeout=timeout, check=False)
    if done.returncode != 0:
        raise AssertionError(f"the measuring child exited {done.returncode}:\n{done.stdout}\n{done.stderr}")
    return int(json.loads(done.stdout.strip().splitlines()[-1])["peak"])


def _measure(read: PeakRead) -> int:
    """A warm-up read (client connections, imports), untraced, then the measured one: the peak of Python's
    allocations made from its start."""
    from airflow_region_failover.graph.ids import PartitionId
    from airflow_region_failover.store.result_store import ResultStore

    store = ResultStore.from_endpoint(read.endpoint_url, read.access_key, read.secret_key, read.bucket,
                                      prefix=read.prefix, part_size=read.part_size, upload_threads=read.threads,
                                      verify_on_read=True)
    partition = PartitionId("orders->join", 0)
    store.read_arrow(store.manifest("etl", read.run_id, partition))
    tracemalloc.start()
    table = store.read_arrow(store.manifest("etl", read.run_id, partition))
    _, peak = tracemalloc.get_traced_memory()
    assert table.num_rows > 0
    return peak


def main() -> None:
    """The child: print the measured peak, exit without stopping the tracer."""
    read = PeakRead(**json.loads(sys.stdin.read()))
    print(json.dumps({"peak": _measure(read)}), flush=True)
    sys.stderr.flush()
    os._exit(0)


if __name__ == "__main__":
    main()

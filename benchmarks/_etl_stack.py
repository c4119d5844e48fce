"""The stack the ETL benchmarks share (``bench_etl_compare.py``, ``bench_breakdown.py``, ``bench_chaos.py``): one
SeaweedFS, one Spark Connect server (``local[2]``) and one Airflow 3 (SQLite, LocalExecutor) on loopback, started
once and serving every run; and the CPU seconds its processes spend, by kind.

Rules: the DAG files are written into :attr:`EtlStack.dags` before :meth:`EtlStack.start` (a file added later may
wait for the dag-processor's next full listing); everything started is stopped by :meth:`EtlStack.stop`, also on
SIGTERM/SIGHUP (they raise ``KeyboardInterrupt`` like Ctrl-C). CPU seconds (:class:`CpuSampler`) are read from
``/proc`` through psutil every ``interval`` seconds for every process under the stack's roots (and any extra root,
e.g. (a)'s application process), each process counted once by its last reading, sorted into kinds: ``Python
workers`` (PySpark's daemon and workers) wherever they run, else the kind of the root it runs under — ``S3 server``
(weed), ``Spark JVM`` (the Connect server: its JVM and the PySpark driver that starts it), ``Airflow`` (api-server,
scheduler, dag-processor, workers, task processes) and ``app`` ((a)'s client process). A process that lives less
than one interval is missed; one that ends between readings loses at most one interval of CPU.

Every benchmark that starts a stack (this one or ``devtools``' ``ProductionStack``) runs its measurement through
:func:`run_on`: the stack is started, the measurement's exit code returned (130 when interrupted), and whatever
happens the application processes it started and then the stack are stopped.
"""

from __future__ import annotations

import argparse
import itertools
import json
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

KINDS = ("Airflow", "Spark JVM", "Python workers", "S3 server", "app")
TINY_ORDERS, TINY_CUSTOMERS = 20_000, 2_000
BYTES_PER_ORDER = 217.9  # ours' committed bytes per order at tiny (4,358,022 B / 20,000 orders)


def parse_sizes(text: str) -> list[str]:
    """``tiny,1,5`` -> ``["tiny", "1", "5"]`` (a number is a scale, :func:`size_of`)."""
    out = [s.strip() for s in text.split(",") if s.strip()]
    for s in out:
        if s != "tiny":
            float(s)
    return out


def size_of(wanted: str, bytes_per_order: float = BYTES_PER_ORDER) -> dict[str, Any]:
    """``label``, ``orders`` and ``customers`` of a size: ``tiny`` (the DAG's defaults) or a scale ``N``: ``ORDERS``
    = N GB over the bytes ours commits per order at tiny (``bytes_per_order``; ``CUSTOMERS`` = ORDERS / 10), label
    ``<N>gb``. The label names the scale, not what is committed: with millions of rows per file Parquet compresses
    far better than at tiny, so ours commits about 24 bytes per order at scale — 0.111 GB at ``1gb``, 0.563 GB at
    ``5gb`` (the records' data sizes say both)."""
    if wanted == "tiny":
        return {"label": "tiny", "orders": TINY_ORDERS, "customers": TINY_CUSTOMERS}
    orders = int(round(float(wanted) * 1e9 / bytes_per_order, -3))
    return {"label": f"{wanted.replace('.', 'p')}gb", "orders": orders, "customers": max(orders // 10, 1)}


class Salts:
    """The DAG param ``salt`` of each run (``dags/tpch_etl.py``): a new one per run, so that no run finds its outputs
    already in the content-addressed store (every run does the same work), or always the same with ``same``."""

    def __init__(self, same: bool = False) -> None:
        self._numbers = itertools.repeat(1) if same else itertools.count(int(time.time()) % 10_000_000 * 8 + 1)

    def next(self) -> int:
        """The next run's salt."""
        return next(self._numbers)


def add_stack_arguments(parser: argparse.ArgumentParser) -> None:
    """The options every ETL benchmark takes for its stack and sizes."""
    parser.add_argument("--bytes-per-order", type=float, default=BYTES_PER_ORDER,
                        help=f"bytes committed per order, to size the GB points (default {BYTES_PER_ORDER}, measured "
                             "at tiny on 2026-11-24; the measured figure is printed)")
    parser.add_argument("--driver-memory", default="4g", help="Spark Connect server (driver = executor) memory")
    parser.add_argument("--shuffle-partitions", type=int, default=8, help="spark.sql.shuffle.partitions")
    parser.add_argument("--broadcast-threshold", default="-1",
                        help="spark.sql.autoBroadcastJoinThreshold of the server (default -1: no broadcast joins; "
                             "at 1 GB Spark's own default, 10MB, broadcast the orders read back from Parquet and "
                             "ran out of heap in the join tasks of ours and plain Airflow; 'spark' keeps Spark's "
                             "default)")
    parser.add_argument("--stock-connect", action="store_true",
                        help="Spark's stock Spark Connect server class (a Python daemon per session) instead of the "
                             "provider's (connect_server.py: sessions share their Python workers)")


def stack_from(args: argparse.Namespace, airflow_env: dict[str, str] | None = None) -> EtlStack:
    """The (not yet started) stack the options of :func:`add_stack_arguments` describe."""
    spark_conf = {"spark.sql.shuffle.partitions": str(args.shuffle_partitions)}
    if args.broadcast_threshold != "spark":
        spark_conf["spark.sql.autoBroadcastJoinThreshold"] = args.broadcast_threshold
    return EtlStack(driver_memory=args.driver_memory, spark_conf=spark_conf, airflow_env=airflow_env,
                    shared_workers=not args.stock_connect)


def stop_all(procs: list[subprocess.Popen[bytes]]) -> None:
    """Terminate (then kill) every application process still running."""
    for proc in procs:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()


def run_on(stack: Any, body: Callable[[], int], procs: list[subprocess.Popen[bytes]] | None = None) -> int:
    """Start ``stack`` (anything with ``start``/``stop``), run ``body`` and return its exit code, or 130 when
    interrupted (Ctrl-C; SIGTERM and SIGHUP raise ``KeyboardInterrupt`` too); whatever happens, then stop the
    application processes ``procs`` (:func:`stop_all`) and the stack."""
    try:
        stack.start()
        return body()
    except KeyboardInterrupt:
        print("interrupted: stopping everything", file=sys.stderr)
        return 130
    finally:
        stop_all(procs or [])
        stack.stop()


def write_json(path: str | None, figures: Any) -> None:
    """Write ``figures`` as indented JSON to ``path`` (the ``--json`` option; nothing when it is not given)."""
    if path:
        Path(path).write_text(json.dumps(figures, indent=1, default=str))


def kind_of(cmdline: list[str], root_kind: str) -> str:
    """The kind of a process running ``cmdline`` under a root of ``root_kind`` (module rule)."""
    text = " ".join(cmdline)
    return "Python workers" if "pyspark.daemon" in text or "pyspark.worker" in text else root_kind


ROLES = (("LocalExecutor", "executor worker"), ("supervisor", "task supervisor"), ("airflow worker --", "task process"),
         ("dag-processor", "DAG processor"), ("dag_processor", "DAG processor"), ("api-server", "API server"),
         ("api_server", "API server"), ("triggerer", "triggerer"), ("scheduler", "scheduler"))
"""Words of an Airflow process's title -> its role, first match wins. Airflow retitles its processes: a
LocalExecutor worker (which supervises its tasks) ``airflow worker -- LocalExecutor: ...``, a Celery task's
supervisor ``airflow task supervisor: ...``, the task process it forks ``airflow worker -- <task instance id>``."""


def role_of(cmdline: list[str]) -> str:
    """The role of an Airflow process by its title (:data:`ROLES`); else its first two words."""
    text = " ".join(cmdline)
    return next((role for word, role in ROLES if word in text), " ".join(text.split()[:2])[:40] or "?")


Mark = tuple[dict[str, float], dict[str, float]]
"""CPU seconds by kind and Airflow's by role (:meth:`CpuSampler.mark`)."""


@dataclass
class CpuSampler:
    """CPU seconds by kind of the processes under ``roots`` (module rule); a context manager."""

    roots: dict[int, str] = field(default_factory=dict)  # pid -> the kind of the processes under it
    interval: float = 0.5
    _seen: dict[tuple[int, float], tuple[str, str, float]] = field(default_factory=dict)  # kind, role, CPU s
    _stop: threading.Event = field(default_factory=threading.Event)
    _thread: threading.Thread | None = None
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def __enter__(self) -> CpuSampler:
        self._thread = threading.Thread(target=self._run, name="cpu-sampler", daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=10)
        self.sample()

    def watch(self, pid: int, kind: str) -> None:
        """Count the processes under ``pid`` as ``kind`` from now on."""
        with self._lock:
            self.roots[pid] = kind

    def _run(self) -> None:
        while not self._stop.wait(self.interval):
            self.sample()

    def sample(self) -> None:
        """Read every process under the roots once."""
        import psutil

        with self._lock:
            roots = dict(self.roots)
        for root, root_kind in roots.items():
            try:
                top = psutil.Process(root)
                procs = [top, *top.children(recursive=True)]
            except psutil.Error:
                continue
            for proc in procs:
                try:
                    with proc.oneshot():
                        key = (proc.pid, proc.create_time())
                        times, cmdline = proc.cpu_times(), proc.cmdline()
                        kind = self._seen[key][0] if key in self._seen else kind_of(cmdline, root_kind)
                        role = role_of(cmdline) if kind == "Airflow" else kind  # the title now: tasks retitle
                except psutil.Error:
                    continue
                with self._lock:
                    self._seen[key] = (kind, role, times.user + times.system)

    def _summed(self, name: Callable[[str, str], str | None]) -> dict[str, float]:
        """CPU seconds so far summed by ``name(kind, role)`` of each process (``None``: not counted)."""
        with self._lock:
            seen = list(self._seen.values())
        out: dict[str, float] = {}
        for kind, role, seconds in seen:
            if (key := name(kind, role)) is not None:
                out[key] = out.get(key, 0.0) + seconds
        return out

    def roles(self) -> dict[str, float]:
        """Airflow's CPU seconds so far by the role of its processes (:func:`role_of`)."""
        return self._summed(lambda kind, role: role if kind == "Airflow" else None)

    def totals(self) -> dict[str, float]:
        """CPU seconds by kind so far (every kind of :data:`KINDS`)."""
        return {**dict.fromkeys(KINDS, 0.0), **self._summed(lambda kind, role: kind)}

    def mark(self) -> Mark:
        """CPU seconds so far by kind and Airflow's by role: what :meth:`since` subtracts."""
        return self.totals(), self.roles()

    def since(self, mark: Mark) -> Mark:
        """CPU seconds by kind (every kind of :data:`KINDS`) and Airflow's by role since ``mark``."""
        (kinds, roles), (kinds_now, roles_now) = mark, self.mark()
        return _minus(kinds_now, kinds), _minus(roles_now, roles)


def _minus(now: dict[str, float], then: dict[str, float]) -> dict[str, float]:
    return {name: round(seconds - then.get(name, 0.0), 1) for name, seconds in now.items()}


class EtlStack:
    """SeaweedFS + Spark Connect + Airflow for the ETL benchmarks (module rule)."""

    def __init__(self, *, driver_memory: str = "4g", spark_conf: dict[str, str] | None = None,
                 airflow_env: dict[str, str] | None = None, parallelism: int = 4,
                 shared_workers: bool = True) -> None:
        from airflow_region_failover.standalone.seaweedfs import SeaweedFS
        from airflow_region_failover.standalone.spark_connect import SparkConnectServer
        from airflow_region_failover.store.dataplane.s3a import with_jars

        self.work = Path(tempfile.mkdtemp(prefix="bench-etl-"))
        self.dags = self.work / "dags"
        self.dags.mkdir()
        self.spark_conf = dict(spark_conf or {})
        self.driver_memory = driver_memory
        self.airflow_env = dict(airflow_env or {})
        self.parallelism = parallelism
        self.s3 = SeaweedFS(bucket="region-failover", data_dir=self.work / "s3")
        # the s3a jars, as `region-failover standalone` gives them: the store reads with Spark's own reader
        self.spark = SparkConnectServer(self.work / "sc", cores=2, driver_memory=driver_memory,
                                        conf=with_jars(self.spark_conf), shared_workers=shared_workers)
        self.airflow: Any = None
        self.endpoint: Any = None
        self.spark_url = ""
        self.store: Any = None
        self.cpu = CpuSampler()

    @property
    def s3_env(self) -> str:
        """The store's endpoint and credentials as JSON, for (a)'s application process (never printed)."""
        e = self.endpoint
        return json.dumps({"endpoint_url": e.endpoint_url, "access_key": e.access_key, "secret_key": e.secret_key,
                           "bucket": e.bucket})

    def start(self) -> EtlStack:
        """Start the three servers and the CPU sampler; returns ``self``."""
        from airflow_region_failover.standalone.airflow_stack import AirflowStack
        from airflow_region_failover.standalone.platform import platform_env
        from airflow_region_failover.standalone.processes import stop_on_signals
        from airflow_region_failover.store.result_store import ResultStore

        stop_on_signals()
        started = time.time()
        self.endpoint, self.spark_url = self.s3.start(), self.spark.start()
        self.airflow = AirflowStack(dags_folder=self.dags, home=self.work / "airflow", parallelism=self.parallelism,
                                    extra_env={**platform_env(self.endpoint, self.spark_url), **self.airflow_env})
        self.airflow.start()
        self.store = ResultStore.from_endpoint(self.endpoint.endpoint_url, self.endpoint.access_key,
                                               self.endpoint.secret_key, self.endpoint.bucket)
        for pid, kind in ((self.s3.pid, "S3 server"), (self.spark.pid, "Spark JVM"),
                          *((p, "Airflow") for p in self.airflow_pids())):
            if pid:
                self.cpu.watch(pid, kind)
        self.cpu.__enter__()
        print(f"stack up in {time.time() - started:.0f} s (Spark Connect local[2], "
              f"{'shared' if self.spark.shared_workers else 'per-session'} Python workers, {self.spark_conf}, driver "
              f"memory {self.driver_memory})", flush=True)
        return self

    def airflow_pids(self) -> list[int]:
        """The Airflow components' process ids."""
        return [p.pid for p in getattr(self.airflow, "_procs", {}).values()]

    def __enter__(self) -> EtlStack:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def stop(self) -> None:
        """Stop everything this stack started and remove its directory."""
        from airflow_region_failover.standalone.processes import stop_guarded

        self.cpu.__exit__()
        try:
            if self.airflow is not None:
                self.airflow.stop()
        finally:
            self.spark.cleanup()
            self.s3.cleanup()
            stop_guarded()
            shutil.rmtree(self.work, ignore_errors=True)

"""Preloading what a step task imports into the process its task processes are forked from.

Rule: Airflow forks every task process from a worker process, so a module imported there before the fork is
never imported again by a task. A step task imports the Spark Connect client (pandas, pyarrow, gRPC), the
Amazon provider's S3 hook (boto3) and this provider's Spark and store modules: seconds of CPU in every task
process, paid again by each (``benchmarks/bench_worker_preload.py`` measures it).

* **CeleryExecutor**: with ``[celery] celery_config_options =
  airflow_region_failover.operators.preload.CELERY_CONFIG`` (Airflow's default Celery configuration plus a
  ``worker_init`` handler) the Celery worker's main process imports them once, when it starts and before its
  prefork pool forks the processes that run tasks.
* **LocalExecutor**: its workers are forked from the scheduler when the executor starts (start method ``fork``),
  so the plugin's listener preloads in an ``airflow scheduler`` process that runs a LocalExecutor
  (:func:`forks_local_tasks`), from ``on_starting``, which Airflow calls before it starts the executor.

Importing opens no connection and starts no thread, so forking after it is safe; and a module imported here,
before the executor forks, is not half-imported by another thread of the scheduler when a worker is forked (the
plugin's watcher starts at the same time and reads connections, which imports the task supervisor: a worker
forked in the middle of that import blocked on its import lock for good, before it ran its first task). A module
that fails to import is logged and skipped: preloading never stops a worker or a scheduler from starting.
"""

from __future__ import annotations

import importlib
import logging
import multiprocessing
import sys
import time
from typing import Any

log = logging.getLogger(__name__)

MODULES: tuple[str, ...] = (
    "pyspark.sql.connect.session",
    "pyspark.sql.connect.dataframe",
    "airflow.providers.amazon.aws.hooks.s3",
    "airflow_region_failover.spark.chain",
    "airflow_region_failover.store.result_store",
    "airflow_region_failover.store.dataplane.parquet",
    # what a LocalExecutor worker imports when it takes a workload (BaseExecutor.run_workload): the scheduler's
    # own threads import the supervisor too (BaseHook.get_connection outside a task), and a worker forked while
    # one was importing it waited for the module's import lock for good
    "setproctitle",
    "airflow.sdk.execution_time.supervisor",
    "airflow.sdk.execution_time.callback_supervisor",
    "airflow.sdk.execution_time.connection_test_supervisor",
)
"""What a step task imports besides Airflow, and what the worker that runs it imports first (a missing optional
one, such as pyspark's Connect client where only embedded Spark is installed, is skipped)."""


def preload(modules: tuple[str, ...] = MODULES) -> tuple[str, ...]:
    """Import ``modules`` into this process; returns those imported. Failures are logged, never raised."""
    started, loaded = time.monotonic(), []
    for name in modules:
        try:
            importlib.import_module(name)
        except Exception as exc:  # an ImportError, or anything a module raises while it is imported
            log.warning("region failover: not preloading %s (%s: %s)", name, type(exc).__name__, exc)
            continue
        loaded.append(name)
    log.info("region failover: preloaded %d modules in %.1f s for the step tasks this process forks",
             len(loaded), time.monotonic() - started)
    return tuple(loaded)


def forks_local_tasks(argv: list[str] | None = None) -> bool:
    """Whether this process is an ``airflow scheduler`` whose executors include LocalExecutor with the ``fork``
    start method (its workers, and so its task processes, are forked from it)."""
    argv = sys.argv if argv is None else argv
    # the method set for this process, else the platform's default (read without fixing it: Airflow may set it)
    method = multiprocessing.get_start_method(allow_none=True) or multiprocessing.get_all_start_methods()[0]
    if argv[1:2] != ["scheduler"] or method != "fork":
        return False
    from airflow.configuration import conf

    return "LocalExecutor" in (conf.get("core", "executor", fallback="") or "")


def _on_worker_init(**_: Any) -> None:
    preload()


def celery_config() -> dict[str, Any]:
    """Airflow's default Celery configuration, with :func:`preload` connected to Celery's ``worker_init``
    signal (sent in the worker's main process before its pool starts)."""
    from airflow.providers.celery.executors.default_celery import DEFAULT_CELERY_CONFIG
    from celery.signals import worker_init  # deferred: only a Celery deployment names this module

    worker_init.connect(_on_worker_init, weak=False, dispatch_uid="airflow_region_failover.preload")
    return dict(DEFAULT_CELERY_CONFIG)


def __getattr__(name: str) -> Any:
    """``CELERY_CONFIG``: built when Airflow's Celery executor first reads it, so importing this module needs no
    Celery."""
    if name == "CELERY_CONFIG":
        return celery_config()
    raise AttributeError(name)

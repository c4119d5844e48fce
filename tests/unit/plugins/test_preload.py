"""Preloading step tasks' imports where task processes are forked from
(:mod:`airflow_region_failover.plugins.preload`): the Celery configuration Airflow reads is its default one and
Celery's ``worker_init`` runs the preload; only an ``airflow scheduler`` that forks LocalExecutor workers preloads;
a module that cannot be imported is skipped, never raised."""

from __future__ import annotations

import logging

import pytest

from airflow_region_failover.plugins import preload


def test_a_module_that_fails_to_import_is_skipped_with_a_warning(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING):
        loaded = preload.preload(("json", "no_such_module_rf", "airflow_region_failover.graph"))
    assert loaded == ("json", "airflow_region_failover.graph")
    assert "not preloading no_such_module_rf (ModuleNotFoundError" in caplog.text


def test_every_listed_module_imports() -> None:
    """The list names real modules (a renamed one would silently stop being preloaded)."""
    assert preload.preload() == preload.MODULES


def test_celery_config_is_airflows_default_and_worker_init_preloads(monkeypatch: pytest.MonkeyPatch) -> None:
    from airflow.providers.celery.executors.default_celery import DEFAULT_CELERY_CONFIG
    from celery.signals import worker_init

    calls: list[tuple[str, ...]] = []
    monkeypatch.setattr(preload, "preload", lambda modules=preload.MODULES: calls.append(modules) or modules)
    assert preload.CELERY_CONFIG == DEFAULT_CELERY_CONFIG
    worker_init.send(sender=None)
    assert calls == [preload.MODULES]


def test_an_unknown_attribute_is_an_attribute_error() -> None:
    with pytest.raises(AttributeError):
        preload.NO_SUCH_THING  # noqa: B018


@pytest.mark.parametrize(("argv", "executor", "expected"), [
    (["/venv/bin/airflow", "scheduler"], "LocalExecutor", True),
    (["/venv/lib/airflow/__main__.py", "scheduler", "--skip-serve-logs"], "LocalExecutor", True),
    (["/venv/bin/airflow", "scheduler"], "CeleryExecutor", False),
    (["/venv/bin/airflow", "dag-processor"], "LocalExecutor", False),
    (["/venv/bin/airflow", "triggerer"], "LocalExecutor", False),
    (["/venv/bin/airflow", "scheduler"], "CeleryExecutor,LocalExecutor", True),
])
def test_only_a_scheduler_running_a_local_executor_forks_task_processes(
        monkeypatch: pytest.MonkeyPatch, argv: list[str], executor: str, expected: bool) -> None:
    monkeypatch.setenv("AIRFLOW__CORE__EXECUTOR", executor)
    assert preload.forks_local_tasks(argv) is expected


def test_a_scheduler_whose_workers_are_not_forked_does_not_preload(monkeypatch: pytest.MonkeyPatch) -> None:
    """``spawn``/``forkserver`` workers start a fresh interpreter: nothing they could inherit."""
    monkeypatch.setenv("AIRFLOW__CORE__EXECUTOR", "LocalExecutor")
    monkeypatch.setattr(preload.multiprocessing, "get_start_method", lambda allow_none=False: "spawn")
    assert preload.forks_local_tasks(["/venv/bin/airflow", "scheduler"]) is False


def test_the_modules_a_local_executor_worker_imports_for_a_task_are_preloaded() -> None:
    """A LocalExecutor worker, forked from the scheduler when the executor starts, imports what
    ``BaseExecutor.run_workload`` imports inside it (the task supervisor) when it takes its first task. The
    scheduler's watcher imports the supervisor too (``BaseHook.get_connection`` outside a task does), from its
    own thread, at start-up: a worker forked while that import was under way waited for the module's import lock
    for good (6 of the 8 workers of the faults stack, every task they took stuck in ``queued``/``running``).
    Preloaded before the executor starts, no thread is still importing it when the workers are forked."""
    import ast
    import inspect
    import textwrap

    from airflow.executors.base_executor import BaseExecutor

    tree = ast.parse(textwrap.dedent(inspect.getsource(BaseExecutor.run_workload)))
    imported = {node.module for node in ast.walk(tree) if isinstance(node, ast.ImportFrom) and node.module}
    assert imported and imported <= set(preload.MODULES), imported - set(preload.MODULES)

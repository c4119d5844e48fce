"""Fakes shared by unit tests: an in-memory objects layer with S3's conditional-write semantics and a REST API
that records what the failover loop asks of Airflow."""

from __future__ import annotations

import functools
from collections.abc import Iterator
from typing import Any

from airflow_region_failover.exceptions import AlreadyCommitted, ConditionFailed
from airflow_region_failover.store.keys import Layout
from airflow_region_failover.store.s3.objects import Listed


class MemoryObjects:
    """The parts of :class:`~airflow_region_failover.store.s3.objects.Objects` the decision logs use, in memory:
    keys are checked by the same :class:`Layout`, conditional writes answer as S3 does."""

    def __init__(self, layout: Layout | None = None) -> None:
        self.layout = layout or Layout("region-failover", "rf")
        self.bucket = self.layout.bucket
        self.objects: dict[str, tuple[bytes, str]] = {}
        self._n = 0

    def _etag(self) -> str:
        self._n += 1
        return f'"{self._n}"'

    def get_with_etag(self, key: str) -> tuple[bytes, str] | None:
        return self.objects.get(self.layout.check(key))

    def get(self, key: str) -> bytes | None:
        got = self.get_with_etag(key)
        return None if got is None else got[0]

    def put_if_absent(self, key: str, body: bytes, content_type: str = "application/json") -> str:
        if self.layout.check(key) in self.objects:
            raise AlreadyCommitted(f"{key} already exists")
        self.objects[key] = (body, self._etag())
        return self.objects[key][1]

    def put_if_match(self, key: str, body: bytes, etag: str, content_type: str = "application/json") -> str:
        current = self.objects.get(self.layout.check(key))
        if current is None or current[1] != etag:
            raise ConditionFailed(f"{key} changed since it was read")
        self.objects[key] = (body, self._etag())
        return self.objects[key][1]

    def put(self, key: str, body: bytes) -> None:
        self.objects[self.layout.check(key)] = (body, self._etag())

    def delete(self, keys: list[str]) -> int:
        for key in keys:
            self.objects.pop(self.layout.check(key), None)
        return len(keys)

    def listing(self, prefix: str) -> Iterator[Listed]:
        for key in sorted(k for k in self.objects if k.startswith(self.layout.check(prefix))):
            yield Listed(key, len(self.objects[key][0]), 0.0)


class FakeApi:
    """Records clears and run notes; a clear reports every task as cleared at try 1; ``instances`` are the task
    instances it lists."""

    def __init__(self, instances: list[dict[str, Any]] | None = None) -> None:
        self.cleared: list[list[str]] = []
        self.notes: list[str] = []
        self.instances = instances or []

    def task_instances(self, dag_id: str, run_id: str) -> list[dict[str, Any]]:
        return list(self.instances)

    def clear(self, dag_id: str, run_id: str, task_ids: list[str]) -> list[dict[str, Any]]:
        self.cleared.append(list(task_ids))
        return [{"task_id": t, "try_number": 1} for t in task_ids]

    def dag_run(self, dag_id: str, run_id: str) -> dict[str, Any]:
        return {"dag_id": dag_id, "dag_run_id": run_id, "note": self.notes[-1] if self.notes else None}

    def set_run_note(self, dag_id: str, run_id: str, note: str) -> None:
        self.notes.append(note)


class KnownStore:
    """A result store whose availability checker answers from a set of unavailable partitions."""

    def __init__(self, unavailable: tuple[str, ...] = ()) -> None:
        self.unavailable = unavailable

    def checker(self, dag_id: str, run_id: str, mode: Any = None, **options: Any) -> Any:
        from airflow_region_failover.failover.availability import KnownAvailability

        return KnownAvailability.except_(self.unavailable)


# -- the failover loop on fakes: the rf_e2e_budget job, its failures, and services built from fakes -------------
DAG, RUN = "rf_e2e_budget", "r1"


@functools.cache
def budget_spec() -> Any:
    """The job of ``rf_e2e_budget`` (the e2e DAG module's last DAG): fixed-delay, attempts 1, delay 0 s."""
    import runpy
    from pathlib import Path

    from airflow_region_failover.job import job_of

    dags = runpy.run_path(str(Path(__file__).parents[1] / "e2e" / "dags" / "rf_e2e.py"))
    return job_of(dags["_dag"])


def failure(task: str = "c.0", try_number: int = 1, at: float = 100.0, **extra: Any) -> Any:
    """A failure record of ``task`` as the worker's listener makes it."""
    from airflow_region_failover.failover.run_log import FailureRecord

    return FailureRecord(task, -1, try_number, "boom", "worker", at, **extra)


def services(logs: Any, api: Any = None, store: Any = None, clear_number: Any = None) -> Any:
    """:class:`~airflow_region_failover.plugins.clearing.Services` on fakes (defaults: a fresh :class:`FakeApi`
    per call, every partition available, no clear count)."""
    from airflow_region_failover.plugins.clearing import Services

    return Services(logs=lambda: logs, store=lambda: store or KnownStore(),
                    api=(lambda: api) if api is not None else FakeApi,
                    clear_number=clear_number or (lambda dag_id, run_id: None))


def edit_decision(logs: Any, number: int, **changes: Any) -> Any:
    """Change fields of decision ``number`` of the test run in its stored log (a test's shortcut to a state)."""
    from dataclasses import replace

    return logs.update(DAG, RUN, lambda d: (d.with_decision(replace(d.decision(number), **changes)), None))[0]

"""The durable per-run decision log: one JSON object per DAG run, changed only by compare-and-swap.

Rules:
- **One global change at a time.** Every change to a run's failover state is a read-modify-write of one object,
  written with ``If-Match: <etag>`` (or ``If-None-Match: *`` for the first write). A lost race (HTTP 412) re-reads
  and re-applies the change, so concurrent listeners in different workers and the scheduler serialise here.
- **Idempotent.** A failure is identified by ``task_id:map_index:try_number``; seeing it twice changes nothing.
- **Durable.** A decision waiting for its backoff delay is a ``pending`` record in S3 plus an index object
  ``_pending/<dag>/<run>``; whoever runs next (the worker that decided, or the scheduler's watcher after a crash
  or restart) applies it. ``pending -> applying`` is a CAS too, so exactly one process clears the tasks.
- Keys live under ``<store prefix>/failover/v1/`` — outside the result store's own tree, so its sweeper never
  touches them — and are built from the store's validated id encoding.
"""

from __future__ import annotations

import contextlib
import json
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any, Protocol

LOG_FORMAT = 1
CAS_ATTEMPTS = 20


class Conflict(Exception):
    """A conditional write lost the race (the object changed or already exists)."""


class LogBackend(Protocol):
    """Conditional object storage (S3 semantics)."""

    def get(self, key: str) -> tuple[bytes, str] | None:
        """Body and etag, or None if absent."""
        ...

    def put(self, key: str, body: bytes, if_match: str | None) -> str:
        """Write ``body``; ``if_match=None`` means create-only. Return the new etag; raise Conflict on 412."""
        ...

    def delete(self, key: str) -> None:
        """Delete ``key`` (absent is fine)."""
        ...

    def list(self, prefix: str) -> list[str]:
        """Every key under ``prefix``."""
        ...


class S3LogBackend:
    """:class:`LogBackend` on an S3 bucket through a (shared) boto3 client."""

    def __init__(self, client: Any, bucket: str) -> None:
        self._s3 = client
        self._bucket = bucket

    def get(self, key: str) -> tuple[bytes, str] | None:
        """GET the object; None on 404."""
        try:
            resp = self._s3.get_object(Bucket=self._bucket, Key=key)
        except self._s3.exceptions.NoSuchKey:
            return None
        except Exception as exc:
            if _status(exc) == 404:
                return None
            raise
        return resp["Body"].read(), str(resp["ETag"])

    def put(self, key: str, body: bytes, if_match: str | None) -> str:
        """PUT with ``If-Match`` / ``If-None-Match: *``."""
        cond = {"IfMatch": if_match} if if_match else {"IfNoneMatch": "*"}
        try:
            resp = self._s3.put_object(Bucket=self._bucket, Key=key, Body=body,
                                       ContentType="application/json", **cond)
        except Exception as exc:
            if _status(exc) in (409, 412):
                raise Conflict(key) from exc
            raise
        return str(resp["ETag"])

    def delete(self, key: str) -> None:
        """DELETE (idempotent)."""
        self._s3.delete_object(Bucket=self._bucket, Key=key)

    def list(self, prefix: str) -> list[str]:
        """LIST v2, all pages."""
        keys: list[str] = []
        for page in self._s3.get_paginator("list_objects_v2").paginate(Bucket=self._bucket, Prefix=prefix):
            keys.extend(item["Key"] for item in page.get("Contents", []))
        return keys


def _status(exc: Exception) -> int | None:
    resp = getattr(exc, "response", None) or {}
    code = resp.get("ResponseMetadata", {}).get("HTTPStatusCode")
    return int(code) if code else None


class MemoryLogBackend:
    """In-process :class:`LogBackend` with the same conditional semantics (unit tests, previews)."""

    def __init__(self) -> None:
        self.objects: dict[str, tuple[bytes, str]] = {}
        self._n = 0

    def get(self, key: str) -> tuple[bytes, str] | None:
        """The stored body and etag."""
        return self.objects.get(key)

    def put(self, key: str, body: bytes, if_match: str | None) -> str:
        """Conditional write."""
        current = self.objects.get(key)
        if (if_match is None and current is not None) or (if_match is not None and
                                                          (current is None or current[1] != if_match)):
            raise Conflict(key)
        self._n += 1
        etag = f'"{self._n}"'
        self.objects[key] = (body, etag)
        return etag

    def delete(self, key: str) -> None:
        """Remove."""
        self.objects.pop(key, None)

    def list(self, prefix: str) -> list[str]:
        """Keys under prefix."""
        return sorted(k for k in self.objects if k.startswith(prefix))


def new_log(dag_id: str, run_id: str) -> dict[str, Any]:
    """An empty run log: no failures seen, strategy and budget in their initial state."""
    return {"format": LOG_FORMAT, "dag_id": dag_id, "run_id": run_id, "events": {}, "decisions": [],
            "strategy_state": None, "budget_state": None, "cleared_tries": {}}


@dataclass(frozen=True)
class LogKeys:
    """Where one run's log and its pending marker live."""

    root: str

    @staticmethod
    def encode(value: str, what: str) -> str:
        """The store's injective, validated encoding of a dag/run id as one key part."""
        from airflow_region_failover.store.keys import encode_airflow_id

        return encode_airflow_id(value, what=what)

    def log(self, dag_id: str, run_id: str) -> str:
        """Key of the run's decision log."""
        return f"{self.root}/runs/{self.encode(dag_id, 'dag id')}/{self.encode(run_id, 'run id')}/log.json"

    def pending(self, dag_id: str, run_id: str) -> str:
        """Key of the marker saying the run has a decision not applied yet."""
        return f"{self.root}/_pending/{self.encode(dag_id, 'dag id')}/{self.encode(run_id, 'run id')}"

    def pending_prefix(self) -> str:
        """Prefix of every pending marker."""
        return f"{self.root}/_pending/"


class DecisionLogs:
    """Read and change run logs with compare-and-swap; keep the pending index in step."""

    def __init__(self, backend: LogBackend, root: str) -> None:
        self.backend = backend
        self.keys = LogKeys(root.rstrip("/"))

    def read(self, dag_id: str, run_id: str) -> dict[str, Any]:
        """The run's log (an empty one if nothing was recorded)."""
        got = self.backend.get(self.keys.log(dag_id, run_id))
        return json.loads(got[0]) if got else new_log(dag_id, run_id)

    def update(self, dag_id: str, run_id: str,
               change: Callable[[dict[str, Any]], Any]) -> tuple[dict[str, Any], Any]:
        """Apply ``change`` (mutates the log in place, returns a result) atomically; retry on conflicts.

        ``change`` may run several times (after lost races): it must be a pure function of the log it gets.
        Returns the log as written and ``change``'s result. A change that leaves the log equal writes nothing.
        """
        key = self.keys.log(dag_id, run_id)
        for attempt in range(CAS_ATTEMPTS):
            got = self.backend.get(key)
            before = json.loads(got[0]) if got else new_log(dag_id, run_id)
            doc = json.loads(json.dumps(before))
            result = change(doc)
            if doc == before:
                return doc, result
            try:
                self.backend.put(key, json.dumps(doc, sort_keys=True).encode(), got[1] if got else None)
            except Conflict:
                time.sleep(0.02 * (attempt + 1))
                continue
            self._sync_pending(dag_id, run_id, doc)
            return doc, result
        raise Conflict(f"{key}: gave up after {CAS_ATTEMPTS} lost races")

    def _sync_pending(self, dag_id: str, run_id: str, doc: dict[str, Any]) -> None:
        key = self.keys.pending(dag_id, run_id)
        if open_decision(doc) is not None:
            with contextlib.suppress(Conflict):
                self.backend.put(key, json.dumps({"dag_id": dag_id, "run_id": run_id}).encode(), None)
        else:
            self.backend.delete(key)

    def pending_runs(self) -> Iterator[tuple[str, str]]:
        """``(dag_id, run_id)`` of every run with a decision not applied yet."""
        for key in self.backend.list(self.keys.pending_prefix()):
            got = self.backend.get(key)
            if got:
                marker = json.loads(got[0])
                yield str(marker["dag_id"]), str(marker["run_id"])


OPEN_STATUSES = ("pending", "applying")


def open_decision(doc: dict[str, Any]) -> dict[str, Any] | None:
    """The run's decision that is decided but not applied yet (at most one), or None."""
    return next((d for d in doc["decisions"] if d["status"] in OPEN_STATUSES), None)


def decisions_from(backend_factory: Callable[[], tuple[LogBackend, str]]) -> DecisionLogs:
    """Build :class:`DecisionLogs` from a factory returning ``(backend, root)``."""
    backend, root = backend_factory()
    return DecisionLogs(backend, root)


def s3_decision_logs() -> DecisionLogs:
    """The decision logs next to the result store configured in ``[region_failover]`` (same bucket/connection)."""
    from airflow_region_failover.store.config import client_for, config_from_airflow

    config = config_from_airflow()
    root = f"{config.prefix.strip('/')}/failover/v1" if config.prefix.strip("/") else "failover/v1"
    return DecisionLogs(S3LogBackend(client_for(config.access), config.bucket), root)

"""Where the failover decision logs live: one JSON object per DAG run, changed only by compare-and-swap.

Rules:
- **One global change at a time.** Every change to a run's failover state is a read-modify-write of one object,
  written with ``If-Match: <etag>`` (or ``If-None-Match: *`` for the first write). A lost race re-reads and
  re-applies the change, so concurrent listeners in different workers and the scheduler serialise here. The
  change is a pure function of the log (:mod:`~airflow_region_failover.failover.handler`).
- **Durable.** A run with a decision not applied yet also has a marker ``_pending/<dag>/<run>``, so whoever runs
  next (the scheduler's watcher, also after a crash or restart) finds it without listing every log.
- Keys live under ``<store prefix>/failover/v1/`` (:meth:`~.keys.Layout.run_log`), outside the results' tree,
  so the sweeper never touches them; requests go through the store's guarded objects layer (:mod:`.objects`).
"""

from __future__ import annotations

import contextlib
import functools
import json
import time
from collections.abc import Callable, Iterator
from typing import Any, TypeVar

from airflow_region_failover.exceptions import ConditionFailed
from airflow_region_failover.failover.handler import RunLog, new_log, open_decision
from airflow_region_failover.store.facade import default_store
from airflow_region_failover.store.keys import Layout
from airflow_region_failover.store.objects import Objects

CAS_ATTEMPTS = 20
_R = TypeVar("_R")


class RunLogs:
    """Read and change run logs with compare-and-swap; keep the pending markers in step."""

    def __init__(self, objects: Objects) -> None:
        self.objects = objects
        self.layout: Layout = objects.layout

    def read(self, dag_id: str, run_id: str) -> RunLog:
        """The run's log (an empty one if nothing was recorded)."""
        got = self.objects.get_with_etag(self.layout.run_log(dag_id, run_id))
        return json.loads(got[0]) if got else new_log(dag_id, run_id)

    def update(self, dag_id: str, run_id: str, change: Callable[[RunLog], _R]) -> tuple[RunLog, _R]:
        """Apply ``change`` (mutates the log in place, returns a result) atomically; retry on conflicts.

        ``change`` may run several times (after lost races): it must be a pure function of the log it gets.
        Returns the log as written and ``change``'s result. A change that leaves the log equal writes nothing.
        """
        key = self.layout.run_log(dag_id, run_id)
        for attempt in range(CAS_ATTEMPTS):
            got = self.objects.get_with_etag(key)
            before = json.loads(got[0]) if got else new_log(dag_id, run_id)
            doc = json.loads(json.dumps(before))
            result = change(doc)
            if doc == before:
                return doc, result
            body = json.dumps(doc, sort_keys=True).encode()
            try:
                if got is None:
                    self.objects.put_if_absent(key, body)
                else:
                    self.objects.put_if_match(key, body, got[1])
            except ConditionFailed:
                time.sleep(0.02 * (attempt + 1))
                continue
            self._sync_pending(dag_id, run_id, doc)
            return doc, result
        raise ConditionFailed(f"{key}: gave up after {CAS_ATTEMPTS} lost races")

    def _sync_pending(self, dag_id: str, run_id: str, doc: RunLog) -> None:
        key = self.layout.pending_marker(dag_id, run_id)
        if open_decision(doc) is not None:
            with contextlib.suppress(ConditionFailed):
                self.objects.put_if_absent(key, json.dumps({"dag_id": dag_id, "run_id": run_id}).encode())
        else:
            self.objects.delete([key])

    def pending_runs(self) -> Iterator[tuple[str, str]]:
        """``(dag_id, run_id)`` of every run with a decision not applied yet."""
        for item in self.objects.listing(self.layout.pending_prefix()):
            body = self.objects.get(item.key)
            if body:
                marker: dict[str, Any] = json.loads(body)
                yield str(marker["dag_id"]), str(marker["run_id"])


@functools.cache
def default_run_logs() -> RunLogs:
    """The decision logs of this deployment (the store's bucket, prefix and connection), built once per process."""
    return RunLogs(default_store().objects)

"""Where the failover decision logs live: one JSON object per DAG run, changed only by compare-and-swap.

Rules:
- **One global change at a time.** Every change to a run's failover state is a read-modify-write of one object,
  written with ``If-Match: <etag>`` (or ``If-None-Match: *`` for the first write). A lost race re-reads and
  re-applies the change, so concurrent listeners in different workers and the schedulers serialise here. The
  change is a pure function of the log (:mod:`~airflow_region_failover.failover.handler`).
- **Open decisions are findable and protected.** Each open decision has a marker ``_pending/<dag>/<run>/<id>``
  (what the watcher lists) and holds its run's results against release (``R/_holds/failover-decision-<id>``).
  Both are derived from the log after every change, per decision id: closing decision 1 removes only decision
  1's marker and hold, so a decision 2 recorded meanwhile keeps its own. Every update (even one that changes
  nothing) re-creates the open decision's marker and hold, so a crash between the log write and the marker
  write heals on the next touch; :meth:`RunLogs.tidy` removes what a crash left of closed decisions.
- Keys live under ``<store prefix>/failover/v1/`` (:meth:`~.keys.Layout.run_log`), outside the results' tree,
  so the sweeper never touches them; requests go through the store's guarded objects layer (:mod:`.objects`).
"""

from __future__ import annotations

import contextlib
import json
import time
from collections.abc import Callable, Iterator
from typing import TypeVar

from airflow_region_failover.exceptions import ConditionFailed
from airflow_region_failover.failover.run_log import RunLog
from airflow_region_failover.process_cache import per_process
from airflow_region_failover.store.gc import lifecycle
from airflow_region_failover.store.key_checks import decode_airflow_id
from airflow_region_failover.store.keys import Layout
from airflow_region_failover.store.result_store import default_store
from airflow_region_failover.store.s3.objects import Objects

CAS_ATTEMPTS = 20
_R = TypeVar("_R")


def hold_name(decision_id: int) -> str:
    """The name of the hold an open decision keeps on its run's results."""
    return f"failover-decision-{decision_id}"


class RunLogs:
    """Read and change run logs with compare-and-swap; keep markers and holds in step (see the module rule)."""

    def __init__(self, objects: Objects) -> None:
        self.objects = objects
        self.layout: Layout = objects.layout

    def read(self, dag_id: str, run_id: str) -> RunLog:
        """The run's log (an empty one if nothing was recorded)."""
        got = self.objects.get_with_etag(self.layout.run_log(dag_id, run_id))
        return RunLog.from_json(json.loads(got[0])) if got else RunLog(dag_id, run_id)

    def update(self, dag_id: str, run_id: str, change: Callable[[RunLog], tuple[RunLog, _R]]) -> tuple[RunLog, _R]:
        """Apply ``change`` (a pure function: log -> (new log, result)) atomically; retry on conflicts.

        Returns the log as stored and ``change``'s result. A change that returns an equal log writes nothing.
        """
        key = self.layout.run_log(dag_id, run_id)
        for attempt in range(CAS_ATTEMPTS):
            got = self.objects.get_with_etag(key)
            before = RunLog.from_json(json.loads(got[0])) if got else RunLog(dag_id, run_id)
            after, result = change(before)
            if after == before:
                self._sync(before, after)
                return after, result
            body = json.dumps(after.to_json(), sort_keys=True).encode()
            try:
                if got is None:
                    self.objects.put_if_absent(key, body)
                else:
                    self.objects.put_if_match(key, body, got[1])
            except ConditionFailed:
                time.sleep(0.02 * (attempt + 1))
                continue
            self._sync(before, after)
            return after, result
        raise ConditionFailed(f"{key}: gave up after {CAS_ATTEMPTS} lost races; too many writers at once")

    def _sync(self, before: RunLog, after: RunLog) -> None:
        """Markers and holds of exactly the decisions that opened or closed (and the open one, re-created)."""
        keys = self.layout.run(after.dag_id, after.run_id)
        closed = [d.id for d in before.decisions if d.status.open and not after.decision(d.id).status.open]
        for decision_id in closed:
            self.objects.delete([self.layout.pending_marker(after.dag_id, after.run_id, decision_id)])
            lifecycle.unhold(self.objects, keys, hold_name(decision_id))
        current = after.open_decision
        if current is not None:
            reason = json.dumps({"dag_id": after.dag_id, "run_id": after.run_id, "decision": current.id})
            with contextlib.suppress(ConditionFailed):
                self.objects.put_if_absent(self.layout.pending_marker(after.dag_id, after.run_id, current.id),
                                           reason.encode())
            lifecycle.hold(self.objects, keys, hold_name(current.id), reason)

    def pending_runs(self) -> Iterator[tuple[str, str]]:
        """``(dag_id, run_id)`` of every run with a marker of an open decision (one LIST, no GETs)."""
        prefix = self.layout.pending_prefix()
        seen: set[tuple[str, str]] = set()
        for item in self.objects.listing(prefix):
            parts = item.key[len(prefix):].split("/")
            if len(parts) == 3:
                run = decode_airflow_id(parts[0]), decode_airflow_id(parts[1])
                if run not in seen:
                    seen.add(run)
                    yield run

    def tidy(self, dag_id: str, run_id: str) -> RunLog:
        """Remove the markers and holds of decisions that are closed (what a crash may have left); returns the
        log. Markers are listed *before* the log is read: a marker is written after its decision, so every
        listed marker's decision is in the log read."""
        prefix = self.layout.pending_marker(dag_id, run_id, 0).rsplit("/", 1)[0] + "/"
        markers = [item.key for item in self.objects.listing(prefix)]
        log = self.read(dag_id, run_id)
        keys = self.layout.run(dag_id, run_id)
        for key in markers:
            decision_id = int(key.rsplit("/", 1)[1])
            if decision_id > len(log.decisions) or not log.decision(decision_id).status.open:
                self.objects.delete([key])
                lifecycle.unhold(self.objects, keys, hold_name(decision_id))
        return log


@per_process()
def default_run_logs() -> RunLogs:
    """The decision logs of this deployment (the store's bucket, prefix and connection), built once per process."""
    return RunLogs(default_store().objects)

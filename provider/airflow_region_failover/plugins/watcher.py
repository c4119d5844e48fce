"""The scheduler-side watcher: a daemon thread that applies due decisions and catches failures no hook reported.

Rules (each tick, every ``[region_failover] watch_interval`` s):
- **Failures**: events queued by the scheduler's hook, plus failed step tasks found in the metadata DB
  (:func:`.probes.failed_step_tasks`) — measured on 3.3.2, a SIGKILLed *task process* fires no hook anywhere (its
  supervisor reports FAILED), and a killed supervisor fires the hook in the scheduler only after
  ``task_instance_heartbeat_timeout``. Each is recorded once (:func:`.restarts.handle_failure`).
- **Apply**: every run with a pending decision (the markers of :mod:`~airflow_region_failover.store.runlog`) is
  applied once due and once Airflow has settled (:func:`.probes.settled`, at most ``SETTLE_TIMEOUT_S`` after
  the decision was due). Pending decisions live in S3, so a restarted scheduler finds them, and on start the
  watcher looks back ``watch_lookback`` s for failures it missed while down.
- **Re-clear**: tasks one of our clears did not restart (still at the try it cleared) are cleared again
  (:meth:`Watcher._kick`).
"""

from __future__ import annotations

import logging
import queue
import threading
import time
from dataclasses import dataclass, field

from airflow_region_failover import conf
from airflow_region_failover.failover.handler import FailureEvent, clear_at, open_decision
from airflow_region_failover.plugins import probes
from airflow_region_failover.plugins.restarts import SERVICES, Services, apply_due, handle_failure

log = logging.getLogger(__name__)
SETTLE_TIMEOUT_S = 60.0
MIN_LOOKBACK_S = 60.0


@dataclass
class Watcher:
    """Scheduler-side daemon thread: catches failures no hook reported and applies due pending decisions."""

    interval: float = field(default_factory=lambda: conf.float_value("watch_interval", 1.0))
    lookback: float = field(default_factory=lambda: conf.float_value("watch_lookback", 600.0))
    services: Services = field(default_factory=lambda: SERVICES)
    _queue: queue.Queue[FailureEvent] = field(default_factory=queue.Queue)
    _stop: threading.Event = field(default_factory=threading.Event)
    _seen: dict[str, float] = field(default_factory=dict)
    _thread: threading.Thread | None = None

    def start(self) -> None:
        """Start the daemon thread."""
        self._since = time.time() - self.lookback
        self._thread = threading.Thread(target=self._run, name="region-failover-watcher", daemon=True)
        self._thread.start()
        log.info("region failover: watcher started (every %.1f s, looking back %.0f s)", self.interval,
                 self.lookback)

    def stop(self) -> None:
        """Ask the thread to finish and wait briefly."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5)

    def submit(self, event: FailureEvent) -> None:
        """Queue a failure reported by the scheduler's hook."""
        self._queue.put(event)

    def _run(self) -> None:
        while not self._stop.wait(self.interval):
            try:
                self.tick()
            except Exception:
                log.exception("region failover: watcher tick failed (will retry)")

    @property
    def _floor(self) -> float:
        """How far back the DB probes look: ``watch_lookback``, at least :data:`MIN_LOOKBACK_S`."""
        return time.time() - max(self.lookback, MIN_LOOKBACK_S)

    def tick(self) -> None:
        """One round: queued events, newly failed step tasks in the DB, due pending decisions, re-clears."""
        events = []
        while not self._queue.empty():
            events.append(self._queue.get_nowait())
        events.extend(self._failed_in_db())
        for event in events:
            self._handle(event)
        for dag_id, run_id in list(self.services.logs().pending_runs()):
            try:
                self._apply(dag_id, run_id)
            except Exception:
                log.exception("region failover: could not apply the pending decision of %s/%s", dag_id, run_id)
        try:
            self._kick()
        except Exception:
            log.exception("region failover: could not requeue cleared tasks (will retry)")

    def _apply(self, dag_id: str, run_id: str) -> None:
        """Apply the run's due decision once its failed tasks have left the running states (see module doc)."""
        current = open_decision(self.services.logs().read(dag_id, run_id))
        if current is None or (current["status"] == "pending" and clear_at(current) > time.time()):
            return
        late = time.time() - clear_at(current) > SETTLE_TIMEOUT_S
        if not late and not self._settled(dag_id, run_id, [f["task_id"] for f in current["failures"]]):
            return
        apply_due(self.services.logs(), self.services.api(), dag_id, run_id, who="scheduler")

    def _settled(self, dag_id: str, run_id: str, failed: list[str]) -> bool:
        return probes.settled(dag_id, run_id, failed)

    def _kick(self) -> None:
        """Clear again the tasks one of our clears did not restart (still at the try it cleared):

        - ``up_for_retry``: the clear stopped them while running, and Airflow parks them for ``retry_delay``;
        - ``none`` in a run that has ended: the scheduler decided the run's end from states it read before our
          clear committed, and its write won (a lost update; measured on 3.3.2 + SQLite in CI: run ``failed``,
          the cleared tasks ``none`` for good). A second clear of an ended run queues it again.
        A task the user marked since (skipped/failed/success) or that started a new try is never touched.
        """
        for (dag_id, run_id), tasks in probes.not_restarted(probes.utc(self._floor)).items():
            doc = self.services.logs().read(dag_id, run_id)
            stopped = [t for t, n in tasks if doc["cleared_tries"].get(t) == n]
            if stopped:
                log.warning("region failover: clear %s of %s/%s again (not restarted by our clear)", stopped,
                            dag_id, run_id)
                self.services.api().clear(dag_id, run_id, stopped)

    def _handle(self, event: FailureEvent) -> None:
        key = f"{event.dag_id}/{event.run_id}/{event.key}"
        if key in self._seen:
            return
        self._seen[key] = time.time()
        spec = probes.serialized_job(event.dag_id)
        if spec is not None:
            handle_failure(event, spec, self.services)

    def _failed_in_db(self) -> list[FailureEvent]:
        events = [e for e in probes.failed_step_tasks(self._since)
                  if f"{e.dag_id}/{e.run_id}/{e.key}" not in self._seen]
        self._since = max(self._since, self._floor)
        return events

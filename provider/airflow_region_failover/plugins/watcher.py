"""The scheduler-side watcher: a daemon thread that applies due decisions and catches failures no hook reported.

Rules (each pass, every ``[region_failover] watch_interval`` s; every scheduler runs one, and they agree through
the decision logs' compare-and-swap):
- **Runs that matter**: those at work now and those seen at work within ``watch_lookback`` s (at start: the runs
  that ended within it). Every probe looks only there, so a pass costs the same whatever the history.
- **Failures**: events queued by the scheduler's hook, plus failed step tasks of those runs in the metadata DB —
  measured on 3.3.2, a SIGKILLed task process fires no hook anywhere, and a killed supervisor fires the hook in
  the scheduler only after ``task_instance_heartbeat_timeout``. A failure is done only once it is recorded: one
  that could not be (S3 throttled or away) is kept and tried again until it is — also once the look-back window
  has moved past it (an outage longer than ``watch_lookback``) — after 1, 2, 4, 8 s, then every ``RETRY_MAX_S``
  s (a storm of failures must not become a storm of REST and S3 calls). A failure a person caused (they set the
  run or the task to ``failed``: Airflow's audit log says so) is not a failover failure.
- **Apply**: every run with an open decision (:meth:`~airflow_region_failover.decisions.storage.RunLogs.pending_runs`)
  is applied once due and once Airflow has settled (:func:`.probes.settled`; past ``SETTLE_TIMEOUT_S`` the
  failed tasks must still have left the running states). A decision whose run a person has set to ``failed``
  since is cancelled, never cleared.
- **Re-clear**: tasks one of our clears did not restart (still at the try it cleared) are cleared again, each
  claimed through the log first so that only one watcher clears it (:func:`.handler.claim_reclear`).
"""

from __future__ import annotations

import logging
import queue
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from airflow_region_failover import conf
from airflow_region_failover.failover.handler import claim_reclear, close, mark_recleared
from airflow_region_failover.failover.run_log import DecisionStatus, FailureRecord
from airflow_region_failover.plugins import history
from airflow_region_failover.plugins import metadata_db as probes
from airflow_region_failover.plugins.recovery import WHO, Services, apply_due, handle_failure

log = logging.getLogger(__name__)
SETTLE_TIMEOUT_S = 60.0
MIN_LOOKBACK_S = 60.0
USER_ACTION_SLACK_S = 60.0
"""How long before a failure a person's ``failed`` may have been set and still be its cause."""
RETRY_MAX_S = 10.0
"""The longest wait before a failure that could not be recorded is tried again."""

SCHEDULER_SERVICES = Services(clear_number=probes.clear_number)


@dataclass(frozen=True)
class _Unrecorded:
    """A failure the watcher could not record yet: how many tries failed, and when to try again."""

    found: tuple[str, str, FailureRecord]
    tries: int
    retry_at: float


@dataclass
class Watcher:
    """Scheduler-side daemon thread: catches failures no hook reported and applies due pending decisions."""

    interval: float = field(default_factory=conf.watch_interval)
    lookback: float = field(default_factory=conf.watch_lookback)
    services: Services = field(default_factory=lambda: SCHEDULER_SERVICES)
    who: str = WHO
    clock: Callable[[], float] = time.time
    """When a kept failure is due again (tests pass their own)."""
    _queue: queue.Queue[tuple[str, str, FailureRecord]] = field(default_factory=queue.Queue)
    _stop: threading.Event = field(default_factory=threading.Event)
    _done: dict[str, float] = field(default_factory=dict)
    _unrecorded: dict[str, _Unrecorded] = field(default_factory=dict)
    _runs: dict[probes.Run, float] = field(default_factory=dict)
    _since: float = 0.0
    _thread: threading.Thread | None = None

    def start(self) -> None:
        """Start the daemon thread (looking back ``lookback`` seconds for what happened while none ran)."""
        now = time.time()
        self._since = now - self.lookback
        self._runs.update(dict.fromkeys(probes.runs_ended_since(self._since) | probes.active_runs(), now))
        self._thread = threading.Thread(target=self._run, name="region-failover-watcher", daemon=True)
        self._thread.start()
        log.info("region failover: watcher %s started (every %.1f s, looking back %.0f s)", self.who, self.interval,
                 self.lookback)

    def stop(self) -> None:
        """Ask the thread to finish and wait briefly."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5)

    def submit(self, dag_id: str, run_id: str, failure: FailureRecord) -> None:
        """Queue a failure reported by the scheduler's hook."""
        self._queue.put((dag_id, run_id, failure))

    def _run(self) -> None:
        while not self._stop.wait(self.interval):
            try:
                self.tick()
            except Exception:
                log.exception("region failover: watcher pass failed (will retry)")

    @property
    def _floor(self) -> float:
        """How far back the watcher looks: ``watch_lookback``, at least :data:`MIN_LOOKBACK_S`."""
        return time.time() - max(self.lookback, MIN_LOOKBACK_S)

    def tick(self) -> None:
        """One pass: runs at work, failures (queued, in the DB, not yet recorded), due decisions, re-clears."""
        self._see_runs()
        self._record_failures()
        for dag_id, run_id in list(self.services.logs().pending_runs()):
            try:
                self._apply(dag_id, run_id)
            except Exception:
                log.exception("region failover: could not apply the pending decision of %s/%s", dag_id, run_id)
        try:
            self._kick()
        except Exception:
            log.exception("region failover: could not requeue cleared tasks (will retry)")

    def _record_failures(self) -> None:
        """Record each failure found once (the first report wins: a hook's carries the task's own error); keep
        those that could not be recorded, to try again when due (module rule)."""
        events = []
        while not self._queue.empty():
            events.append(self._queue.get_nowait())
        events.extend(self._failed_in_db())
        events.extend(u.found for u in self._unrecorded.values())
        unique: dict[str, tuple[str, str, FailureRecord]] = {}
        for found in events:
            unique.setdefault(f"{found[0]}/{found[1]}/{found[2].key}", found)
        now = self.clock()
        for key, (dag_id, run_id, failure) in unique.items():
            kept = self._unrecorded.get(key)
            if kept is not None and kept.retry_at > now:
                continue
            try:
                self._handle(dag_id, run_id, failure)
                self._unrecorded.pop(key, None)
            except Exception as exc:
                tries = kept.tries + 1 if kept is not None else 1
                wait = min(RETRY_MAX_S, 2.0 ** (tries - 1))
                self._unrecorded[key] = _Unrecorded((dag_id, run_id, failure), tries, now + wait)
                log.warning("region failover: could not record %s of %s/%s (%s; trying again in %.0f s)",
                            failure.task_id, dag_id, run_id, type(exc).__name__, wait, exc_info=tries == 1)

    def _see_runs(self) -> None:
        """Remember the runs at work now; forget those last seen before the look-back window (bounded memory)."""
        now, floor = time.time(), self._floor
        self._runs.update(dict.fromkeys(probes.active_runs(), now))
        for run in [r for r, seen in self._runs.items() if seen < floor]:
            del self._runs[run]
        for key in [k for k, done in self._done.items() if done < floor]:
            del self._done[key]

    def _failed_in_db(self) -> list[tuple[str, str, FailureRecord]]:
        found = [e for e in probes.failed_step_tasks(self._runs, self._since)
                 if f"{e[0]}/{e[1]}/{e[2].key}" not in self._done]
        self._since = max(self._since, self._floor)
        return found

    def _handle(self, dag_id: str, run_id: str, failure: FailureRecord) -> None:
        """Record one failure once (it is done only when recorded, or when it is not ours to restart)."""
        key = f"{dag_id}/{run_id}/{failure.key}"
        if key in self._done:
            return
        who = probes.user_stopped(dag_id, run_id, [failure.task_id], failure.at - USER_ACTION_SLACK_S)
        spec = None if who else probes.serialized_job(dag_id)
        if who:
            log.info("region failover: %s of %s/%s was set to failed by %s: not restarted", failure.task_id, dag_id,
                     run_id, who)
        elif spec is not None:
            handle_failure(dag_id, run_id, failure, spec, self.services)
        self._done[key] = time.time()

    def _apply(self, dag_id: str, run_id: str) -> None:
        """Apply the run's due decision once Airflow has settled; cancel it if a person stopped the run."""
        logs = self.services.logs()
        current = logs.read(dag_id, run_id).open_decision
        if current is None:
            logs.tidy(dag_id, run_id)
            return
        now = time.time()
        if current.status is DecisionStatus.PENDING and current.clear_at > now:
            return
        failed = [f.task_id for f in current.failures]
        who = probes.user_stopped(dag_id, run_id, [*failed, *current.restart],
                                  min(f.at for f in current.failures) - USER_ACTION_SLACK_S)
        if who:
            reason = f"cancelled: the run or its task was set to failed by {who}"
            doc, _ = logs.update(dag_id, run_id, lambda d: (close(d, current.id, DecisionStatus.CANCELLED, reason),
                                                            None))
            history.publish_note(self.services.api(), doc)
            return
        late = now - current.clear_at > SETTLE_TIMEOUT_S
        if not self._settled(dag_id, run_id, failed, not late):
            return
        apply_due(self.services, dag_id, run_id, self.who)

    def _settled(self, dag_id: str, run_id: str, failed: list[str], downstream_too: bool = True) -> bool:
        return probes.settled(dag_id, run_id, failed, downstream_too)

    def _kick(self) -> None:
        """Clear again the tasks one of our clears did not restart (still at the try it cleared):

        - ``up_for_retry``: the clear stopped them while running, and Airflow parks them for ``retry_delay``;
        - ``none`` in a run that has ended: the scheduler decided the run's end from states it read before our
          clear committed, and its write won (a lost update; measured on 3.3.2 + SQLite in CI: run ``failed``,
          the cleared tasks ``none`` for good). A second clear of an ended run queues it again.
        A task the user marked since (skipped/failed/success) or that started a new try is never touched; each
        re-clear is claimed in the log first, so two watchers clear a task once; Airflow must have settled.
        """
        logs = self.services.logs()
        for (dag_id, run_id), tasks in probes.not_restarted(self._runs).items():
            doc = logs.read(dag_id, run_id)
            stopped = [(t, n) for t, n in tasks if doc.cleared_tries.get(t) == n]
            if stopped and self._settled(dag_id, run_id, [t for t, _ in stopped], False):
                self._reclear(dag_id, run_id, stopped)

    def _reclear(self, dag_id: str, run_id: str, stopped: list[tuple[str, int]]) -> None:
        """Claim the re-clear of ``stopped`` in the log, clear what this watcher claimed, record the clear."""
        logs, now = self.services.logs(), time.time()
        _, claimed = logs.update(dag_id, run_id, lambda d: claim_reclear(d, stopped, now, self.who))
        if not claimed:
            return
        log.warning("region failover: clear %s of %s/%s again (not restarted by our clear)", claimed, dag_id, run_id)
        self.services.api().clear(dag_id, run_id, claimed)
        number = self.services.clear_number(dag_id, run_id)
        logs.update(dag_id, run_id, lambda d: (mark_recleared(d, number), None))

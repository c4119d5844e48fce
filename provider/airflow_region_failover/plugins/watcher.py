"""The scheduler-side watcher: a daemon thread that applies due decisions and catches failures no hook reported.

Rules (each pass, every ``[region_failover] watch_interval`` s; every scheduler runs one, and they agree through
the decision logs' compare-and-swap):
- **Runs that matter**: those at work now and those seen at work within ``watch_lookback`` s (at start: the runs
  that ended within it). Every probe looks only there, so a pass costs the same whatever the history.
- **Failures**: events queued by the scheduler's hook, plus failed step tasks of those runs in the metadata DB —
  measured on 3.3.2, a SIGKILLed task process fires no hook anywhere, and a killed supervisor fires the hook in
  the scheduler only after ``task_instance_heartbeat_timeout`` — plus the failures kept there (below). Every
  failure found joins the pending ones before any is tried (a hook event is never lost to a probe that raises).
  A failure is done only once it is recorded: one that could not be (S3 throttled or away) is kept in the
  metadata DB, which the scheduler still reaches (:func:`.metadata_db.keep_unrecorded`), and tried again until
  it is — also by a scheduler restarted after the look-back window moved past it (an outage longer than
  ``watch_lookback``) — after 1, 2, 4, 8 s, then every ``RETRY_MAX_S`` s (a storm of failures must not become a
  storm of REST and S3 calls). An error that trying again cannot cure (:func:`.clearing.transient` names those
  that may pass) is given up on after ``GIVE_UP_TRIES`` tries: recorded as an ``abandoned`` decision naming it
  (:func:`.handler.give_up`; the run note and the Failover tab show it) or, if even that cannot be written, left
  on the task instance with the reason. A failure a person caused (they set the run or the task to ``failed``:
  Airflow's audit log says so) is not a failover failure.
- **Apply**: every run with an open decision (:meth:`~airflow_region_failover.decisions.storage.RunLogs.pending_runs`)
  is applied once due and once Airflow has settled (:func:`.probes.settled`; past ``SETTLE_TIMEOUT_S`` the
  failed tasks must still have left the running states). A decision whose run a person has set to ``failed``
  since is cancelled, never cleared. The next pass comes when the earliest open decision seen becomes due (not a
  whole ``watch_interval`` later), and every ``SETTLE_POLL_S`` while a due one waits for Airflow to settle, never
  later than ``watch_interval``: a pass finds a decision within one interval of its recording, then clears it as
  soon as it may.
- **Re-clear**: tasks one of our clears did not restart (still at the try it cleared) are cleared again, each
  claimed through the log first so that only one watcher clears it (:func:`.handler.claim_reclear`). A task the
  run's log shows no clear of ours stopped (at that try, in that state) is remembered while the probe reports
  it, so a task parked in ``up_for_retry`` by Airflow's own retry costs one log read, not one per pass; a log
  read while a decision is being applied proves nothing (its clear may land before the log says so).
- **Next plans** (a job rendered ``PER_RUN``, :mod:`.next_plan`): when a run the watcher saw at work ends, the plan
  of its DAG's next run is decided and stored; at start, a DAG with a run that ended within the look-back window
  and no decision stored gets one (its run's end may have passed while no watcher ran). A decision that could not
  be made (S3 or the metadata DB away) is tried again after 1, 2, 4, 8 s, and given up after ``GIVE_UP_TRIES``.
  A run that stopped for a restart has not ended: it leaves the runs at work while its restart is decided and comes
  back when the clear is applied, and a plan decided then would not see its last try (a failed try leaves no task
  summary). So the plan waits :data:`PLAN_SETTLE_S` after the run left, is dropped if the run is at work again (it
  is planned when it ends), and waits while the run's decision log has an open decision.
"""

from __future__ import annotations

import logging
import queue
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace

from airflow_region_failover import conf
from airflow_region_failover.decisions.plans import Plans
from airflow_region_failover.failover.handler import claim_reclear, close, give_up, mark_recleared
from airflow_region_failover.failover.run_log import DecisionStatus, FailureRecord
from airflow_region_failover.plugins import history, next_plan
from airflow_region_failover.plugins import metadata_db as probes
from airflow_region_failover.plugins.clearing import WHO, Services, apply_due, handle_failure, transient

log = logging.getLogger(__name__)
SETTLE_TIMEOUT_S = 60.0
MIN_LOOKBACK_S = 60.0
USER_ACTION_SLACK_S = 60.0
"""How long before a failure a person's ``failed`` may have been set and still be its cause."""
RETRY_MAX_S = 10.0
"""The longest wait before a failure that could not be recorded is tried again."""
GIVE_UP_TRIES = 5
PLAN_SETTLE_S = 3.0
"""A next plan is decided no sooner than this after its run left the runs at work (module rule: a failure's
restart decision may still be on its way)."""
"""Tries of a failure whose handling fails with an error trying again cannot cure, before it is given up on."""
Found = tuple[str, str, FailureRecord]
SETTLE_POLL_S = 0.2
"""How soon the next pass comes while a due decision waits for Airflow to settle (a metadata-DB probe each)."""

SCHEDULER_SERVICES = Services(clear_number=probes.clear_number)


def _key(found: Found) -> str:
    return f"{found[0]}/{found[1]}/{found[2].key}"


@dataclass(frozen=True)
class _Pending:
    """A failure found but not recorded yet: how many tries failed, when to try again, whether it is kept in the
    metadata DB."""

    found: Found
    tries: int = 0
    retry_at: float = 0.0
    kept: bool = False


@dataclass
class Watcher:
    """Scheduler-side daemon thread: catches failures no hook reported and applies due pending decisions."""

    interval: float = field(default_factory=conf.watch_interval)
    lookback: float = field(default_factory=conf.watch_lookback)
    services: Services = field(default_factory=lambda: SCHEDULER_SERVICES)
    who: str = WHO
    clock: Callable[[], float] = time.time
    """When a kept failure is due again (tests pass their own)."""
    _queue: queue.Queue[Found] = field(default_factory=queue.Queue)
    _stop: threading.Event = field(default_factory=threading.Event)
    _done: dict[str, float] = field(default_factory=dict)
    _pending: dict[str, _Pending] = field(default_factory=dict)
    _not_ours: set[tuple[str, str, str, int, str]] = field(default_factory=set)
    _runs: dict[probes.Run, float] = field(default_factory=dict)
    _active: set[probes.Run] = field(default_factory=set)
    _to_plan: dict[str, tuple[str, int, float]] = field(default_factory=dict)
    """DAG id -> (the run whose end its next plan follows, ``""`` for a catch-up; failed tries; when due)."""
    _since: float = 0.0
    _thread: threading.Thread | None = None

    def start(self) -> None:
        """Start the daemon thread (looking back ``lookback`` seconds for what happened while none ran)."""
        now = time.time()
        self._since = now - self.lookback
        ended = probes.runs_ended_since(self._since)
        self._to_plan.update({dag_id: ("", 0, 0.0) for dag_id, _ in ended})
        self._runs.update(dict.fromkeys(ended | probes.active_runs(), now))
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
        wait = self.interval
        while not self._stop.wait(wait):
            try:
                wake = self.tick()
            except Exception:
                log.exception("region failover: watcher pass failed (will retry)")
                wake = None
            wait = self.interval if wake is None else min(self.interval, max(0.0, wake - time.time()))

    @property
    def _floor(self) -> float:
        """How far back the watcher looks: ``watch_lookback``, at least :data:`MIN_LOOKBACK_S`."""
        return time.time() - max(self.lookback, MIN_LOOKBACK_S)

    def tick(self) -> float | None:
        """One pass: runs at work, failures (queued, in the DB, not yet recorded), due decisions, re-clears.
        Returns when the next pass should come for an open decision (module rule), or ``None``."""
        self._see_runs()
        self._plan_next()
        self._record_failures()
        wakes = []
        for dag_id, run_id in list(self.services.logs().pending_runs()):
            try:
                wakes.append(self._apply(dag_id, run_id))
            except Exception:
                log.exception("region failover: could not apply the pending decision of %s/%s", dag_id, run_id)
        try:
            self._kick()
        except Exception:
            log.exception("region failover: could not requeue cleared tasks (will retry)")
        return min((w for w in wakes if w is not None), default=None)

    def _record_failures(self) -> None:
        """Record each failure found once (the first report wins: a hook's carries the task's own error); keep
        those that could not be recorded, to try again when due, or give them up (module rule)."""
        self._collect()
        now = self.clock()
        for key, pending in list(self._pending.items()):
            if pending.retry_at <= now:
                self._try(key, pending, now)

    def _collect(self) -> None:
        """Hook events, then the kept failures and the failed step tasks the metadata DB holds, join the pending
        failures, in that order (the first report wins); a probe that raises loses nothing: it is asked again."""
        while not self._queue.empty():
            self._add(self._queue.get_nowait())
        for probe, kept in ((probes.unrecorded, True), (self._failed_in_db, False)):
            try:
                found = probe()
            except Exception:
                log.warning("region failover: could not read failures from the metadata DB (will retry)",
                            exc_info=True)
                continue
            for item in found:
                self._add(item, kept)

    def _add(self, found: Found, kept: bool = False) -> None:
        key = _key(found)
        if key in self._done:
            if kept:  # recorded, but forgetting it failed: forget it now
                self._forget(found)
            return
        current = self._pending.setdefault(key, _Pending(found, kept=kept))
        if kept and not current.kept:
            self._pending[key] = replace(current, kept=True)

    def _try(self, key: str, pending: _Pending, now: float) -> None:
        try:
            self._handle(*pending.found)
        except Exception as exc:
            self._not_recorded(key, pending, exc, now)
            return
        del self._pending[key]
        if pending.kept:
            self._forget(pending.found)

    def _not_recorded(self, key: str, pending: _Pending, exc: Exception, now: float) -> None:
        """Try again later (kept in the metadata DB), or give up on an error trying again cannot cure."""
        tries, (dag_id, run_id, failure) = pending.tries + 1, pending.found
        if tries >= GIVE_UP_TRIES and not transient(exc):
            self._give_up(key, pending, f"{type(exc).__name__}: {history.masked(str(exc))[:300]}")
            return
        wait = min(RETRY_MAX_S, 2.0 ** (tries - 1))
        kept = pending.kept or self._keep(pending.found, f"{type(exc).__name__}: {history.masked(str(exc))[:300]}")
        self._pending[key] = _Pending(pending.found, tries, now + wait, kept)
        log.warning("region failover: could not record %s of %s/%s (%s; trying again in %.0f s)",
                    failure.task_id, dag_id, run_id, type(exc).__name__, wait, exc_info=tries == 1)

    def _give_up(self, key: str, pending: _Pending, why: str) -> None:
        """Record the failure as an abandoned decision saying why (the run note shows it); if even that fails,
        leave the reason on its task instance."""
        dag_id, run_id, failure = pending.found
        reason = (f"abandoned: the failure could not be handled ({why}); nothing is restarted: fix the cause, "
                  f"then clear {failure.task_id}")
        try:
            doc, _ = self.services.logs().update(
                dag_id, run_id, lambda d: (give_up(d, failure, reason, time.time()), None))
        except Exception:
            log.exception("region failover: could not record giving up on %s of %s/%s", failure.task_id, dag_id,
                          run_id)
            self._forget(pending.found, gave_up=reason)
        else:
            history.publish_note(self.services.api(), doc)
            if pending.kept:
                self._forget(pending.found)
        log.error("region failover: gave up on %s of %s/%s after %d tries: %s", failure.task_id, dag_id, run_id,
                  pending.tries + 1, reason)
        del self._pending[key]
        self._done[key] = time.time()

    def _keep(self, found: Found, why: str) -> bool:
        """Keep a failure not recorded yet in the metadata DB; whether it is kept."""
        try:
            probes.keep_unrecorded(*found, why)
        except Exception:
            log.warning("region failover: could not keep %s of %s/%s in the metadata DB (will retry)",
                        found[2].task_id, found[0], found[1], exc_info=True)
            return False
        return True

    def _forget(self, found: Found, gave_up: str | None = None) -> None:
        try:
            probes.forget_unrecorded(*found, gave_up)
        except Exception:
            log.warning("region failover: could not forget the kept failure %s of %s/%s (will retry)",
                        found[2].task_id, found[0], found[1], exc_info=True)

    def _see_runs(self) -> None:
        """Remember the runs at work now; forget those last seen before the look-back window (bounded memory)."""
        now, floor = time.time(), self._floor
        active = probes.active_runs()
        for dag_id, run_id in self._active - active:
            self._to_plan[dag_id] = (run_id, 0, self.clock() + PLAN_SETTLE_S)
        self._active = set(active)
        self._runs.update(dict.fromkeys(active, now))
        for run in [r for r, seen in self._runs.items() if seen < floor]:
            del self._runs[run]
        for key in [k for k, done in self._done.items() if done < floor]:
            del self._done[key]

    def _plan_next(self) -> None:
        """Decide the next plan of each DAG that needs one (module rule); one that fails waits for the next
        pass."""
        now = self.clock()
        for dag_id, (after, tries, due) in list(self._to_plan.items()):
            if due > now:
                continue
            if after and (dag_id, after) in self._active:  # restarted: planned when it ends
                del self._to_plan[dag_id]
                continue
            try:
                if after and self.services.logs().read(dag_id, after).open_decision is not None:
                    self._to_plan[dag_id] = (after, tries, now + PLAN_SETTLE_S)  # its restart is on its way
                    continue
                plans = Plans(self.services.logs().objects)
                spec = probes.serialized_job(dag_id) if after or plans.next(dag_id) is None else None
                decided = next_plan.decide_next(dag_id, spec, plans, after) if spec is not None else None
                if decided is not None:
                    log.info("region failover: the next run of %s runs plan %s (%s)%s", dag_id,
                             decided.plan.to_json()["choices"], decided.reason,
                             "".join(f"; {step} in {c.epochs} epochs ({c.reason})"
                                     for step, c in sorted(decided.epochs.items())))
            except Exception:
                if tries + 1 < GIVE_UP_TRIES:
                    self._to_plan[dag_id] = (after, tries + 1, now + min(RETRY_MAX_S, 2.0 ** tries))
                    log.warning("region failover: could not decide the next plan of %s (will retry)", dag_id,
                                exc_info=tries == 0)
                    continue
                log.exception("region failover: gave up deciding the next plan of %s; its next run keeps the "
                              "plan stored before", dag_id)
            del self._to_plan[dag_id]

    def _failed_in_db(self) -> list[Found]:
        found = probes.failed_step_tasks(self._runs, self._since)
        self._since = max(self._since, self._floor)
        return found

    def _handle(self, dag_id: str, run_id: str, failure: FailureRecord) -> None:
        """Record one failure once (it is done only when recorded, or when it is not ours to restart)."""
        key = _key((dag_id, run_id, failure))
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

    def _apply(self, dag_id: str, run_id: str) -> float | None:
        """Apply the run's due decision once Airflow has settled; cancel it if a person stopped the run. Returns
        when to look again (it becomes due, or Airflow may have settled), or ``None``."""
        logs = self.services.logs()
        current = logs.read(dag_id, run_id).open_decision
        if current is None:
            logs.tidy(dag_id, run_id)
            return None
        now = time.time()
        if current.status is DecisionStatus.PENDING and current.clear_at > now:
            return current.clear_at
        failed = [f.task_id for f in current.failures]
        who = probes.user_stopped(dag_id, run_id, [*failed, *current.restart],
                                  min(f.at for f in current.failures) - USER_ACTION_SLACK_S)
        if who:
            reason = f"cancelled: the run or its task was set to failed by {who}"
            doc, _ = logs.update(dag_id, run_id, lambda d: (close(d, current.id, DecisionStatus.CANCELLED, reason),
                                                            None))
            history.publish_note(self.services.api(), doc)
            return None
        late = now - current.clear_at > SETTLE_TIMEOUT_S
        if not self._settled(dag_id, run_id, failed, not late):
            return now + SETTLE_POLL_S
        apply_due(self.services, dag_id, run_id, self.who)
        return None

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
        reported = probes.not_restarted(self._runs)
        self._not_ours &= {(d, r, *task) for (d, r), tasks in reported.items() for task in tasks}
        for (dag_id, run_id), tasks in reported.items():
            fresh = [task for task in tasks if (dag_id, run_id, *task) not in self._not_ours]
            if not fresh:
                continue
            doc = logs.read(dag_id, run_id)
            stopped = [(t, n) for t, n, _ in fresh if doc.cleared_tries.get(t) == n]
            applying = doc.open_decision is not None and doc.open_decision.status is DecisionStatus.APPLYING
            if not applying:
                self._not_ours.update((dag_id, run_id, t, n, state) for t, n, state in fresh
                                      if doc.cleared_tries.get(t) != n)
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

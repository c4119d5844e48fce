"""The failure handler: what one failure does to a run's decision log (Flink's ``ExecutionFailureHandler``).

Every function here is pure — a new :class:`~.run_log.RunLog` from an old one — so it can run inside the
compare-and-swap retry loop that stores the log. Rules:

1. **Once.** A failure is recorded once (its key is ``task:map_index:try``).
2. **Stale.** A failure of the try one of our clears stopped is absorbed: never counted, never planned.
3. **Epochs.** A failed try started after a clear we did not make (a person re-ran the run, or cleared tasks by
   hand) begins a new epoch: a fresh restart strategy and budget, as a resubmitted Flink job gets.
4. **Counted.** Otherwise it counts against the FLIP-1 budgets and the restart backoff strategy (their state
   lives in the log, so counts survive clears). Exhausted -> an ``exhausted`` decision with the reason.
4b. **Not recoverable** (:mod:`.classify`, Flink's non-recoverable errors): a failure of a class declared
   non-recoverable (before the budget, uncounted), or the second failure of a task instance with the same error
   on the same inputs and code (after the budget), ends the run with a ``not-recoverable`` decision that
   restarts nothing and says which rule and which tries (a pending decision is cancelled, as on exhaustion).
5. **One change at a time.** While a decision is pending, further failures are merged into it (union of the
   restart sets, every failure listed).
6. **Apply once.** A due pending decision is claimed (``pending -> applying``) by exactly one process
   (:func:`claim`); it becomes ``applied`` with the tries its clear stopped (:func:`mark_applied`), ``abandoned``
   if the API refuses the clear for good (:func:`close`), or ``cancelled`` if a person stopped the run.
7. **Given up.** A failure whose handling failed for good (the caller gave up on it) is recorded once as an
   ``abandoned`` decision that restarts nothing and says why (:func:`give_up`), so the run's history shows it.
8. **Backoff where the task starts.** Only the first try after the clear of an applied decision waits, until the
   decision's ``apply_at`` (:func:`restart_wait`); :func:`restarted_by` names the decision whose clear restarted a
   try (and so why). A try that cannot read the log waits the strategy's first backoff
   (:func:`unknown_restart_wait`): never earlier than any decision of the job would have made it start.
Task ids are the caller's names for subtasks (:attr:`FailureHandler.task_id`); several subtasks may share one
task (a chain of steps run by one task): a restart set names each task once.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from enum import Enum
from typing import Any

from airflow_region_failover.failover import classify
from airflow_region_failover.failover.backoff import RestartBackoffStrategy
from airflow_region_failover.failover.budget import FailureBudget
from airflow_region_failover.failover.error_class import NON_RECOVERABLE_ERRORS_KEY
from airflow_region_failover.failover.options import FailoverConfig
from airflow_region_failover.failover.restart_plan import RestartPlan
from airflow_region_failover.failover.run_log import (
    Decision,
    DecisionStatus,
    EventRecord,
    FailureRecord,
    Reclear,
    RegionRecord,
    RunLog,
    TaskSnapshot,
    frozen,
)
from airflow_region_failover.graph.ids import PartitionId, SubtaskId
from airflow_region_failover.graph.model import Exchange, JobGraph
from airflow_region_failover.graph.subtasks import consumed_partitions

STUCK_APPLYING_S = 60.0
"""A decision claimed longer ago than this without being marked applied is claimed again (its claimer died)."""


class Outcome(str, Enum):
    """What handling one failure did."""

    CREATED = "created"
    MERGED = "merged"
    DUPLICATE = "duplicate"
    STALE = "stale"
    EXHAUSTED = "exhausted"
    NOT_RECOVERABLE = "not-recoverable"
    IGNORED = "ignored"

    @property
    def ends_run(self) -> bool:
        """The failure restarts nothing: the run ends failed."""
        return self in (Outcome.EXHAUSTED, Outcome.NOT_RECOVERABLE)


@dataclass(frozen=True)
class Declared:
    """The exception class names declared non-recoverable for one task, and by what (shown in the reason)."""

    names: tuple[str, ...]
    where: str = NON_RECOVERABLE_ERRORS_KEY


@dataclass(frozen=True)
class HandlingResult:
    """Flink's ``FailureHandlingResult``: the outcome, the decision the failure joined, and when it restarts."""

    outcome: Outcome
    decision_id: int | None = None
    apply_at: float | None = None


def reused_partitions(graph: JobGraph, restart: Iterable[SubtaskId]) -> list[str]:
    """BLOCKING partitions read by restarting subtasks whose producers do not restart: results reused."""
    restarting = set(restart)
    reused: set[PartitionId] = set()
    for subtask in restarting:
        for edge, parts in consumed_partitions(graph, subtask).items():
            if edge.exchange is not Exchange.PIPELINED:  # BLOCKING, or AUTO in an unresolved graph's default plan
                reused.update(p for p in parts if SubtaskId(edge.source, p.index) not in restarting)
    return sorted(str(p) for p in reused)


def no_followers(subtask: SubtaskId) -> tuple[str, ...]:
    """No task follows a subtask (the default of :attr:`FailureHandler.followers`)."""
    return ()


@dataclass(frozen=True)
class FailureHandler:
    """Rules 1-5 for one job: its failover configuration and how its subtasks are named. ``followers``: tasks
    outside the graph that run after a subtask and must restart with it (a sink's publishing task, which a
    failed sink leaves ``upstream_failed``): a restart set naming the subtask names them too. ``declared``: the
    class names non-recoverable for a task id (default: the job's ``restart-strategy.non-recoverable-errors``)."""

    config: FailoverConfig
    task_id: Callable[[SubtaskId], str]
    followers: Callable[[SubtaskId], tuple[str, ...]] = no_followers
    declared: Callable[[str], Declared] | None = None

    def declared_for(self, task_id: str) -> Declared:
        """The non-recoverable class names of ``task_id`` (rule 4b)."""
        return self.declared(task_id) if self.declared is not None else Declared(self.config.non_recoverable_errors)

    def handle(self, log: RunLog, failure: FailureRecord, plan: RestartPlan | None, reused: Sequence[str],
               now: float) -> tuple[RunLog, HandlingResult]:
        """Record ``failure`` (``plan``: the core's plan for it; ``None`` if it is not a subtask of the job)."""
        if failure.key in log.events:
            return log, HandlingResult(Outcome.DUPLICATE, log.events[failure.key].decision)
        if plan is None:
            return log, HandlingResult(Outcome.IGNORED)
        log = _maybe_new_epoch(log, failure)
        cleared = log.cleared_tries.get(failure.task_id)
        current = log.open_decision
        if cleared is not None and failure.try_number <= cleared:
            return log.with_events(**{failure.key: EventRecord(now, stale=True)}), HandlingResult(Outcome.STALE)
        if current is not None and current.status is DecisionStatus.APPLYING and failure.task_id in current.restart:
            stale = EventRecord(now, current.id, stale=True)
            return log.with_events(**{failure.key: stale}), HandlingResult(Outcome.STALE, current.id)
        strategy, budget = self._restore(log, now)
        declared = self.declared_for(failure.task_id)
        verdict = classify.declared(failure, declared.names, declared.where)
        if verdict.not_recoverable:
            return _end(log, failure, plan, verdict.reason, self._budget_left(budget, strategy), now,
                        DecisionStatus.NOT_RECOVERABLE)
        strategy.notify_failure(int(now * 1000))
        budget.record(str(plan.failed))
        refused = budget.exhausted() or self._strategy_refuses(strategy)
        log = replace(log, strategy_state=frozen(strategy.state_dict()), budget_state=frozen(budget.state_dict()))
        left = self._budget_left(budget, strategy)
        if refused:
            return _end(log, failure, plan, refused, left, now)
        verdict = classify.evidence(failure, (f for d in log.decisions if d.epoch == log.epoch for f in d.failures))
        if verdict.not_recoverable:
            return _end(log, failure, plan, verdict.reason, left, now, DecisionStatus.NOT_RECOVERABLE)
        if current is not None and current.status is DecisionStatus.PENDING:
            return self._merge(log, current, failure, plan, left, now)
        return self._create(log, failure, plan, reused, strategy.get_backoff_time() / 1000.0, left, now)

    def _create(self, log: RunLog, failure: FailureRecord, plan: RestartPlan, reused: Sequence[str], delay: float,
                left: Mapping[str, Any], now: float) -> tuple[RunLog, HandlingResult]:
        decision = Decision(
            id=len(log.decisions) + 1, status=DecisionStatus.PENDING, created=now, failures=(failure,),
            epoch=log.epoch, strategy=plan.strategy.value, delay_s=delay, apply_at=now + delay, budget=frozen(left),
            regions=tuple(RegionRecord.of(r) for r in plan.regions), restart=self._restart_ids(plan),
            reasons=frozen(self._reasons(plan)), reused=tuple(reused),
        )
        log = log.with_decision(decision).with_events(**{failure.key: EventRecord(now, decision.id)})
        return log, HandlingResult(Outcome.CREATED, decision.id, decision.apply_at)

    def _merge(self, log: RunLog, current: Decision, failure: FailureRecord, plan: RestartPlan,
               left: Mapping[str, Any], now: float) -> tuple[RunLog, HandlingResult]:
        known = {r.region for r in current.regions}
        merged = replace(
            current, failures=(*current.failures, failure), budget=frozen(left),
            regions=(*current.regions, *(RegionRecord.of(r) for r in plan.regions if r.region.id not in known)),
            restart=tuple(sorted({*current.restart, *self._restart_ids(plan)})),
            reasons=frozen({**self._reasons(plan), **current.reasons}),
        )
        log = log.with_decision(merged).with_events(**{failure.key: EventRecord(now, current.id, merged=True)})
        return log, HandlingResult(Outcome.MERGED, current.id, current.apply_at)

    def _restart_ids(self, plan: RestartPlan) -> tuple[str, ...]:
        return tuple(dict.fromkeys(t for s in plan.restart for t in (self.task_id(s), *self.followers(s))))

    def _reasons(self, plan: RestartPlan) -> dict[str, str]:
        return {t: r.reason.value for r in plan.regions for s in r.region.subtasks
                for t in (self.task_id(s), *self.followers(s))}

    def _restore(self, log: RunLog, now: float) -> tuple[RestartBackoffStrategy, FailureBudget]:
        def clock() -> int:
            return int(now * 1000)

        strategy = (self.config.restore_strategy(log.strategy_state, clock) if log.strategy_state
                    else self.config.create_strategy(clock))
        budget = self.config.restore_budget(log.budget_state) if log.budget_state else self.config.create_budget()
        return strategy, budget

    def _strategy_refuses(self, strategy: RestartBackoffStrategy) -> str | None:
        if strategy.can_restart():
            return None
        shown = ", ".join(f"{k}={v}" for k, v in sorted(self.config.to_options().items())
                          if k.startswith("restart-strategy") and k != NON_RECOVERABLE_ERRORS_KEY)
        return f"restart strategy '{self.config.restart_strategy.type_name}' allows no further restart ({shown})"

    def _budget_left(self, budget: FailureBudget, strategy: RestartBackoffStrategy) -> dict[str, Any]:
        left: dict[str, Any] = {"failures_total": budget.total_failures}
        limit = self.config.budget.max_total_task_failures
        if limit >= 0:
            left["total_failures_left"] = max(0, limit - budget.total_failures)
        attempts = getattr(self.config.restart_strategy, "attempts", None)
        used = strategy.state_dict().get("current_restart_attempt")
        if isinstance(attempts, int) and isinstance(used, int):
            left["restart_attempts_left"] = max(0, attempts - used)
        return left


def _maybe_new_epoch(log: RunLog, failure: FailureRecord) -> RunLog:
    """Rule 3: a try started after a clear we did not make begins a new epoch (fresh strategy and budget)."""
    known = max((log.epoch_clear, *log.our_clears))
    if failure.clear_number is None or failure.clear_number <= known:
        return log
    return replace(log, epoch=log.epoch + 1, epoch_clear=failure.clear_number, strategy_state=None,
                   budget_state=None, cleared_tries=frozen({}), reclears=frozen({}))


def _end(log: RunLog, failure: FailureRecord, plan: RestartPlan, reason: str, left: Mapping[str, Any], now: float,
         status: DecisionStatus = DecisionStatus.EXHAUSTED) -> tuple[RunLog, HandlingResult]:
    """A decision that restarts nothing (``exhausted`` or ``not-recoverable``, saying why); a pending decision is
    cancelled: the run cannot succeed without the failed task."""
    current = log.open_decision
    if current is not None and current.status is DecisionStatus.PENDING:
        why = "exhausted the budget" if status is DecisionStatus.EXHAUSTED else "is not recoverable"
        log = log.with_decision(replace(current, status=DecisionStatus.CANCELLED,
                                        reason=f"cancelled: a later failure {why} ({reason})"))
    decision = Decision(id=len(log.decisions) + 1, status=status, created=now, failures=(failure,),
                        epoch=log.epoch, strategy=plan.strategy.value, reason=reason, budget=frozen(left),
                        regions=tuple(RegionRecord.of(r) for r in plan.regions), apply_at=now)
    log = log.with_decision(decision).with_events(**{failure.key: EventRecord(now, decision.id)})
    return log, HandlingResult(Outcome(status.value), decision.id)


# -- applying a due decision (rule 6) ---------------------------------------------------------------------------
def claim(log: RunLog, now: float, who: str,
          before: Mapping[str, TaskSnapshot] | None = None) -> tuple[RunLog, Decision | None]:
    """Claim the run's due decision: ``pending`` past its clear time, or ``applying`` whose claimer is stuck.
    ``before`` (the run's task instances read just before this claim) is recorded, for the restart set's tasks,
    by the first claim only: a re-claim keeps the states the first claimer's clear started from."""
    current = log.open_decision
    if current is None:
        return log, None
    stuck = (current.status is DecisionStatus.APPLYING
             and now - (current.claimed_at if current.claimed_at is not None else now) > STUCK_APPLYING_S)
    if (current.status is DecisionStatus.PENDING and current.clear_at <= now) or stuck:
        snapshot = current.before or frozen({t: s for t, s in (before or {}).items() if t in current.restart})
        claimed = replace(current, status=DecisionStatus.APPLYING, claimed_at=now, claimed_by=who,
                          before=snapshot, claims=current.claims + 1)
        return log.with_decision(claimed), claimed
    return log, None


def mark_applied(log: RunLog, decision_id: int, cleared: Mapping[str, int], clear_number: int | None,
                 now: float) -> RunLog:
    """Decision ``decision_id`` was cleared: ``cleared`` maps each task the clear stopped to that try, and
    ``clear_number`` is the run's clear count our clear produced (``None`` if unknown)."""
    decision = log.decision(decision_id)
    applied = replace(decision, status=DecisionStatus.APPLIED, applied_at=now, cleared=len(cleared),
                      restarting_time_s=round(now - decision.failures[0].at, 3))
    ours = log.our_clears if clear_number is None else tuple(sorted({*log.our_clears, clear_number}))
    return replace(log.with_decision(applied), cleared_tries=frozen({**log.cleared_tries, **cleared}),
                   our_clears=ours)


def close(log: RunLog, decision_id: int, status: DecisionStatus, reason: str) -> RunLog:
    """Close an open decision without clearing: ``abandoned`` (the API refuses the clear for good) or
    ``cancelled`` (a person stopped the run); ``reason`` says why, naming who or what."""
    if status not in (DecisionStatus.ABANDONED, DecisionStatus.CANCELLED):
        raise ValueError(f"a decision is closed as abandoned or cancelled, not {status.value}")
    decision = log.decision(decision_id)
    if not decision.status.open:
        return log
    return log.with_decision(replace(decision, status=status, reason=reason))


def give_up(log: RunLog, failure: FailureRecord, reason: str, now: float) -> RunLog:
    """Rule 7: record ``failure``, whose handling failed for good, as an ``abandoned`` decision naming ``reason``
    (a failure already recorded is left as it is)."""
    if failure.key in log.events:
        return log
    decision = Decision(id=len(log.decisions) + 1, status=DecisionStatus.ABANDONED, created=now,
                        failures=(failure,), epoch=log.epoch, reason=reason, apply_at=now)
    return log.with_decision(decision).with_events(**{failure.key: EventRecord(now, decision.id)})


def claim_reclear(log: RunLog, stopped: Iterable[tuple[str, int]], now: float,
                  who: str) -> tuple[RunLog, list[str]]:
    """Of the tasks our clear did not restart (``(task, try)`` still at the try it stopped), those nobody has
    re-cleared for that try yet, or whose re-clear is stuck: claim them for ``who`` (one watcher clears them)."""
    claimed: dict[str, Reclear] = {}
    for task, try_number in stopped:
        if log.cleared_tries.get(task) != try_number:
            continue
        previous = log.reclears.get(task)
        if previous is None or previous.try_number != try_number or now - previous.at > STUCK_APPLYING_S:
            claimed[task] = Reclear(try_number, now, who)
    if not claimed:
        return log, []
    return replace(log, reclears=frozen({**log.reclears, **claimed})), sorted(claimed)


def mark_recleared(log: RunLog, clear_number: int | None) -> RunLog:
    """Our re-clear produced clear count ``clear_number``: a clear of ours, not a person's (rule 3)."""
    if clear_number is None:
        return log
    return replace(log, our_clears=tuple(sorted({*log.our_clears, clear_number})))


def restarted_by(log: RunLog, task_id: str, try_number: int) -> Decision | None:
    """The applied decision whose clear started try ``try_number`` of ``task_id`` (the first try after it), or
    ``None`` when this try was not started by one of our clears (a first try, Airflow's retry, a person's clear).
    Its ``reasons[task_id]`` says why (the reuse rule keeps only ``consumer`` restarts)."""
    cleared = log.cleared_tries.get(task_id)
    if cleared is None or try_number != cleared + 1:
        return None
    for decision in reversed(log.decisions):
        if decision.status is DecisionStatus.APPLIED and task_id in decision.restart:
            return decision
    return None


def restart_wait(log: RunLog, task_id: str, try_number: int, now: float) -> float:
    """Seconds try ``try_number`` of ``task_id`` must still wait for its restart delay (0 if none; rule 8)."""
    decision = restarted_by(log, task_id, try_number)
    return 0.0 if decision is None else max(0.0, decision.apply_at - now)


def unknown_restart_wait(config: FailoverConfig) -> float:
    """Seconds a restarted try waits when it cannot read its run's log (rule 8): the backoff the job's restart
    strategy gives its first failure — the least any decision of this job waits (0 for ``none``)."""
    strategy = config.create_strategy(lambda: 0)
    strategy.notify_failure(0)
    return strategy.get_backoff_time() / 1000.0

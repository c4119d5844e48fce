"""The failure handler: pure transitions of a run's decision log (Flink's ``ExecutionFailureHandler``).

The log is one JSON-able document per DAG run (stored with compare-and-swap by the store, applied by the plugin).
Every function here is a pure function of the document it gets, so it can run inside a CAS retry loop. Rules:

1. A failure is recorded once (idempotent key ``task:map_index:try``).
2. A failure of a task that a previous decision already cleared, from the try that clear stopped, is *stale*
   (the clear killed it): it is recorded as absorbed, never counted, never planned.
3. Otherwise it counts against the FLIP-1 budgets and the restart backoff strategy (their state lives in the log,
   so counts survive clears, which reset Airflow's own ``max_tries``). Exhausted -> an ``exhausted`` decision with
   the reason, nothing to clear.
4. While a decision is ``pending``, further failures are **merged** into it (union of the restart sets, every
   failure listed): one global change at a time.
5. A pending decision is claimed (``pending -> applying``) by exactly one process after the merge window
   (:data:`MERGE_WINDOW_S`); once its tasks are cleared it is marked ``applied`` with the tries it cleared (rule 2).
6. The backoff delay is honoured where the restarted tasks start (:func:`restart_wait`): only the first try after
   the clear of an applied decision waits, until the decision's ``apply_at``.
Task ids are opaque strings here: the caller maps subtasks to the ids it clears.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from airflow_region_failover.failover.budget import FailureBudget
from airflow_region_failover.failover.options import FailoverConfig
from airflow_region_failover.failover.restart import RestartBackoffStrategy
from airflow_region_failover.failover.restart_plan import RestartPlan
from airflow_region_failover.graph.ids import PartitionId, SubtaskId
from airflow_region_failover.graph.model import Exchange, JobGraph
from airflow_region_failover.graph.subtasks import consumed_partitions

LOG_FORMAT = 1
OPEN_STATUSES = ("pending", "applying")
STUCK_APPLYING_S = 60.0
MERGE_WINDOW_S = 1.0
"""A pending decision is cleared no earlier than this after it was created (or its delay, if shorter): failures
arriving meanwhile are merged into it. The backoff delay itself is enforced when the restarted tasks start."""

RunLog = dict[str, Any]
"""A run's decision log (JSON-able)."""


def new_log(dag_id: str, run_id: str) -> RunLog:
    """An empty run log: no failures seen, strategy and budget in their initial state."""
    return {"format": LOG_FORMAT, "dag_id": dag_id, "run_id": run_id, "events": {}, "decisions": [],
            "strategy_state": None, "budget_state": None, "cleared_tries": {}}


def open_decision(doc: RunLog) -> dict[str, Any] | None:
    """The run's decision that is decided but not applied yet (at most one), or None."""
    return next((d for d in doc["decisions"] if d["status"] in OPEN_STATUSES), None)


def clear_at(decision: dict[str, Any]) -> float:
    """When a pending decision may be cleared: after the merge window, never later than its restart time."""
    return min(float(decision["apply_at"]), float(decision["created"]) + MERGE_WINDOW_S)


@dataclass(frozen=True)
class FailureEvent:
    """One failed task instance, as seen by a listener or the scheduler's watcher."""

    dag_id: str
    run_id: str
    task_id: str
    map_index: int
    try_number: int
    error: str
    path: str
    at: float

    @property
    def key(self) -> str:
        """Idempotency key: the same try of the same task instance is one failure."""
        return f"{self.task_id}:{self.map_index}:{self.try_number}"

    def to_dict(self) -> dict[str, Any]:
        """JSON-able form for the log."""
        return {"task_id": self.task_id, "map_index": self.map_index, "try_number": self.try_number,
                "error": self.error[:500], "path": self.path, "at": self.at}


@dataclass(frozen=True)
class Outcome:
    """What recording a failure did: ``kind`` in created/merged/duplicate/stale/exhausted/ignored."""

    kind: str
    decision_id: int | None = None
    apply_at: float | None = None


def reused_partitions(graph: JobGraph, restart: Iterable[SubtaskId]) -> list[str]:
    """BLOCKING partitions read by restarting subtasks whose producers do not restart: results reused."""
    restarting = set(restart)
    reused: set[PartitionId] = set()
    for subtask in restarting:
        for edge, parts in consumed_partitions(graph, subtask).items():
            if edge.exchange is Exchange.BLOCKING:
                reused.update(p for p in parts if SubtaskId(edge.source, p.index) not in restarting)
    return sorted(str(p) for p in reused)


# -- recording a failure ----------------------------------------------------------------------------------------
def record_failure(doc: RunLog, event: FailureEvent, config: FailoverConfig, plan: RestartPlan | None,
                   restart_ids: Sequence[str], reused: Sequence[str], now: float) -> Outcome:
    """Apply rules 1-4 to ``doc`` in place. ``plan`` is the core's plan for this failure (None: not a subtask of
    the job), ``restart_ids`` the task ids of ``plan.restart``, ``reused`` the partitions the restart reads."""
    if event.key in doc["events"]:
        return Outcome("duplicate", doc["events"][event.key].get("decision"))
    if plan is None:
        return Outcome("ignored")
    cleared = doc["cleared_tries"].get(event.task_id)
    if cleared is not None and event.try_number <= cleared:
        doc["events"][event.key] = {"stale": True, "at": now}
        return Outcome("stale")
    current = open_decision(doc)
    if current is not None and current["status"] == "applying" and event.task_id in current["restart"]:
        doc["events"][event.key] = {"stale": True, "decision": current["id"], "at": now}
        return Outcome("stale", current["id"])
    strategy, budget = _restore(doc, config, now)
    strategy.notify_failure(int(now * 1000))
    budget.record(str(plan.failed))
    exhausted = budget.exhausted() or _strategy_refuses(strategy, config)
    doc["strategy_state"], doc["budget_state"] = strategy.state_dict(), budget.state_dict()
    left = _budget_left(config, budget, strategy)
    if exhausted:
        return _exhaust(doc, event, plan, exhausted, left, now)
    if current is not None and current["status"] == "pending":
        return _merge(doc, current, event, plan, restart_ids, left, now)
    decision = _decision_base(doc, event, "pending", now)
    delay = strategy.get_backoff_time() / 1000.0
    decision.update({
        "strategy": plan.strategy.value, "delay_s": delay, "apply_at": now + delay, "budget": left,
        "regions": [r.to_dict() for r in plan.regions], "restart": list(restart_ids), "reused": list(reused),
    })
    doc["decisions"].append(decision)
    return Outcome("created", decision["id"], decision["apply_at"])


def _restore(doc: RunLog, config: FailoverConfig, now: float) -> tuple[RestartBackoffStrategy, FailureBudget]:
    def clock() -> int:
        return int(now * 1000)

    strategy = (config.restore_strategy(doc["strategy_state"], clock) if doc["strategy_state"]
                else config.create_strategy(clock))
    budget = config.restore_budget(doc["budget_state"]) if doc["budget_state"] else config.create_budget()
    return strategy, budget


def _strategy_refuses(strategy: RestartBackoffStrategy, config: FailoverConfig) -> str | None:
    if strategy.can_restart():
        return None
    opts = config.to_options()
    shown = ", ".join(f"{k}={v}" for k, v in sorted(opts.items()) if k.startswith("restart-strategy"))
    return f"restart strategy '{config.restart_strategy.type_name}' allows no further restart ({shown})"


def _budget_left(config: FailoverConfig, budget: FailureBudget, strategy: RestartBackoffStrategy) -> dict[str, Any]:
    left: dict[str, Any] = {"failures_total": budget.total_failures}
    limit = config.budget.max_total_task_failures
    if limit >= 0:
        left["total_failures_left"] = max(0, limit - budget.total_failures)
    state = strategy.state_dict()
    attempts = getattr(config.restart_strategy, "attempts", None)
    used = state.get("current_restart_attempt")
    if isinstance(attempts, int) and isinstance(used, int):
        left["restart_attempts_left"] = max(0, attempts - used)
    return left


def _decision_base(doc: RunLog, event: FailureEvent, status: str, now: float) -> dict[str, Any]:
    decision = {"id": len(doc["decisions"]) + 1, "status": status, "created": now, "failures": [event.to_dict()]}
    doc["events"][event.key] = {"decision": decision["id"], "at": now}
    return decision


def _merge(doc: RunLog, current: dict[str, Any], event: FailureEvent, plan: RestartPlan,
           restart_ids: Sequence[str], left: dict[str, Any], now: float) -> Outcome:
    current["failures"].append(event.to_dict())
    doc["events"][event.key] = {"decision": current["id"], "at": now, "merged": True}
    known = {r["region"] for r in current["regions"]}
    current["regions"].extend(r.to_dict() for r in plan.regions if r.region.id not in known)
    current["restart"] = sorted(set(current["restart"]) | set(restart_ids))
    current["budget"] = left
    current["merged"] = len(current["failures"])
    return Outcome("merged", current["id"], current["apply_at"])


def _exhaust(doc: RunLog, event: FailureEvent, plan: RestartPlan, reason: str, left: dict[str, Any],
             now: float) -> Outcome:
    current = open_decision(doc)
    if current is not None and current["status"] == "pending":
        current["status"] = "cancelled"
        current["reason"] = f"cancelled: a later failure exhausted the budget ({reason})"
    decision = _decision_base(doc, event, "exhausted", now)
    decision.update({"strategy": plan.strategy.value, "reason": reason, "budget": left,
                     "regions": [r.to_dict() for r in plan.regions], "restart": []})
    doc["decisions"].append(decision)
    return Outcome("exhausted", decision["id"])


# -- applying a due decision ----------------------------------------------------------------------------------
def claim(now: float, who: str) -> Callable[[RunLog], dict[str, Any] | None]:
    """The change that claims the run's due decision (rule 5): returns a copy of it, or None if none is due."""

    def change(doc: RunLog) -> dict[str, Any] | None:
        current = open_decision(doc)
        if current is None:
            return None
        stuck = current["status"] == "applying" and now - current.get("claimed_at", now) > STUCK_APPLYING_S
        if (current["status"] == "pending" and clear_at(current) <= now) or stuck:
            current.update(status="applying", claimed_at=now, claimed_by=who)
            return dict(current)
        return None

    return change


def mark_applied(decision_id: int, cleared: Sequence[dict[str, Any]], now: float) -> Callable[[RunLog], None]:
    """The change that marks a decision applied and records the tries its clear stopped (rule 2)."""

    def change(doc: RunLog) -> None:
        decision = doc["decisions"][decision_id - 1]
        decision.update(status="applied", applied_at=now, cleared=len(cleared),
                        restarting_time_s=round(now - decision["failures"][0]["at"], 3))
        for ti in cleared:
            doc["cleared_tries"][ti["task_id"]] = int(ti.get("try_number") or 0)

    return change


def restart_wait(doc: RunLog, task_id: str, try_number: int, now: float) -> float:
    """Seconds the try ``try_number`` of ``task_id`` must still wait for its restart delay (0 if none; rule 6)."""
    cleared = doc["cleared_tries"].get(task_id)
    if cleared is None or try_number != int(cleared) + 1:
        return 0.0
    for decision in reversed(doc["decisions"]):
        if decision["status"] == "applied" and task_id in decision["restart"]:
            return max(0.0, float(decision["apply_at"]) - now)
    return 0.0

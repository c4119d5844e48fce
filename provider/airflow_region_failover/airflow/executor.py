"""The restart executor: turn one task failure into a recorded decision, and apply due decisions by clearing.

Rules (the failover loop, Flink's ``DefaultScheduler#handleTaskFailure`` on Airflow):
1. A failure of a subtask task (``<step>.<i>``) in a region-failover DAG is recorded once (idempotent key
   ``task:map_index:try``) in the run's decision log (:mod:`.decisions`, compare-and-swap).
2. A failure of a task that a previous decision already cleared, from the try that clear stopped, is *stale*
   (the clear killed it): it is recorded as absorbed, never counted, never planned.
3. Otherwise it counts against the FLIP-1 budgets and the restart backoff strategy (their state lives in the log,
   so counts survive clears, which reset Airflow's own ``max_tries``). Exhausted -> an ``exhausted`` decision with
   the reason, no clear: the run ends ``failed`` and its note says why.
4. While a decision is ``pending`` (waiting for its backoff delay) further failures are **merged** into it (union
   of the restart sets, every failure listed): one global change at a time.
5. A pending decision is claimed (``pending -> applying``, CAS) by exactly one process after the merge window
   (:data:`MERGE_WINDOW_S`), which clears exactly its task instances in the same run through the public REST API
   (``only_failed: false, reset_dag_runs: true``), then marks it ``applied`` with the tries it cleared (rule 2)
   and emits metrics. Clearing early keeps the run ``running`` (not ``failed``) during the backoff delay.
6. The backoff delay is honoured where the restarted tasks start: a task whose try is the first after a clear of
   a decision with ``apply_at`` in the future waits until then (:func:`restart_wait`) before it runs — the step
   operator reschedules itself to that time, so no worker slot is held meanwhile.
Why REST and not the ORM: the worker, where an ordinary failure is seen, has no metadata-DB access in Airflow 3;
the public API is versioned, authorised and audited, and the same code runs in worker and scheduler.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from airflow_region_failover.airflow.decisions import DecisionLogs, open_decision
from airflow_region_failover.airflow.render import JobSpec, subtask_of, task_id_of
from airflow_region_failover.failover.availability import AvailabilityChecker
from airflow_region_failover.failover.decision import RestartDecision
from airflow_region_failover.failover.options import FailoverConfig, parse_options
from airflow_region_failover.failover.planner import plan_restart
from airflow_region_failover.failover.topology import FailoverTopology
from airflow_region_failover.graph.ids import PartitionId, SubtaskId
from airflow_region_failover.graph.model import Exchange, JobGraph
from airflow_region_failover.graph.subtasks import consumed_partitions

log = logging.getLogger(__name__)
STUCK_APPLYING_S = 60.0
MERGE_WINDOW_S = 1.0
"""A pending decision is cleared no earlier than this after it was created (or its delay, if shorter): failures
arriving meanwhile are merged into it. The backoff delay itself is enforced when the restarted tasks start."""


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


_TOPOLOGIES: dict[int, FailoverTopology] = {}


def topology_of(graph: JobGraph) -> FailoverTopology:
    """The failover topology of ``graph`` (cached per graph object: a DAG is parsed once per process)."""
    topo = _TOPOLOGIES.get(id(graph))
    if topo is None or topo.regions.graph is not graph:
        topo = _TOPOLOGIES[id(graph)] = FailoverTopology.build(graph)
    return topo


def plan_for(spec: JobSpec, subtask: SubtaskId, checker: AvailabilityChecker) -> RestartDecision:
    """The core's restart set for ``subtask`` under the job's failover strategy."""
    config = parse_options(spec.options, strict=False)
    return plan_restart(topology_of(spec.graph), subtask, checker, strategy=config.failover_strategy)


def reused_partitions(graph: JobGraph, restart: Iterable[SubtaskId]) -> list[str]:
    """BLOCKING partitions read by restarting subtasks whose producers do not restart: results reused."""
    restarting = set(restart)
    reused: set[PartitionId] = set()
    for subtask in restarting:
        for edge, parts in consumed_partitions(graph, subtask).items():
            if edge.exchange is Exchange.BLOCKING:
                reused.update(p for p in parts if SubtaskId(edge.source, p.index) not in restarting)
    return sorted(str(p) for p in reused)


# -- recording a failure (pure function of the log; runs inside a CAS loop) --------------------------------------
def record_failure(doc: dict[str, Any], event: FailureEvent, spec: JobSpec,
                   plan: RestartDecision | None, now: float) -> Outcome:
    """Apply rules 1-4 to the run log ``doc`` in place (``plan`` is the core's decision for this failure)."""
    if event.key in doc["events"]:
        return Outcome("duplicate", doc["events"][event.key].get("decision"))
    subtask = subtask_of(event.task_id)
    if subtask is None or plan is None:
        return Outcome("ignored")
    cleared = doc["cleared_tries"].get(event.task_id)
    if cleared is not None and event.try_number <= cleared:
        doc["events"][event.key] = {"stale": True, "at": now}
        return Outcome("stale")
    current = open_decision(doc)
    if current is not None and current["status"] == "applying" and event.task_id in current["restart"]:
        doc["events"][event.key] = {"stale": True, "decision": current["id"], "at": now}
        return Outcome("stale", current["id"])
    config = parse_options(spec.options, strict=False)
    strategy, budget = _restore(doc, config, now)
    strategy.notify_failure(int(now * 1000))
    budget.record(str(subtask))
    exhausted = budget.exhausted() or _strategy_refuses(strategy, config)
    doc["strategy_state"], doc["budget_state"] = strategy.state_dict(), budget.state_dict()
    left = _budget_left(config, budget, strategy)
    if exhausted:
        return _exhaust(doc, event, plan, exhausted, left, now)
    if current is not None and current["status"] == "pending":
        return _merge(doc, current, event, plan, left, now)
    return _create(doc, event, spec, plan, strategy.get_backoff_time() / 1000.0, left, now)


def _restore(doc: dict[str, Any], config: FailoverConfig, now: float) -> tuple[Any, Any]:
    def clock() -> int:
        return int(now * 1000)

    strategy = (config.restore_strategy(doc["strategy_state"], clock) if doc["strategy_state"]
                else config.create_strategy(clock))
    budget = config.restore_budget(doc["budget_state"]) if doc["budget_state"] else config.create_budget()
    return strategy, budget


def _strategy_refuses(strategy: Any, config: FailoverConfig) -> str | None:
    if strategy.can_restart():
        return None
    opts = config.to_options()
    shown = ", ".join(f"{k}={v}" for k, v in sorted(opts.items()) if k.startswith("restart-strategy"))
    return f"restart strategy '{config.restart_strategy.type_name}' allows no further restart ({shown})"


def _budget_left(config: FailoverConfig, budget: Any, strategy: Any) -> dict[str, Any]:
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


def _decision_base(doc: dict[str, Any], event: FailureEvent, status: str, now: float) -> dict[str, Any]:
    decision = {"id": len(doc["decisions"]) + 1, "status": status, "created": now, "failures": [event.to_dict()]}
    doc["events"][event.key] = {"decision": decision["id"], "at": now}
    return decision


def _create(doc: dict[str, Any], event: FailureEvent, spec: JobSpec, plan: RestartDecision, delay: float,
            left: dict[str, Any], now: float) -> Outcome:
    decision = _decision_base(doc, event, "pending", now)
    decision.update({
        "strategy": plan.strategy, "delay_s": delay, "apply_at": now + delay, "budget": left,
        "regions": [r.to_dict() for r in plan.regions],
        "restart": [task_id_of(s) for s in plan.restart],
        "reused": reused_partitions(spec.graph, plan.restart),
    })
    doc["decisions"].append(decision)
    return Outcome("created", decision["id"], decision["apply_at"])


def _merge(doc: dict[str, Any], current: dict[str, Any], event: FailureEvent, plan: RestartDecision,
           left: dict[str, Any], now: float) -> Outcome:
    current["failures"].append(event.to_dict())
    doc["events"][event.key] = {"decision": current["id"], "at": now, "merged": True}
    known = {r["region"] for r in current["regions"]}
    current["regions"].extend(r.to_dict() for r in plan.regions if r.region.id not in known)
    current["restart"] = sorted(set(current["restart"]) | {task_id_of(s) for s in plan.restart})
    current["budget"] = left
    current["merged"] = len(current["failures"])
    return Outcome("merged", current["id"], current["apply_at"])


def _exhaust(doc: dict[str, Any], event: FailureEvent, plan: RestartDecision, reason: str,
             left: dict[str, Any], now: float) -> Outcome:
    current = open_decision(doc)
    if current is not None and current["status"] == "pending":
        current["status"] = "cancelled"
        current["reason"] = f"cancelled: a later failure exhausted the budget ({reason})"
    decision = _decision_base(doc, event, "exhausted", now)
    decision.update({"strategy": plan.strategy, "reason": reason, "budget": left,
                     "regions": [r.to_dict() for r in plan.regions], "restart": []})
    doc["decisions"].append(decision)
    return Outcome("exhausted", decision["id"])


# -- applying a due decision ----------------------------------------------------------------------------------
def _claim(now: float, who: str) -> Callable[[dict[str, Any]], dict[str, Any] | None]:
    def change(doc: dict[str, Any]) -> dict[str, Any] | None:
        current = open_decision(doc)
        if current is None:
            return None
        stuck = current["status"] == "applying" and now - current.get("claimed_at", now) > STUCK_APPLYING_S
        if (current["status"] == "pending" and clear_at(current) <= now) or stuck:
            current.update(status="applying", claimed_at=now, claimed_by=who)
            return dict(current)
        return None

    return change


def _mark_applied(decision_id: int, cleared: list[dict[str, Any]], now: float) -> Callable[[dict[str, Any]], None]:
    def change(doc: dict[str, Any]) -> None:
        decision = doc["decisions"][decision_id - 1]
        decision.update(status="applied", applied_at=now, cleared=len(cleared),
                        restarting_time_s=round(now - decision["failures"][0]["at"], 3))
        for ti in cleared:
            doc["cleared_tries"][ti["task_id"]] = int(ti.get("try_number") or 0)

    return change


def apply_due(logs: DecisionLogs, api: Any, dag_id: str, run_id: str, who: str,
              now: Callable[[], float] = time.time) -> dict[str, Any] | None:
    """Claim the run's due decision (if any), clear its tasks, mark it applied; return it (or None).

    A failed clear leaves it ``applying``; the watcher retries it after :data:`STUCK_APPLYING_S`.
    """
    _, claimed = logs.update(dag_id, run_id, _claim(now(), who))
    if claimed is None:
        return None
    cleared = api.clear(dag_id, run_id, claimed["restart"])
    doc, _ = logs.update(dag_id, run_id, _mark_applied(claimed["id"], cleared, now()))
    applied = doc["decisions"][claimed["id"] - 1]
    from airflow_region_failover.airflow import history

    history.emit_metrics(dag_id, applied)
    history.publish_note(api, doc)
    return dict(applied)


def restart_wait(doc: dict[str, Any], task_id: str, try_number: int, now: float) -> float:
    """Seconds the try ``try_number`` of ``task_id`` must still wait for its restart delay (0 if none).

    Only the first try after the clear of an applied decision that restarts ``task_id`` waits (rule 6).
    """
    cleared = doc["cleared_tries"].get(task_id)
    if cleared is None or try_number != int(cleared) + 1:
        return 0.0
    for decision in reversed(doc["decisions"]):
        if decision["status"] == "applied" and task_id in decision["restart"]:
            return max(0.0, float(decision["apply_at"]) - now)
    return 0.0


def publish_exhausted(api: Any, doc: dict[str, Any]) -> None:
    """Tell the UI why the run will fail (run note); never raises."""
    from airflow_region_failover.airflow import history

    history.publish_note(api, doc)

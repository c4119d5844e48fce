"""What ``region-failover plan`` says about reuse: which restarted consumers may keep their committed result.

The run-time rule (:mod:`airflow_region_failover.spark.reuse`) keeps a consumer restarted by the cascade when
what it reads comes back byte-identical and its code did not change; it compares, it does not predict. A plan
can only hint, per subtask of a ``consumer`` region of a ``region`` plan:

* ``reruns: it exchanges PIPELINED data`` — a PIPELINED input or output is never kept;
* ``may be kept if re-produced identically (producers declared deterministic)`` — every restarting producer it
  reads is declared ``deterministic``, so its input is expected to come back identical;
* ``kept only if what it reads comes back byte-identical`` — otherwise (checked at run time).
"""

from __future__ import annotations

from airflow_region_failover.failover.options import FailoverStrategy
from airflow_region_failover.failover.restart_plan import Reason, RestartPlan
from airflow_region_failover.graph.elements import Exchange
from airflow_region_failover.graph.model import JobGraph

PIPELINED = "reruns: it exchanges PIPELINED data"
DETERMINISTIC = "may be kept if re-produced identically (producers declared deterministic)"
CHECKED = "kept only if what it reads comes back byte-identical (checked at run time)"


def reuse_hints(graph: JobGraph, plan: RestartPlan) -> dict[str, str]:
    """``subtask id -> hint`` for every subtask of a consumer region of ``plan`` (module rule)."""
    if plan.strategy is not FailoverStrategy.REGION:
        return {}
    restarting = {s.step for s in plan.restart}
    hints: dict[str, str] = {}
    for restart in plan.regions:
        if restart.reason is not Reason.CONSUMER:
            continue
        for subtask in restart.region.subtasks:
            hints[str(subtask)] = _hint(graph, subtask.step, restarting)
    return hints


def _hint(graph: JobGraph, step: str, restarting: set[str]) -> str:
    inputs = graph.inputs(step)
    if any(e.exchange is Exchange.PIPELINED for e in inputs) or \
            any(r.exchange is Exchange.PIPELINED for r in graph.outputs(step)):
        return PIPELINED
    producers = {e.source for e in inputs if e.source in restarting}
    if producers and all(graph.step(p).deterministic for p in producers):
        return DETERMINISTIC
    return CHECKED

"""The dry-run tab's section on a DAG's AUTO edges: the planner's decision as HTML (``region-failover advise``
prints the same decision as text).

Rules: one row per AUTO result — the choice, the expected completion time with it persisted and with it fused
(the other results as chosen), the figures used (bytes, write and read-back seconds) with the runs they came
from (their count, and every run id in the cell's ``title``), and why it stays BLOCKING when it must; then the
expected completion time and spread at the measured failure rates of every AUTO result BLOCKING, every one
fused (one Spark application) and the chosen plan. No decision (no AUTO edge, a history the planner cannot
cost, the store unreachable): the note, and the expected completion time of the plan as declared when the history
costs it (a job without AUTO edges whose sliced chains or AUTO-epochs steps the planner sizes). Everything shown is
escaped.
"""

from __future__ import annotations

from html import escape

from airflow_region_failover.planning.choice import Decision
from airflow_region_failover.planning.estimates import Figure
from airflow_region_failover.planning.model import PlanCost


def advice_section(decision: Decision | None, note: str = "", declared: PlanCost | None = None) -> str:
    """The section (module rules)."""
    head = '<h3 id="rf-auto">AUTO edges: what to persist</h3>'
    if decision is None:
        plans = "" if declared is None else _plans_table(_plan_row("as declared", declared))
        return f'{head}<p id="rf-auto-note">{escape(note)}</p>{plans}'
    rate = decision.rate
    intro = (f"{len(rate.runs)} run(s) of history; failure rate {rate.per_task_hour:.3g} per task-hour "
             f"({rate.failures} failed tries in {rate.task_hours:.3g} task-hours). {decision.reason}. Planner: "
             f"{decision.policy.describe()}.")
    rows = []
    figures = decision.estimates
    for edge in decision.edges:
        found = None if figures is None else figures.results.get(edge.result)
        used = ("not measured" if found is None else
                f"{found.bytes.value / 1e6:.1f} MB {_runs(found.bytes)}, write {_seconds(found.write_seconds)}, "
                f"read {_seconds(found.read_seconds)}")
        runs = "" if found is None else ", ".join(found.bytes.runs)
        pinned = f"; stays BLOCKING: {edge.pinned}" if edge.pinned else ""
        rows.append(f'<tr data-result="{escape(edge.result)}"><td>{escape(edge.result)}</td>'
                    f'<td class="rf-choice">{escape(edge.choice.value)}</td><td>{_time(edge.persist)}</td>'
                    f'<td>{_time(edge.fuse)}</td><td title="{escape(runs)}">{escape(used + pinned)}</td></tr>')
    edges = ("<table id=\"rf-auto-edges\"><tr><th>AUTO result</th><th>choice</th><th>expected if persisted</th>"
             f"<th>expected if fused</th><th>figures (runs)</th></tr>{''.join(rows)}</table>")
    plans = "".join(_plan_row(name, cost) for name, cost in (("all BLOCKING", decision.all_blocking),
                                                             ("all fused (one Spark application)", decision.all_fused),
                                                             ("chosen", decision.chosen)))
    return f'{head}<p id="rf-auto-note">{escape(intro)}</p>{edges}{_plans_table(plans)}'


def _plans_table(rows: str) -> str:
    return ("<table id=\"rf-auto-plans\"><tr><th>plan</th><th>expected completion</th><th>spread</th>"
            f"<th>fused</th></tr>{rows}</table>")


def _plan_row(name: str, cost: PlanCost | None) -> str:
    if cost is None:
        return f"<tr><td>{escape(name)}</td><td>-</td><td>-</td><td>not costed: too little history</td></tr>"
    fused = ", ".join(cost.plan.fused) or "none"
    return (f"<tr><td>{escape(name)}</td><td>{cost.expected:.1f} s</td><td>{cost.spread:.1f} s</td>"
            f"<td>{escape(fused)}</td></tr>")


def _time(seconds: float | None) -> str:
    return "-" if seconds is None else f"{seconds:.1f} s"


def _seconds(figure: Figure) -> str:
    return f"{figure.value:.1f} s {'(estimated from bytes)' if figure.estimated else _runs(figure)}"


def _runs(figure: Figure) -> str:
    return "(default)" if not figure.runs else f"({len(figure.runs)} runs)"

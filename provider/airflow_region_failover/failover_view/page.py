"""The failover view of a run and the dry-run view of a DAG: their JSON model and their HTML page.

Rules:

* **One model, two forms.** :func:`run_model` builds the JSON the ``/api/run`` route returns (documented in
  docs/reference/view-api.md); the HTML page is drawn from that same model plus the SVG, so the two never
  disagree.
* **Subtask states** are the states of the run's task instances: a chain task's state is the state of every
  subtask it runs.
* **Timeline** of each decision: the failures it answers -> the decision -> the clear -> the rerun done.
  The rerun is *done* when every task the decision cleared has succeeded with a later try (at the last end time
  among them); a later decision *supersedes* it; otherwise it is *in progress*. Each decision shows the budget
  left as it recorded it.
* **Failover regions of a decision** carry the reason the planner gave (failed / producer-unavailable / consumer / full)
  and its cause; every other region is *kept*. The run page and the dry run list them in one table
  (failover region, reason, cause, subtasks) under the graph. What a person reads says *failover region*, never a
  bare "region" (Airflow 3.4 has regions of its own).
* **The graph fits the tab** (:mod:`.svg`): drawn to its box's width, never wider than its natural size. The dry
  run draws no task-instance states (there is no run) and its legend shows none.
* **Checkpoints** of checkpointed steps (:mod:`~..checkpoint`): where each try of a checkpointed subtask started —
  *resumed* from a checkpoint (and how many epochs it skipped) or *started over* (and why) — and every checkpoint
  completed (epoch, bytes uploaded, duration), in time order, from the store's records of the run.
* **The run's plan** (:mod:`.run_plan`), for a job whose runs fix one: what the run runs of its AUTO results and
  how many epochs its AUTO-epochs steps run, and why; the dry run shows the plan the next run will fix.
* Everything from the run, the DAG or a failure (ids, error texts) is escaped; the page has no script and loads
  nothing: it works in the UI's same-origin iframe and behind a reverse proxy (links are relative to the
  app's mount path given by the caller).

No Airflow calls: the caller passes the run's task instances and decision log.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timezone
from html import escape
from typing import Any
from urllib.parse import quote

from airflow_region_failover.failover.restart_plan import RestartPlan
from airflow_region_failover.failover.run_log import Decision, DecisionStatus, RunLog
from airflow_region_failover.failover_view.run_plan import ShownPlan, plan_section
from airflow_region_failover.failover_view.svg import (
    KEPT,
    REASON_COLOURS,
    STATE_COLOURS,
    CellState,
    Highlight,
    render_svg,
)
from airflow_region_failover.graph.ids import PartitionId, SubtaskId
from airflow_region_failover.job import JobSpec
from airflow_region_failover.naming import region_label
from airflow_region_failover.store.checkpoint_manifest import CompletedNote, TryRecord

Checkpoints = Sequence[tuple[PartitionId, TryRecord | CompletedNote]]

_STYLE = ("body{font-family:sans-serif;margin:12px;color:#222}h2{font-size:18px;margin:4px 0}"
          "table{border-collapse:collapse;font-size:13px}td,th{border:1px solid #ccc;padding:3px 6px;"
          "text-align:left;vertical-align:top}.legend span{display:inline-block;margin-right:10px;font-size:12px}"
          ".sw{display:inline-block;width:12px;height:12px;border:1px solid #666;margin-right:3px;"
          "vertical-align:middle}.graph{overflow:auto;border:1px solid #ddd;margin:8px 0}"
          "nav a{margin-right:10px}.sel{font-weight:bold}td:nth-child(2){white-space:nowrap}")


@dataclass(frozen=True)
class TaskRow:
    """One task instance of the run: its task id, state, try number and end time (epoch seconds)."""

    task_id: str
    state: str | None
    try_number: int = 0
    end: float | None = None


def when(ts: float | None) -> str | None:
    """``ts`` (epoch seconds) as ISO-8601 UTC with milliseconds, or ``None``."""
    if ts is None:
        return None
    return datetime.fromtimestamp(ts, tz=timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + "Z"


def cell_states(spec: JobSpec, rows: Sequence[TaskRow]) -> dict[SubtaskId, CellState]:
    """Every subtask's state in the run (a chain task's state for each subtask it runs)."""
    out: dict[SubtaskId, CellState] = {}
    for row in rows:
        for subtask in spec.names.subtasks(row.task_id) or ():
            out[subtask] = CellState(row.state, row.try_number, row.task_id)
    return out


def rerun(decision: Decision, later: Decision | None, rows: Sequence[TaskRow]) -> dict[str, Any]:
    """Where the rerun of an applied decision stands (module rule): ``done`` with ``at``, ``superseded`` by a
    later decision, or ``in progress``."""
    if later is not None:
        return {"status": "superseded", "by": later.id}
    by_task = {r.task_id: r for r in rows}
    cleared = [by_task.get(t) for t in decision.restart]
    if cleared and all(r is not None and r.state == "success" and r.end is not None
                       and (decision.applied_at is None or r.end >= decision.applied_at) for r in cleared):
        return {"status": "done", "at": max(r.end for r in cleared if r is not None and r.end is not None)}
    return {"status": "in progress"}


def timeline(decision: Decision, later: Decision | None, rows: Sequence[TaskRow]) -> list[dict[str, Any]]:
    """The decision's events in order: failure(s) -> decision -> clear -> rerun done (module rule)."""
    events: list[dict[str, Any]] = [
        {"event": "failure", "at": f.at, "task_id": f.task_id, "try_number": f.try_number, "error": f.error[:300],
         **({} if f.error_class is None else {"error_class": f.error_class.name,
                                              "signature": f.error_class.signature})}
        for f in decision.failures]
    events.append({"event": "decision", "at": decision.created, "status": decision.status.value,
                   "strategy": decision.strategy, "delay_s": decision.delay_s, "reason": decision.reason})
    if decision.applied_at is not None:
        events.append({"event": "clear", "at": decision.applied_at, "tasks": len(decision.restart),
                       "restarting_time_s": decision.restarting_time_s})
    if decision.status is DecisionStatus.APPLIED:
        done = rerun(decision, later, rows)
        events.append({"event": "rerun", **done})
    return events


def highlights(decision: Decision | None) -> dict[str, Highlight] | None:
    """Region id -> why it restarts in ``decision`` (``None``: no decision to show)."""
    if decision is None:
        return None
    return {r.region: Highlight(r.reason, r.cause) for r in decision.regions}


def checkpoint_events(spec: JobSpec, records: Checkpoints) -> list[dict[str, Any]]:
    """The checkpoint events of a run in time order (module rule): ``resumed`` / ``started over`` per try of a
    checkpointed subtask, ``checkpoint`` per completed checkpoint."""
    events = []
    for subtask, record in records:
        task = SubtaskId(subtask.result, subtask.index)
        known = task.step in {s.id for s in spec.graph.steps}
        base = {"subtask": str(task), "task_id": spec.names.task_id(task) if known else "",
                "try_number": record.try_number}
        if isinstance(record, TryRecord):
            resumed = record.resumed_seq > 0
            events.append({**base, "event": "resumed" if resumed else "started over", "at": _ts(record.started_at),
                           "checkpoint": record.resumed_seq, "skipped": record.skipped, "epochs": record.epochs,
                           "reason": record.reason})
        else:
            events.append({**base, "event": "checkpoint", "at": _ts(record.committed_at), "checkpoint": record.seq,
                           "epoch": record.epoch, "epochs": record.epochs, "uploaded_bytes": record.uploaded_bytes,
                           "state_bytes": record.state_bytes, "duration_ms": record.duration_ms})
    return sorted(events, key=lambda e: (e["at"] or 0.0, e["subtask"], e["event"] == "checkpoint"))


def _ts(iso: str) -> float | None:
    try:
        return datetime.fromisoformat(iso).timestamp()
    except ValueError:
        return None


def run_model(spec: JobSpec, doc: RunLog, rows: Sequence[TaskRow], checkpoints: Checkpoints = (),
              plan: ShownPlan | None = None) -> dict[str, Any]:
    """The JSON of a run's failover view (module rules; keys documented in docs/reference/view-api.md); ``plan``:
    the run's plan, for a job whose runs fix one (:mod:`.run_plan`)."""
    states = cell_states(spec, rows)
    decisions = []
    for i, d in enumerate(doc.decisions):
        later = doc.decisions[i + 1] if i + 1 < len(doc.decisions) else None
        restarted = {r.region: r for r in d.regions}
        decisions.append({
            "id": d.id, "status": d.status.value, "epoch": d.epoch, "strategy": d.strategy,
            "failed": sorted({f.task_id for f in d.failures}), "restart": list(d.restart),
            "reused": list(d.reused), "budget": dict(d.budget), "timeline": timeline(d, later, rows),
            "regions": {region.id: ({"reason": restarted[region.id].reason, "cause": restarted[region.id].cause}
                                    if region.id in restarted else {"reason": KEPT})
                        for region in spec.topology.regions.regions},
        })
    return {
        "dag_id": doc.dag_id, "run_id": doc.run_id, "graph": graph_model(spec, states),
        "decisions": decisions, "budget": dict(doc.decisions[-1].budget) if doc.decisions else {},
        "checkpoints": checkpoint_events(spec, checkpoints),
        "plan": None if plan is None else plan.model(spec),
    }


def graph_model(spec: JobSpec, states: Mapping[SubtaskId, CellState]) -> dict[str, Any]:
    """Steps (with every subtask's task, region and state), edges and regions of the job graph."""
    regions = spec.topology.regions
    steps = []
    for step in spec.graph.steps:
        subtasks = []
        for i in range(step.parallelism):
            sub = SubtaskId(step.id, i)
            cell = states.get(sub)
            subtasks.append({"subtask": str(sub), "task_id": spec.names.task_id(sub),
                             "region": regions.region_of(sub).id, "state": cell.state if cell else None,
                             "try_number": cell.try_number if cell else 0})
        steps.append({"id": step.id, "parallelism": step.parallelism, "subtasks": subtasks})
    edges = [{"source": e.source, "target": e.target, "result": e.result, "exchange": e.exchange.value,
              "distribution": e.distribution.value} for e in spec.graph.edges]
    return {"steps": steps, "edges": edges,
            "regions": [{"id": r.id, "label": region_label(r), "subtasks": [str(s) for s in r.subtasks]}
                        for r in regions.regions]}


def run_page(spec: JobSpec, doc: RunLog, rows: Sequence[TaskRow], selected: int | None, base: str,
             checkpoints: Checkpoints = (), plan: ShownPlan | None = None) -> str:
    """The failover view of a run: the graph of the selected decision (default: the latest), the timeline, the
    checkpoints and the run's plan. ``base``: the app's mount path (links)."""
    model = run_model(spec, doc, rows, checkpoints, plan)
    chosen = _chosen(doc, selected)
    failed = [s for f in (chosen.failures if chosen else ()) for s in (spec.names.subtasks(f.task_id) or ())[:1]]
    title = f"Region failover — {doc.dag_id} / {doc.run_id}"
    caption = (f"decision #{chosen.id} ({chosen.status.value})" if chosen else "no failover decision recorded")
    svg = render_svg(spec.topology.regions, cell_states(spec, rows), highlights(chosen), failed, f"{title}: {caption}")
    dag = quote(doc.dag_id, safe="")
    run = quote(doc.run_id, safe="")
    nav = [f'<a href="{escape(base)}/api/run/{dag}/{run}">JSON</a>',
           f'<a href="{escape(base)}/plan/{dag}">What would restart if… (dry run)</a>']
    for d in doc.decisions:
        cls = ' class="sel"' if chosen is not None and d.id == chosen.id else ""
        nav.append(f'<a{cls} href="{escape(base)}/run/{dag}/{run}?decision={d.id}">decision #{d.id}</a>')
    body = [f"<h2>{escape(title)}</h2>", f"<nav>{''.join(nav)}</nav>",
            f'<p id="rf-caption">Showing {escape(caption)}. {_summary(chosen)}</p>',
            f'<div class="graph">{svg}</div>', _legend(states=True)]
    if chosen is not None and chosen.regions:
        body.append(_regions_table([(r.region, r.reason, r.cause, r.subtasks) for r in chosen.regions]))
    body += ["<h3>Timeline</h3>", _timeline_table(model["decisions"])]
    if model["checkpoints"]:
        body += ["<h3>Checkpoints</h3>", _checkpoint_table(model["checkpoints"])]
    body.append(plan_section(model["plan"], "The run's plan"))
    return _document(title, body)


def plan_page(spec: JobSpec, dag_id: str, plan: RestartPlan | None, reuse: Mapping[str, str], base: str,
              failed: str = "", unavailable: str = "", auto: str = "", next_plan: ShownPlan | None = None) -> str:
    """The dry-run view: the form (failed subtask, partitions gone) and, once asked, the graph of the plan;
    ``next_plan``: the plan the next run will fix (:mod:`.run_plan`); ``auto``: the section on the AUTO edges
    (HTML, :mod:`.advice`), last."""
    title = f"Region failover dry run — {dag_id}"
    options = "".join(f'<option value="{escape(str(s))}"{" selected" if str(s) == failed else ""}>'
                      f"{escape(str(s))}</option>" for r in spec.topology.regions.regions for s in r.subtasks)
    form = (f'<form method="get" action="{escape(base)}/plan/{quote(dag_id, safe="")}">'
            f'If <select name="failed" id="rf-failed">{options}</select> failed'
            f' and these partitions were gone <input name="unavailable" size="30" value="{escape(unavailable)}" '
            'placeholder="e.g. clean->join#0 (comma separated)"> <button type="submit">show</button></form>')
    chosen = {r.region.id: Highlight(r.reason.value, r.cause) for r in plan.regions} if plan else None
    svg = render_svg(spec.topology.regions, None, chosen, [plan.failed] if plan else [], title)
    if plan is None:
        caption = "Choose a subtask: the planner shows which failover regions would restart, and why."
    else:
        caption = (f"If {plan.failed} failed ({plan.strategy.value} strategy), {len(plan.restart)} subtask(s) in "
                   f"{len(plan.regions)} failover region(s) would restart; every BLOCKING result not listed as gone is "
                   "taken as committed.")
    hints = "".join(f"<li>{escape(k)}: {escape(v)}</li>" for k, v in sorted(reuse.items()))
    body = [f"<h2>{escape(title)}</h2>", form, f'<p id="rf-caption">{escape(caption)}</p>',
            f'<div class="graph">{svg}</div>', _legend(states=False)]
    if plan is not None:
        body.append(_regions_table([(r.region.id, r.reason.value, r.cause, tuple(str(s) for s in r.region.subtasks))
                                    for r in plan.regions]))
    if hints:
        body.append(f"<h3>Could keep their committed results</h3><ul>{hints}</ul>")
    body.append(plan_section(None if next_plan is None else next_plan.model(spec), "The next run's plan"))
    if auto:
        body.append(auto)
    return _document(title, body)


def _chosen(doc: RunLog, selected: int | None) -> Decision | None:
    if not doc.decisions:
        return None
    if selected is not None and 1 <= selected <= len(doc.decisions):
        return doc.decision(selected)
    return doc.decisions[-1]


def _summary(decision: Decision | None) -> str:
    if decision is None:
        return ""
    regions = ", ".join(f"{r.region} ({r.reason})" for r in decision.regions) or "none"
    return escape(f"Restarted failover regions: {regions}. Budget left: {_budget(decision.budget)}.")


def _budget(budget: Mapping[str, Any]) -> str:
    return ", ".join(f"{k.replace('_', ' ')} {v}" for k, v in sorted(budget.items())) or "-"


def _regions_table(rows: Sequence[tuple[str, str, str, Sequence[str]]]) -> str:
    """Why each region restarts: region, reason, cause, subtasks — one table for the run and the dry run."""
    body = "".join(f'<tr data-region="{escape(region)}"><td>{escape(region)}</td><td>{escape(reason)}</td>'
                   f"<td>{escape(cause)}</td><td>{escape(', '.join(subtasks))}</td></tr>"
                   for region, reason, cause, subtasks in rows)
    return ('<table id="rf-regions"><tr><th>failover region</th><th>reason</th><th>cause</th><th>subtasks</th></tr>'
            f"{body}</table>")


def _legend(*, states: bool) -> str:
    """The colours' meaning; ``states``: the run's task-instance states too (the dry run has none)."""
    shown = "".join(f'<span><i class="sw" style="background:{c}"></i>{escape(s)}</span>'
                    for s, c in [*STATE_COLOURS.items(), ("none", "#ffffff")] if s in _SHOWN_STATES)
    reasons = "".join(f'<span><i class="sw" style="border:3px solid {c}"></i>{escape(r)}</span>'
                      for r, c in REASON_COLOURS.items())
    return (f'<div class="legend">{f"States: {shown}<br>" if states else ""}Restart reasons: {reasons}'
            '<span><i class="sw" style="opacity:.3;background:#ccc"></i>kept</span>'
            "<br>Edges: solid = PIPELINED (lost on failure), dashed = BLOCKING (committed to S3)</div>")


_SHOWN_STATES = frozenset({"success", "failed", "upstream_failed", "up_for_retry", "running", "queued",
                           "scheduled", "none"})


def _timeline_table(decisions: Sequence[Mapping[str, Any]]) -> str:
    if not decisions:
        return "<p>No failover decision recorded for this run.</p>"
    rows = []
    for d in decisions:
        for event in d["timeline"]:
            rows.append(f'<tr class="rf-event" data-event="{escape(event["event"])}"><td>#{d["id"]}</td>'
                        f"<td>{escape(when(event.get('at')) or '-')}</td><td>{escape(event['event'])}</td>"
                        f"<td>{escape(_describe(event, d))}</td></tr>")
    return ('<table id="rf-timeline"><tr><th>decision</th><th>at (UTC)</th><th>event</th><th>what</th></tr>'
            f"{''.join(rows)}</table>")


def _checkpoint_table(events: Sequence[Mapping[str, Any]]) -> str:
    rows = []
    for event in events:
        if event["event"] == "checkpoint":
            what = (f"checkpoint {event['checkpoint']} after epoch {event['epoch']} of {event['epochs']}: "
                    f"{event['uploaded_bytes']} of {event['state_bytes']} state bytes uploaded, "
                    f"{event['duration_ms']} ms")
        elif event["event"] == "resumed":
            what = (f"resumed from checkpoint {event['checkpoint']}: {event['skipped']} of {event['epochs']} epochs "
                    "skipped")
        else:
            what = event["reason"]
        rows.append(f'<tr class="rf-checkpoint" data-event="{escape(event["event"])}"><td>{escape(event["task_id"])}'
                    f"</td><td>{event['try_number']}</td><td>{escape(when(event['at']) or '-')}</td>"
                    f"<td>{escape(event['event'])}</td><td>{escape(what)}</td></tr>")
    return ('<table id="rf-checkpoints"><tr><th>task</th><th>try</th><th>at (UTC)</th><th>event</th><th>what</th>'
            f"</tr>{''.join(rows)}</table>")


def _describe(event: Mapping[str, Any], decision: Mapping[str, Any]) -> str:
    kind = event["event"]
    if kind == "failure":
        shown = f", {event['error_class']}" if event.get("error_class") else ""
        return f"{event['task_id']} failed (try {event['try_number']}{shown}): {event['error']}"
    if kind == "decision":
        restarted = [f"{r} ({v['reason']})" for r, v in decision["regions"].items() if v["reason"] != KEPT]
        text = f"{event['status']}, strategy {event['strategy'] or '-'}, delay {event['delay_s']:.3f} s"
        text += f"; restart {', '.join(restarted) or 'nothing'}; budget left: {_budget(decision['budget'])}"
        return text + (f"; {event['reason']}" if event.get("reason") else "")
    if kind == "clear":
        return f"cleared {event['tasks']} task(s), {event.get('restarting_time_s') or 0:.3f} s after the failure"
    if event.get("status") == "superseded":
        return f"superseded by decision #{event['by']}"
    return "rerun done: every cleared task succeeded" if event.get("status") == "done" else "rerun in progress"


def _document(title: str, body: list[str]) -> str:
    return (f"<!doctype html><html><head><meta charset='utf-8'><title>{escape(title)}</title>"
            f"<style>{_STYLE}</style></head><body>{''.join(body)}</body></html>")

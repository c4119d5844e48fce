"""The plan a run runs, on its Failover tab, and the plan the next run will fix, on the dry run.

Rules:

* **Which jobs.** A job whose runs fix a plan (:func:`planned`): rendered ``PER_RUN`` with AUTO results, or with
  ``Checkpoint(epochs="AUTO")`` steps, or with sliced chains (:mod:`~..graph.slicing`). Any other job runs its
  rendered graph: no section, and ``plan`` is ``null`` in the run's JSON.
* **What it shows** (:class:`ShownPlan`): the stored :class:`~..planning.stored.RunPlan` of the run (``fixed``) —
  when it was fixed, why (the decision's reason), the decision it copied — or, for a run whose first task has not
  fixed one yet and for the dry run, the plan the next run will fix: the decision stored for it
  (:meth:`~..planning.stored.RunPlan.of`; none stored: every AUTO result BLOCKING). The view never fixes a plan.
* **Per AUTO result** what the run runs (:func:`~..graph.auto.run_choices`: FUSED only where the rendered tasks fuse
  it), **per AUTO-epochs step** the epochs the run runs and why (:meth:`~..planning.stored.RunPlan.epochs_of`: the
  ones fixed with the plan, else the default), and per sliced chain (by head step) its epochs
  (:meth:`~..planning.stored.RunPlan.slices_of`) — the numbers the tasks use, not a second computation of them.
* Everything shown is escaped.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timezone
from html import escape
from typing import Any

from airflow_region_failover.graph.auto import run_choices
from airflow_region_failover.job import JobSpec
from airflow_region_failover.planning.stored import RunPlan


def planned(spec: JobSpec) -> bool:
    """Whether ``spec``'s runs fix a plan (module rule)."""
    return bool(spec.auto.per_run and spec.auto.results) or bool(spec.auto_epochs) or bool(spec.sliced)


@dataclass(frozen=True)
class ShownPlan:
    """A run's plan as the view shows it: ``plan`` the run fixed (``fixed``), or the one the next run will fix."""

    plan: RunPlan
    fixed: bool

    def model(self, spec: JobSpec) -> dict[str, Any]:
        """The JSON (keys documented in docs/reference/view-api.md)."""
        plan, decision = self.plan, self.plan.decision
        results = run_choices(spec.auto, plan.plan) if spec.auto.per_run else None
        return {
            "state": "fixed" if self.fixed else "next", "reason": plan.reason,
            "fixed_at": plan.fixed_at if self.fixed else None,
            "decision": None if decision is None else {"id": decision.id, "decided_at": decision.decided_at,
                                                       "after_run": decision.after_run},
            "results": {} if results is None else {r: c.value for r, c in sorted(results.choices.items())},
            "epochs": {**{step: plan.epochs_of(step, most).to_json()
                          for step, most in sorted(spec.auto_epochs.items())},
                       **{head: plan.slices_of(head).to_json() for head in sorted(spec.sliced)}},
        }


def plan_section(model: dict[str, Any] | None, heading: str) -> str:
    """The HTML of :meth:`ShownPlan.model` (``None``: no section) under ``heading``."""
    if model is None:
        return ""
    if model["state"] == "fixed":
        when = f"Fixed at {_when(model['fixed_at'])} by the run's first task"
    else:
        when = "Not fixed yet: the run's first task fixes the plan stored for the next run, which is"
    decided = model["decision"]
    source = ("no plan was decided before" if decided is None else
              f"decision {decided['id']} of {_when(decided['decided_at'])}"
              + (f", after run {decided['after_run']}" if decided["after_run"] else ""))
    parts = [f'<h3 id="rf-run-plan">{escape(heading)}</h3>',
             f'<p id="rf-run-plan-note">{escape(when)} ({escape(source)}): {escape(model["reason"])}</p>']
    if model["results"]:
        rows = "".join(f'<tr data-result="{escape(r)}"><td>{escape(r)}</td><td class="rf-choice">{escape(c)}</td>'
                       "</tr>" for r, c in model["results"].items())
        parts.append(f'<table id="rf-run-plan-results"><tr><th>AUTO result</th><th>runs</th></tr>{rows}</table>')
    if model["epochs"]:
        rows = "".join(f'<tr data-step="{escape(s)}"><td>{escape(s)}</td><td class="rf-epochs">{e["epochs"]}</td>'
                       f'<td>{escape(e["reason"])}</td></tr>' for s, e in model["epochs"].items())
        parts.append('<table id="rf-run-plan-epochs"><tr><th>checkpointed or sliced step</th><th>epochs</th>'
                     f"<th>why</th></tr>{rows}</table>")
    return "".join(parts)


def _when(ts: float) -> str:
    return datetime.fromtimestamp(ts, timezone.utc).strftime("%Y-%m-%d %H:%M:%S UTC")

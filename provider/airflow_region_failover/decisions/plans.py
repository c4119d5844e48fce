"""Where the plans of jobs rendered ``PER_RUN`` live (:mod:`~airflow_region_failover.planning.stored`), and how a
run's plan is fixed once.

Rules:

* the decision for a DAG's next run is one object, ``<prefix>/failover/v1/plans/<dag>/next.json``
  (:meth:`~..store.keys.Layout.next_plan`), written by the scheduler side (the watcher) when a run ends, or when
  none is stored; a later decision replaces it (:meth:`Plans.decide_next`);
* a run's plan is ``<prefix>/failover/v1/runs/<dag>/<run>/plan.json`` (:meth:`~..store.keys.Layout.run_plan`),
  beside the run's decision log. :meth:`Plans.fix` — called by the run's first task that needs it, and by the
  failover loop — returns it if it exists, else copies the decision stored now into it with a **conditional
  create** (``If-None-Match: *``): of two tasks racing, one create wins and both return what it wrote, so every
  task and try of the run runs one plan, however the next-run decision changes meanwhile. No decision stored: every
  AUTO result BLOCKING;
* the keys live under the failover root, outside the results' tree: the sweeper never takes them, and every
  request goes through the store's guarded objects layer, so no key leaves the configured bucket and prefix.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable

from airflow_region_failover.exceptions import AlreadyCommitted, ConditionFailed
from airflow_region_failover.planning.stored import PlanDecision, RunPlan
from airflow_region_failover.store.s3.objects import Objects


class Plans:
    """Read, decide and fix the stored plans of one deployment (module rules)."""

    def __init__(self, objects: Objects, clock: Callable[[], float] = time.time) -> None:
        self.objects = objects
        self.clock = clock

    def next(self, dag_id: str) -> PlanDecision | None:
        """The decision stored for ``dag_id``'s next run, or ``None``."""
        body = self.objects.get(self.objects.layout.next_plan(dag_id))
        return None if body is None else PlanDecision.from_json(json.loads(body))

    def decide_next(self, dag_id: str, decision: PlanDecision) -> None:
        """Store ``decision`` for ``dag_id``'s next run (replacing the one stored)."""
        self.objects.put(self.objects.layout.next_plan(dag_id), _encoded(decision.to_json()))

    def of_run(self, dag_id: str, run_id: str) -> RunPlan | None:
        """The plan fixed for run ``run_id``, or ``None`` (not fixed yet)."""
        body = self.objects.get(self.objects.layout.run_plan(dag_id, run_id))
        return None if body is None else RunPlan.from_json(json.loads(body))

    def fix(self, dag_id: str, run_id: str) -> RunPlan:
        """The run's plan: the one fixed, else the next-run decision copied now by a conditional create (module
        rule: a lost race returns the winner's)."""
        fixed = self.of_run(dag_id, run_id)
        if fixed is not None:
            return fixed
        chosen = RunPlan.of(self.next(dag_id), self.clock())
        try:
            self.objects.put_if_absent(self.objects.layout.run_plan(dag_id, run_id), _encoded(chosen.to_json()))
        except AlreadyCommitted:
            won = self.of_run(dag_id, run_id)
            if won is None:  # created by the winner of the race and deleted since: let the caller try again
                raise ConditionFailed(f"the plan of run {run_id!r} of {dag_id!r} vanished after its create") from None
            return won
        return chosen


def _encoded(body: object) -> bytes:
    return json.dumps(body, sort_keys=True).encode()

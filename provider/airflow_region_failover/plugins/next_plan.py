"""Deciding the plan of a DAG's next run, on the scheduler side (the watcher calls it).

Rules (a job rendered ``PER_RUN``; :mod:`~airflow_region_failover.decisions.plans` says where plans live):

* **when**: when one of the DAG's runs ends (the watcher saw it at work and no longer does), and when no decision
  is stored for a DAG whose runs the watcher sees (the first run after a deployment);
* **where**: in the scheduler, because the choice reads the DAG's failures from Airflow's metadata DB, which
  workers cannot reach (Airflow 3's Task SDK); the run's first task that needs the plan copies the stored decision
  into the run (:meth:`~airflow_region_failover.decisions.plans.Plans.fix`), so the plan is fixed when the run
  starts and never changes within it;
* **what**: the planner's choice (:func:`~.advice.advise`: hysteresis and a minimum history) over the DAG's
  history, each run with the plan it ran. A history the planner cannot cost keeps the stored decision's plan, in
  a decision after the run that says why (so every ended run has one); with none stored, every AUTO result
  BLOCKING, with the reason;
* **epochs**: a job with ``Checkpoint(epochs="AUTO")`` steps (``JobSpec.auto_epochs``, whatever its render mode)
  gets a decision too, carrying each such step's epochs for the next run (:func:`~.planning.epochs.choose_all`
  over the same history: Daly's interval from the step's measured work, checkpoint cost and failure rate, or the
  no-history default); a task of the run reads them from the run's plan (:meth:`~..decisions.plans.Plans.fix`),
  so a retry runs the same epochs and resumes its checkpoint. A job's sliced chains (``JobSpec.sliced``,
  :mod:`~..graph.slicing`) get theirs the same way (:func:`~.planning.epochs.choose_slices`).
"""

from __future__ import annotations

import secrets
import time
from collections.abc import Callable

from airflow_region_failover.decisions.plans import Plans
from airflow_region_failover.graph.auto import ExchangePlan
from airflow_region_failover.job import JobSpec
from airflow_region_failover.planning.history import HistorySource
from airflow_region_failover.planning.stored import PlanDecision
from airflow_region_failover.plugins.advice import advise


def decide_next(dag_id: str, spec: JobSpec, plans: Plans, after_run: str = "", source: HistorySource | None = None,
                clock: Callable[[], float] = time.time) -> PlanDecision | None:
    """Decide and store the plan of ``dag_id``'s next run (module rules), after run ``after_run`` (``""``: none
    ended); returns the decision stored, or ``None`` for a job with neither ``PER_RUN`` AUTO edges, AUTO epochs
    nor sliced chains."""
    exchanges = spec.auto.per_run and bool(spec.auto.results)
    if not exchanges and not spec.auto_epochs and not spec.sliced:
        return None
    found = advise(dag_id, spec, source)
    if not exchanges:
        plan, reason = ExchangePlan(), "the exchanges as rendered (the job is not rendered PER_RUN with AUTO edges)"
    elif found.decision is None:
        stored = plans.next(dag_id)
        plan, reason = ((stored.plan, f"keeps the stored plan (fused: {', '.join(stored.plan.fused) or 'none'}): "
                                      f"{found.note}")
                        if stored is not None else (ExchangePlan(), f"every AUTO result BLOCKING: {found.note}"))
    else:
        plan, reason = found.decision.plan, found.decision.reason
    decision = PlanDecision(secrets.token_hex(6), plan, reason, clock(), after_run, dict(found.epochs))
    plans.decide_next(dag_id, decision)
    return decision

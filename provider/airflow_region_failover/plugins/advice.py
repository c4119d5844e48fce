"""The planner's advice for a DAG's AUTO edges, from its real history: the one computation behind
``region-failover advise DAG_ID`` and the DAG's dry-run tab (two presentations of one :class:`Advice`).

Rules:

* the job is the DAG's latest serialized version's (its rendered param, as the watcher and the views read it);
  the graph costed is the one its DAG file declared (:attr:`~airflow_region_failover.job.JobSpec.declared_graph`:
  the AUTO edges AUTO again), and the results it may not fuse are the job's pinned ones, with their reasons;
* the history is the DAG's earlier runs (:class:`~.run_history.AirflowHistory`, the newest
  :data:`~.run_history.WINDOW` ended runs, each with the plan it ran), or any other
  :class:`~airflow_region_failover.planning.history.HistorySource`;
* a job without an AUTO edge has no advice (``decision`` ``None``, ``note`` says so); a history the planner
  cannot cost (a step no run measured) is a ``note`` too, naming the step — never an error of the page;
* the job's ``Checkpoint(epochs="AUTO")`` steps get their next run's epochs from the same history
  (``epochs``: step -> :class:`~airflow_region_failover.planning.epochs.EpochsChoice`,
  :func:`~airflow_region_failover.planning.epochs.choose_all`), and so do its sliced chains (by head step,
  :func:`~airflow_region_failover.planning.epochs.choose_slices`), with or without AUTO edges; a history that cannot
  be read leaves them at the no-history default;
* every plan costed runs the epochs the next run's sliced chains and AUTO-epochs steps take (:func:`plan_segments`:
  the model's :class:`~airflow_region_failover.planning.model.Segments`), and a job without an AUTO edge but with
  such steps gets its declared plan's expected completion time (``expected``,
  :func:`~airflow_region_failover.planning.choice.declared_cost`) — a history that cannot cost it leaves it out, with
  a ``note``;
* :meth:`Advice.to_json` is what ``advise DAG_ID -o json`` prints and ``/api/advise/DAG_ID`` answers, with the
  history window it came from (``"history"``, the form ``advise --history FILE`` reads: saved, it replays the
  advice — as the benchmarks keep it beside each prediction).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from airflow_region_failover.exceptions import RegionFailoverError
from airflow_region_failover.graph.auto import ExchangePlan
from airflow_region_failover.job import JobSpec
from airflow_region_failover.planning.choice import Decision, decide, declared_cost
from airflow_region_failover.planning.epochs import (
    EpochCost,
    EpochsChoice,
    checkpoint_seconds,
    choose_all,
    choose_slices,
    slice_costs,
)
from airflow_region_failover.planning.history import History, HistoryError, HistorySource
from airflow_region_failover.planning.model import PlanCost, Segments
from airflow_region_failover.planning.policy import PlannerPolicy
from airflow_region_failover.plugins.run_history import AirflowHistory, parallelism_of


@dataclass(frozen=True)
class Advice:
    """The advice for ``dag_id``: the ``decision`` (``None`` when there is none) and a ``note`` saying why not;
    ``epochs``: the AUTO-epochs steps' epochs; ``expected``: a job without AUTO edges' declared plan's cost (module
    rule)."""

    dag_id: str
    decision: Decision | None
    note: str = ""
    epochs: Mapping[str, EpochsChoice] = field(default_factory=dict)
    expected: PlanCost | None = None
    history: History | None = field(default=None, repr=False)

    def to_json(self) -> dict[str, Any]:
        """``{"dag_id": ..., "note": ..., "decision": <Decision.to_json()> | null}``, and ``"epochs": {<step>:
        {"epochs": n, "reason": ...}}`` for a job with AUTO-epochs steps, ``"expected": <PlanCost.to_json()>``
        when there is a declared plan's cost and ``"history": <History.to_json()>`` when one was read."""
        body = {"dag_id": self.dag_id, "note": self.note,
                "decision": None if self.decision is None else self.decision.to_json()}
        if self.epochs:
            body["epochs"] = {step: c.to_json() for step, c in sorted(self.epochs.items())}
        if self.expected is not None:
            body["expected"] = self.expected.to_json()
        if self.history is not None:
            body["history"] = self.history.to_json()
        return body


def advise(dag_id: str, spec: JobSpec, source: HistorySource | None = None,
           deadline_seconds: float | None = None) -> Advice:
    """The advice for ``spec``'s AUTO edges after ``dag_id``'s history (module rules), under the job's planner
    policy (``spec.planner``); ``source`` defaults to the store and Airflow's metadata DB; ``deadline_seconds``
    (``advise --deadline``) replaces the DAG's deadline alert."""
    policy = _policy(spec, deadline_seconds)
    if not spec.auto.results and not spec.auto_epochs and not spec.sliced:
        return Advice(dag_id, None, f"DAG {dag_id!r} declares no AUTO edge: every exchange is as declared "
                                    "(declare exchange=\"AUTO\" on an edge to let the provider choose)")
    graph = spec.declared_graph
    if source is None:
        from airflow_region_failover.store.result_store import default_store  # deferred: the store, on request

        source = AirflowHistory(default_store(), parallelism_of(graph.steps), policy.window,
                                ExchangePlan() if spec.auto.per_run else spec.auto.plan)
    try:
        history = source.history(dag_id)
    except HistoryError as exc:
        return Advice(dag_id, None, f"DAG {dag_id!r}: {exc}", job_epochs(spec, History()))
    window = history.last(policy.window)
    epochs = job_epochs(spec, window)
    segments = plan_segments(spec, window, epochs)
    if not spec.auto.results:
        note = f"DAG {dag_id!r} declares no AUTO edge: every exchange is as declared"
        try:
            return Advice(dag_id, None, note, epochs, declared_cost(graph, history, policy, (), segments), window)
        except HistoryError as exc:
            return Advice(dag_id, None, f"{note}; no expected completion time: {exc}", epochs, history=window)
    try:
        return Advice(dag_id, decide(graph, history, policy, dict(spec.auto.pinned), serial_tasks(spec), segments),
                      epochs=epochs, history=window)
    except HistoryError as exc:
        return Advice(dag_id, None, f"DAG {dag_id!r}: {exc}", epochs, history=window)


def job_epochs(spec: JobSpec, history: History) -> dict[str, EpochsChoice]:
    """The next run's epochs of ``spec``'s AUTO-epochs steps and sliced chains (module rule)."""
    sliced = {head: (spec.chains.of(head).steps, most) for head, most in spec.sliced.items()}
    return {**choose_all(spec.auto_epochs, history), **choose_slices(spec.graph, sliced, history)}


def plan_segments(spec: JobSpec, history: History, epochs: Mapping[str, EpochsChoice]) -> dict[str, Segments]:
    """The steps of ``spec`` that run in epochs in its next run, with what one more epoch costs (module rule): a
    sliced chain's members its head's ``C`` (checkpoint and reading its inputs again,
    :func:`~airflow_region_failover.planning.epochs.slice_costs`), an AUTO-epochs chain's members its measured
    checkpoint seconds (the default before one was measured)."""
    costs = {**slice_costs(spec.graph, spec.sliced, history),
             **{step: EpochCost(checkpoint_seconds(step, history)) for step in spec.auto_epochs}}
    found: dict[str, Segments] = {}
    for head, cost in costs.items():
        chain = spec.chains.of(head).steps
        found.update(dict.fromkeys(chain, Segments(epochs[head].epochs, cost.seconds, chain)))
    return found


def serial_tasks(spec: JobSpec) -> tuple[frozenset[str], ...]:
    """The subtasks each fused task of a ``PER_RUN`` job runs (its tasks never change between plans, so every plan
    runs them one after another: :func:`~.planning.model.plan_cost`); none for another job, whose plans would be
    rendered as other tasks."""
    if not spec.auto.per_run:
        return ()
    return tuple(frozenset(str(m) for m in region.members) for region in spec.fused if len(region.members) > 1)


def _policy(spec: JobSpec, deadline_seconds: float | None) -> PlannerPolicy:
    """The job's policy with the run budget: ``deadline_seconds`` if given, else the DAG's deadline alert's."""
    budget = deadline_seconds if deadline_seconds is not None else spec.auto.deadline_seconds
    return spec.planner if budget is None else replace(spec.planner, deadline_seconds=budget)


def dag_job(dag_id: str) -> JobSpec:
    """The job of ``dag_id``'s latest serialized version; :class:`RegionFailoverError` when it has none."""
    from airflow_region_failover.plugins.metadata_db import serialized_job  # deferred: the metadata DB, on request

    spec = serialized_job(dag_id)
    if spec is None:
        raise RegionFailoverError(f"DAG {dag_id!r} has no region-failover job (or is not parsed yet): check the DAG "
                                  "id, or run `airflow dags reserialize`")
    return spec

"""What-if of `2026-12-04-sliced-chaos.md`: the model's prediction of a chaos run from the bench's live history, as
the planner computes it (a step's failures over its successful tries' measured seconds, ``planning/rate.py``) and
with every step's rate over all its tries' durations (Airflow's ``duration`` of each try, a chain task's split over
its members).

Run it with a running ``bench_chaos.py`` stack's environment (its scheduler's ``AIRFLOW_*``, ``AWS_*`` and
``REGION_FAILOVER_*`` variables, and ``_AIRFLOW_PROCESS_CONTEXT=server``): ``python 2026-12-04-chaos-whatif.py
[RUNS]``, RUNS the number of the DAG's oldest runs to use (the history before a measured run).
"""

import glob
import sqlite3
import sys

from airflow_region_failover.graph.auto import ExchangePlan
from airflow_region_failover.planning.choice import declared_cost
from airflow_region_failover.planning.estimates import estimate
from airflow_region_failover.planning.history import History
from airflow_region_failover.planning.model import plan_cost
from airflow_region_failover.planning.rate import FailureRate, failure_rate
from airflow_region_failover.plugins import advice
from airflow_region_failover.plugins.run_history import AirflowHistory, parallelism_of, subtasks_of
from airflow_region_failover.store.result_store import default_store

DAG = "tpch_chaos_5gb"


def exposure(db: sqlite3.Connection, run_id: str) -> dict[str, float]:
    """Each step's seconds of tries in ``run_id`` (a chain task's split evenly over its members)."""
    seconds: dict[str, float] = {}
    for table in ("task_instance", "task_instance_history"):
        for task_id, duration in db.execute(f"select task_id, duration from {table} where dag_id=? and run_id=? "
                                            "and duration is not null", (DAG, run_id)):
            members = subtasks_of(task_id) or ()
            for member in members:
                seconds[member.step] = seconds.get(member.step, 0.0) + duration / len(members)
    return seconds


def main() -> None:
    spec = advice.dag_job(DAG)
    graph = spec.declared_graph
    full = AirflowHistory(default_store(), parallelism_of(graph.steps), 20, spec.auto.plan).history(DAG)
    history = History(full.runs[:int(sys.argv[1])] if len(sys.argv) > 1 else full.runs)
    epochs = advice.job_epochs(spec, history)
    segments = advice.plan_segments(spec, history, epochs)
    print("runs:", [r.run_id for r in history.runs], "epochs:", {s: c.epochs for s, c in epochs.items()})
    cost = declared_cost(graph, history, spec.planner, (), segments)
    print(f"as the planner: {cost.expected:.1f} +- {cost.spread:.1f} s, path {cost.critical_path}")
    db = sqlite3.connect(f"file:{glob.glob('/tmp/bench-etl-*/airflow/airflow.db')[-1]}?mode=ro", uri=True)
    tries = [exposure(db, r.run_id) for r in history.runs]
    pooled, rates = failure_rate(history).per_task_hour, {}
    for step in graph.steps:
        failed = sum(r.failures.get(step.id, 0) for r in history.runs)
        hours = sum(e.get(step.id, 0.0) for e in tries) / 3600
        rates[step.id] = FailureRate(failed, hours, (), pooled).per_task_second
        measured = sum(sum(t.subtask_seconds) for r in history.runs if (t := r.step(step.id)) is not None)
        print(f"  {step.id}: {failed} failures, measured {measured:.0f} s, tries {hours * 3600:.0f} s -> "
              f"{rates[step.id] * 3600:.1f}/h")
    tried = plan_cost(graph, ExchangePlan(), estimate(graph, history.last(spec.planner.window)), rates,
                      spec.planner.restart_seconds, (), segments)
    print(f"rates over the tries: {tried.expected:.1f} +- {tried.spread:.1f} s, path {tried.critical_path}")
    for region in tried.regions:
        print("   ", region.region, region.steps, round(region.work, 1), round(region.failures, 2),
              round(region.expected, 1))


if __name__ == "__main__":
    main()

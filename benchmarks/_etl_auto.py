"""The ``auto`` configuration of ``bench_etl_compare.py``: the example ETL with every BLOCKING edge AUTO, rendered
``PER_RUN``, so that each run runs the plan the provider chose from the runs before it.

Rules:

* two DAGs per size, each with its own history: ``tpch_etl_auto_<size>`` is measured without a failure after a
  history without failures, ``tpch_etl_autofail_<size>`` with the late failure after a history of late failures (the
  issue's two cells: after a quiet history the plan should cost no more than one Spark application; after frequent
  late failures it should protect what a failure would recompute);
* before the measured runs, ``--history N`` runs of each (default 3, the planner's minimum), not measured; the
  first run of a DAG has no decision and runs every AUTO result BLOCKING, which is also what measures the results'
  bytes and write/read seconds that a choice needs. The failing DAG's history starts with one clean run: a failed
  try leaves no task summary and a retried fused task that resumed committed members measures no compute, so a
  history of failing runs alone never measures the steps it kept (the planner then keeps the stored plan, saying
  so) — "frequent" late failures, then, not every run;
* before each run the script waits until the watcher has stored the decision after the DAG's previous run, then
  asks the Failover plugin's ``/api/advise/<dag>`` for the model's figures on the same history: the chosen plan's
  expected seconds and spread, and all-BLOCKING's and all-fused's, with the history window they came from
  (``predicted["history"]``, the form ``region-failover advise --history FILE`` reads) and the DAG's job document
  (``predicted["job"]``, its ``region_failover_job`` param from Airflow's REST API): a later model replays the
  prediction on them (``benchmarks/replay_predictions.py``). After the run, the plan it actually ran (fixed at its
  start, ``Plans.of_run``) is recorded beside them, so the record shows what AUTO chose and what the model
  predicted against what the run measured.
"""

from __future__ import annotations

import re
import time
from pathlib import Path
from typing import Any

import httpx

from _etl_runs import ours_variant, run_airflow

HISTORY_RUNS = 3
"""Runs of each auto DAG before the measured ones (the planner's ``min_runs``)."""
DECISION_TIMEOUT_S = 180.0


def per_run_variant(target: Path, label: str, orders: int, customers: int, failing: bool, fail_at: str) -> str:
    """The ETL sized as :func:`~_etl_runs.ours_variant`, every BLOCKING edge AUTO, rendered ``PER_RUN``, under dag
    id ``tpch_etl_autofail_<label>`` (``failing``) or ``tpch_etl_auto_<label>``."""
    prefix = "tpch_etl_autofail" if failing else "tpch_etl_auto"
    dag_id = ours_variant(target, label, orders, customers, prefix=prefix, fail_at=fail_at)
    path = target / f"{dag_id}.py"
    text, edges = re.subn(r'exchange="BLOCKING"', 'exchange="AUTO"', path.read_text())
    text, rendered = re.subn(r"^    job\.render\(\)$", "    from airflow_region_failover import PER_RUN\n\n"
                             "    job.render(plan=PER_RUN)", text, flags=re.M)
    if edges < 2 or rendered != 1:
        raise SystemExit("dags/tpch_etl.py changed shape: cannot derive its PER_RUN copy")
    path.write_text(text)
    return dag_id


def variants(target: Path, size: dict[str, Any], fail_at: str) -> dict[str, str]:
    """The dag ids of both auto DAGs of ``size``: ``auto`` and ``auto_failing``."""
    return {"auto": per_run_variant(target, size["label"], size["orders"], size["customers"], False, fail_at),
            "auto_failing": per_run_variant(target, size["label"], size["orders"], size["customers"], True,
                                            fail_at)}


class AutoRuns:
    """The auto DAGs' runs on one stack: each run after its DAG's decision, with the model's prediction."""

    def __init__(self, api: Any, stack: Any, timeout: float) -> None:
        from airflow_region_failover.decisions.plans import Plans

        self.api, self.stack, self.timeout = api, stack, timeout
        self.plans = Plans(stack.store.objects)
        self.last: dict[str, str] = {}
        self.jobs: dict[str, Any] = {}

    def run(self, dag_id: str, fail: bool, salt: int) -> dict[str, Any]:
        """One run of ``dag_id`` after its decision; :func:`~_etl_runs.run_airflow`'s figures plus ``plan`` (the
        results it fused), ``decision`` (the reason of the decision it copied) and ``predicted`` (the model)."""
        self.wait_for_decision(dag_id)
        predicted = self.predicted(dag_id)
        run = run_airflow(self.api, dag_id, fail, self.timeout, salt)
        self.last[dag_id] = run["run_id"]
        fixed = self.plans.of_run(dag_id, run["run_id"])
        run["plan"] = None if fixed is None else list(fixed.plan.fused)
        run["decision"] = None if fixed is None else fixed.reason
        run["predicted"] = predicted
        return run

    def history(self, dag_ids: dict[str, str], runs: int, salts: Any) -> None:
        """``runs`` runs of each auto DAG, not measured (module rules)."""
        for name, fails in (("auto", [False] * runs), ("auto_failing", [False] + [True] * runs)):
            for number, fail in enumerate(fails):
                run = self.run(dag_ids[name], fail, salts.next())
                print(f"history {dag_ids[name]} #{number + 1}{' (late failure)' if fail else ''}: "
                      f"{run['wall_s']:.1f} s, fused {run['plan']}, "
                      f"{run['decision']}", flush=True)

    def wait_for_decision(self, dag_id: str) -> None:
        """Until the watcher stored the decision after the DAG's last run (none before its first)."""
        after = self.last.get(dag_id)
        if after is None:
            return
        deadline = time.monotonic() + DECISION_TIMEOUT_S
        while time.monotonic() < deadline:
            decided = self.plans.next(dag_id)
            if decided is not None and decided.after_run == after:
                time.sleep(5.0)  # a second watcher may decide too; both decide alike on the same history
                return
            time.sleep(1.0)
        raise SystemExit(f"no decision after {dag_id} run {after} within {DECISION_TIMEOUT_S:.0f} s")

    def job(self, dag_id: str) -> Any:
        """The DAG's job document (its ``region_failover_job`` param, from ``/dags/{dag_id}/details``), once;
        ``None`` (said once) when the answer holds none — the prediction is kept without it, the replay then needs
        ``--job``."""
        if dag_id not in self.jobs:
            from airflow_region_failover.naming import JOB_PARAM

            params = self.api.get(f"/dags/{dag_id}/details").get("params") or {}
            param = params.get(JOB_PARAM)
            self.jobs[dag_id] = param["value"] if isinstance(param, dict) and "value" in param else param
            if not isinstance(self.jobs[dag_id], dict):
                print(f"{dag_id}: no job document in its REST details; predictions are kept without it", flush=True)
                self.jobs[dag_id] = None
        return self.jobs[dag_id]

    def predicted(self, dag_id: str) -> dict[str, Any] | None:
        """The model's figures on the DAG's history now (the plugin's advice): the chosen plan's, or for a DAG
        without AUTO edges its declared plan's (``chosen``, with its sliced chains' epochs); ``None`` when there
        are none."""
        url = f"{self.stack.airflow.url}/region-failover/api/advise/{dag_id}"
        reply = httpx.get(url, headers={"Authorization": f"Bearer {self.api.token()}"}, timeout=120.0)
        reply.raise_for_status()
        body = reply.json()
        decision, history, job = body["decision"], body.get("history"), self.job(dag_id)
        if decision is None and "expected" in body:
            declared = body["expected"]
            return {"plan": [], "reason": body["note"], "all_blocking": None, "all_fused": None,
                    "chosen": {"expected_s": declared["expected_seconds"], "spread_s": declared["spread_seconds"]},
                    "failures_per_task_hour": None, "history": history, "job": job}
        if decision is None or decision["chosen"] is None:
            return None

        def seconds(name: str) -> dict[str, Any] | None:
            cost = decision[name]
            return None if cost is None else {"expected_s": cost["expected_seconds"],
                                              "spread_s": cost["spread_seconds"]}

        fused = sorted(r for r, c in decision["plan"]["choices"].items() if c == "FUSED")
        return {"plan": fused, "reason": decision["reason"], "chosen": seconds("chosen"),
                "all_blocking": seconds("all_blocking"), "all_fused": seconds("all_fused"),
                "failures_per_task_hour": decision["failure_rate"]["per_task_hour"], "history": history, "job": job}

"""A step declared ``Checkpoint(epochs="AUTO")`` on real Spark and a real S3 store (SeaweedFS): it runs the epochs
its run's plan fixed — the scheduler's decision copied into the run by its first try — and its retry, after a newer
decision was stored, runs the same epochs and resumes its checkpoint; each checkpoint is timed on the try's timeline
(what the run history records as its cost).

    clicks#0 ==keyed by user==+==> sessions#0 (Checkpoint(epochs="AUTO"): 3 epochs this run)
                              \\=> sessions#1                                  (dags/clickstream_sessions.py)
"""

from __future__ import annotations

import runpy
import secrets
from pathlib import Path
from typing import Any

import pytest

from airflow_region_failover import Checkpoint, JobGraphBuilder, PartitionId, SubtaskId, timeline
from airflow_region_failover.checkpoint.runner import CHECKPOINT_PHASE
from airflow_region_failover.decisions.plans import Plans
from airflow_region_failover.graph.auto import ExchangePlan
from airflow_region_failover.job import JobRuntime, JobSpec, StepImpl
from airflow_region_failover.naming import xcom_key
from airflow_region_failover.planning.epochs import EpochsChoice
from airflow_region_failover.planning.stored import PlanDecision
from airflow_region_failover.standalone.seaweedfs import S3Endpoint
from airflow_region_failover.store.result_store import ResultStore
from tests.integration.test_checkpoint_spark import DAG, RUN, FakeTI, run_task
from tests.integration.test_checkpoint_spark import spark as spark  # the module's Spark fixture

pytestmark = pytest.mark.integration
EXAMPLE = runpy.run_path(str(Path(__file__).resolve().parents[2] / "dags" / "clickstream_sessions.py"),
                         run_name="example")


@pytest.fixture
def store(s3_server: S3Endpoint) -> ResultStore:
    return ResultStore.from_endpoint(s3_server.endpoint_url, s3_server.access_key, s3_server.secret_key,
                                     s3_server.bucket, prefix=f"ckauto-{secrets.token_hex(4)}")


def _decide(store: ResultStore, epochs: int, decision_id: str) -> None:
    """What the scheduler's watcher stores for the DAG's next run (plugins/next_plan.py)."""
    Plans(store.objects).decide_next(DAG, PlanDecision(decision_id, ExchangePlan(), "test", 1.0, "",
                                                       {"sessions": EpochsChoice(epochs, f"chosen: {epochs}")}))


def test_an_auto_epochs_step_runs_the_epochs_its_run_plan_fixed_and_its_retry_resumes(
        spark: Any, store: ResultStore, monkeypatch: pytest.MonkeyPatch) -> None:
    impls = {"clicks": StepImpl("clicks", fn=EXAMPLE["clicks"]),
             "sessions": StepImpl("sessions", fn=EXAMPLE["sessionize"],
                                  checkpoint=Checkpoint(["user"], EXAMPLE["STATE"], epochs="AUTO"))}
    graph = (JobGraphBuilder().step("clicks").step("sessions", parallelism=2)
             .edge("clicks", "sessions", exchange="BLOCKING", partition_by=["user"]).build())
    runtime = JobRuntime(JobSpec(graph, {}, auto_epochs={"sessions": 1000}), impls)
    clicks = FakeTI({}, "clicks.0")
    run_task(runtime, (SubtaskId("clicks", 0),), clicks, {}, store, spark, monkeypatch)
    xcoms = {("clicks.0", xcom_key("clicks->sessions")): clicks.pushed[xcom_key("clicks->sessions")]}
    _decide(store, 3, "d1")
    params = {"fail_at_epoch": 2}
    with pytest.raises(RuntimeError, match="injected failure of sessions#0 in epoch 2"):
        run_task(runtime, (SubtaskId("sessions", 0),), FakeTI(xcoms, "sessions.0"), params, store, spark, monkeypatch)
    fixed = Plans(store.objects).of_run(DAG, RUN)
    assert fixed is not None and fixed.epochs["sessions"].epochs == 3  # the first try fixed the run's plan
    _decide(store, 5, "d2")  # a newer decision, for the next run: this run keeps its 3 epochs
    rows = []
    for index in (0, 1):
        ti = FakeTI(xcoms, f"sessions.{index}", try_number=2 if index == 0 else 1)
        with timeline.measured():
            done = run_task(runtime, (SubtaskId("sessions", index),), ti, params, store, spark, monkeypatch)
        expected = {"epochs": 3, "resumed_from": 2, "skipped": 2, "checkpoints": 1} if index == 0 else \
            {"epochs": 3, "resumed_from": 0, "skipped": 0, "checkpoints": 3}
        assert {k: v for k, v in done["checkpoint"].items() if k != "uploaded_bytes"} == expected, done
        spans = [s for s in done["timeline"]["spans"] if s[0] == CHECKPOINT_PHASE]
        assert len(spans) == expected["checkpoints"], done["timeline"]
        table = store.read_arrow(store.manifest(DAG, RUN, PartitionId("sessions", index)))
        rows += [(r["user"], r["start"], r["end"], r["clicks"]) for r in table.to_pylist()]
    assert sorted(rows) == EXAMPLE["reference_sessions"]()
    other = Plans(store.objects).fix(DAG, "next_run")
    assert other.epochs["sessions"].epochs == 5  # the next run takes the newer decision

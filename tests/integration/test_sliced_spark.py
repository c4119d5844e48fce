"""A sliced chain on real Spark and a real S3 store (SeaweedFS): a rescalable step's subtask runs the epochs its run's
plan fixed as virtual subtasks, each called once with its own index and parallelism and its own key groups; a retry
resumes after the last checkpointed epoch; the committed results equal those of the same job run whole.

    gen#0 ==keyed by k==+==> total#0 (rescalable; this run: gen 2 epochs, total 3 epochs)
    gen#1 ==============+==> total#1
"""

from __future__ import annotations

import secrets
from typing import Any

import pytest

from airflow_region_failover import JobGraphBuilder, PartitionId, SubtaskId
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
ROWS = 6_000
CALLS: list[tuple[str, int, int, int]] = []
"""(step, context index, context parallelism, try) of every call of the test's step functions."""


def gen(spark: Any, inputs: Any, context: Any) -> Any:
    from pyspark.sql import functions as F

    CALLS.append(("gen", context.index, context.parallelism, context.try_number))
    lo, hi = ROWS * context.index // context.parallelism, ROWS * (context.index + 1) // context.parallelism
    return spark.range(lo, hi).select((F.col("id") % 97).alias("k"), F.col("id").alias("v"))


def total(spark: Any, inputs: Any, context: Any) -> Any:
    from pyspark.sql import functions as F

    CALLS.append(("total", context.index, context.parallelism, context.try_number))
    if context.params.get("fail") and context.try_number == 1 and context.index == 1:
        raise RuntimeError("injected failure of total#0 in its epoch 1")
    return inputs["gen"].groupBy("k").agg(F.sum("v").alias("s"), F.count("v").alias("n"))


@pytest.fixture
def store(s3_server: S3Endpoint) -> ResultStore:
    return ResultStore.from_endpoint(s3_server.endpoint_url, s3_server.access_key, s3_server.secret_key,
                                     s3_server.bucket, prefix=f"sliced-{secrets.token_hex(4)}")


def _runtime() -> JobRuntime:
    graph = (JobGraphBuilder().step("gen", parallelism=2, rescalable=True)
             .step("total", parallelism=2, rescalable=True)
             .edge("gen", "total", exchange="BLOCKING", partition_by=["k"]).build())
    impls = {"gen": StepImpl("gen", fn=gen), "total": StepImpl("total", fn=total)}
    return JobRuntime(JobSpec(graph, {}, sliced={"gen": 64, "total": 64}), impls)


def _run_job(store: ResultStore, spark: Any, monkeypatch: pytest.MonkeyPatch, params: dict[str, Any],
             fail: bool = False) -> tuple[dict[int, Any], list[tuple[int, int, int]]]:
    """Both steps' tasks (``total#0``'s first try failing in its epoch 1 when ``fail``, then retried); the totals
    by key and each ``total`` subtask's rows."""
    runtime = _runtime()
    xcoms: dict[tuple[str, str], Any] = {}
    for index in (0, 1):
        ti = FakeTI({}, f"gen.{index}")
        run_task(runtime, (SubtaskId("gen", index),), ti, params, store, spark, monkeypatch)
        xcoms[(f"gen.{index}", xcom_key("gen->total"))] = ti.pushed[xcom_key("gen->total")]
    summaries = {}
    for index in (0, 1):
        if fail and index == 0:
            with pytest.raises(RuntimeError, match="injected failure of total#0"):
                run_task(runtime, (SubtaskId("total", 0),), FakeTI(xcoms, "total.0"), {**params, "fail": True},
                         store, spark, monkeypatch)
        ti = FakeTI(xcoms, f"total.{index}", try_number=2 if fail and index == 0 else 1)
        summaries[index] = run_task(runtime, (SubtaskId("total", index),), ti, {**params, "fail": fail}, store,
                                    spark, monkeypatch)
    rows = []
    for index in (0, 1):
        table = store.read_arrow(store.manifest(DAG, RUN, PartitionId("total", index)))
        rows += [(r["k"], r["s"], r["n"]) for r in table.to_pylist()]
    return summaries, sorted(rows)


def _reference() -> list[tuple[int, int, int]]:
    totals: dict[int, list[int]] = {}
    for v in range(ROWS):
        entry = totals.setdefault(v % 97, [0, 0])
        entry[0] += v
        entry[1] += 1
    return sorted((k, s, n) for k, (s, n) in totals.items())


def test_a_sliced_chain_runs_its_epochs_as_virtual_subtasks_and_its_retry_resumes(
        spark: Any, store: ResultStore, monkeypatch: pytest.MonkeyPatch) -> None:
    Plans(store.objects).decide_next(DAG, PlanDecision("d1", ExchangePlan(), "test", 1.0, "", {
        "gen": EpochsChoice(2, "chosen: 2"), "total": EpochsChoice(3, "chosen: 3")}))
    CALLS.clear()
    summaries, rows = _run_job(store, spark, monkeypatch, {}, fail=True)
    assert rows == _reference()  # every key once, with every row of it: the epochs tile each subtask's key groups
    assert [c for c in CALLS if c[0] == "gen"] == [("gen", v, 4, 1) for v in range(4)]
    # total#0: try 1 ran virtual subtask 0 and failed in 1; try 2 resumed after epoch 0; total#1 ran 3, 4, 5
    assert [c for c in CALLS if c[0] == "total"] == [
        ("total", 0, 6, 1), ("total", 1, 6, 1), ("total", 1, 6, 2), ("total", 2, 6, 2),
        ("total", 3, 6, 1), ("total", 4, 6, 1), ("total", 5, 6, 1)]
    resumed = {k: v for k, v in summaries[0]["checkpoint"].items() if k != "uploaded_bytes"}
    assert resumed == {"epochs": 3, "resumed_from": 1, "skipped": 1, "checkpoints": 2, "sliced": True}, summaries[0]


def test_without_a_decision_a_sliced_chain_runs_whole(
        spark: Any, store: ResultStore, monkeypatch: pytest.MonkeyPatch) -> None:
    CALLS.clear()
    summaries, rows = _run_job(store, spark, monkeypatch, {})
    assert rows == _reference()
    assert sorted(c[1:3] for c in CALLS) == [(0, 2), (0, 2), (1, 2), (1, 2)]  # as if it were not sliced
    assert summaries[0].get("checkpoint") is None
    assert Plans(store.objects).of_run(DAG, RUN) is not None  # the run's plan was fixed (one epoch each)

"""Checkpointed steps on real Spark and a real S3 store (SeaweedFS): the example DAG's sessionising step, its
first try failing in epoch 4, its second try resuming from the checkpoint after epoch 3; the sessions equal those
computed without Spark; and a chain checkpoints all its members at one boundary.

    clicks#0 ==keyed by user==+==> sessions#0 (checkpointed, 7 epochs)        (dags/clickstream_sessions.py)
                              \\=> sessions#1
    src#0 ==BLOCKING==> count#0 -PIPELINED-> total#0 ==> sink#0                (count, total chained, both stateful)
"""

from __future__ import annotations

import runpy
import secrets
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from airflow_region_failover import Checkpoint, JobGraphBuilder, PartitionId, SubtaskId
from airflow_region_failover.graph.model import Exchange
from airflow_region_failover.job import JobRuntime, JobSpec, StepImpl
from airflow_region_failover.naming import xcom_key
from airflow_region_failover.spark import chain as chain_module
from airflow_region_failover.spark.chain import run_chain
from airflow_region_failover.spark.exchange import PartitionRef
from airflow_region_failover.spark.store_io import StoreIO
from airflow_region_failover.standalone.seaweedfs import S3Endpoint
from airflow_region_failover.store.result_store import ResultStore
from tests.support.spark import spark_session

pytestmark = pytest.mark.integration
EXAMPLE = runpy.run_path(str(Path(__file__).resolve().parents[2] / "dags" / "clickstream_sessions.py"),
                         run_name="example")
DAG, RUN = "clickstream_sessions", "run"


@pytest.fixture(scope="module", params=["embedded"])
def spark(request: pytest.FixtureRequest) -> Iterator[Any]:
    yield from spark_session(request, shuffle_partitions=2)


@pytest.fixture
def store(s3_server: S3Endpoint) -> ResultStore:
    return ResultStore.from_endpoint(s3_server.endpoint_url, s3_server.access_key, s3_server.secret_key,
                                     s3_server.bucket, prefix=f"ckspark-{secrets.token_hex(4)}")


@dataclass
class FakeTI:
    xcoms: dict[tuple[str, str], Any]
    task_id: str
    try_number: int = 1
    dag_id: str = DAG
    run_id: str = RUN
    pushed: dict[str, Any] = field(default_factory=dict)

    def xcom_pull(self, *, task_ids: str, key: str) -> Any:
        return self.xcoms.get((task_ids, key))

    def xcom_push(self, *, key: str, value: Any) -> None:
        self.pushed[key] = value


def run_task(runtime: JobRuntime, members: tuple[SubtaskId, ...], ti: FakeTI, params: dict[str, Any],
             store: ResultStore, spark: Any, monkeypatch: pytest.MonkeyPatch) -> dict[str, Any]:
    monkeypatch.setattr(chain_module, "open_store_io", lambda: StoreIO(store))
    monkeypatch.setattr(chain_module, "get_session", lambda target: spark)
    monkeypatch.setattr("airflow_region_failover.spark.run.restart_of", lambda ti, logs=None, known=None: None)
    return run_chain(runtime, members, {"ti": ti, "params": params}).to_json()


def test_the_example_resumes_from_its_checkpoint_and_sessions_are_correct(
        spark: Any, store: ResultStore, monkeypatch: pytest.MonkeyPatch) -> None:
    impls = {"clicks": StepImpl("clicks", fn=EXAMPLE["clicks"]),
             "sessions": StepImpl("sessions", fn=EXAMPLE["sessionize"],
                                  checkpoint=Checkpoint(["user"], EXAMPLE["STATE"], epochs=EXAMPLE["DAYS"]))}
    graph = (JobGraphBuilder().step("clicks").step("sessions", parallelism=2)
             .edge("clicks", "sessions", exchange="BLOCKING", partition_by=["user"]).build())
    runtime = JobRuntime(JobSpec(graph, {"state.checkpoints.num-retained": "2"}), impls)
    clicks = FakeTI({}, "clicks.0")
    run_task(runtime, (SubtaskId("clicks", 0),), clicks, {}, store, spark, monkeypatch)
    xcoms = {("clicks.0", xcom_key("clicks->sessions")): clicks.pushed[xcom_key("clicks->sessions")]}
    rows = []
    for index in (0, 1):
        params = {"fail_at_epoch": 4}
        if index == 0:
            with pytest.raises(RuntimeError, match="injected failure of sessions#0 in epoch 4"):
                run_task(runtime, (SubtaskId("sessions", 0),), FakeTI(xcoms, "sessions.0"), params, store, spark,
                         monkeypatch)
        ti = FakeTI(xcoms, f"sessions.{index}", try_number=2 if index == 0 else 1)
        summary = run_task(runtime, (SubtaskId("sessions", index),), ti, params, store, spark, monkeypatch)
        expected = {"epochs": 7, "resumed_from": 4, "skipped": 4, "checkpoints": 3} if index == 0 else \
            {"epochs": 7, "resumed_from": 0, "skipped": 0, "checkpoints": 7}
        assert {k: v for k, v in summary["checkpoint"].items() if k != "uploaded_bytes"} == expected, summary
        table = store.read_arrow(store.manifest(DAG, RUN, PartitionId("sessions", index)))
        rows += [(r["user"], r["start"], r["end"], r["clicks"]) for r in table.to_pylist()]
    assert sorted(rows) == EXAMPLE["reference_sessions"]()


def counting(spark: Any, inputs: Any, state: Any, context: Any) -> Any:
    from pyspark.sql import functions as F

    seen = inputs["src"].groupBy("k").agg(F.count("*").alias("d"))
    new = state.join(seen, "k", "full_outer").select(
        "k", (F.coalesce("n", F.lit(0)) + F.coalesce("d", F.lit(0))).cast("long").alias("n"))
    return new.where(F.col("n") > 0), new


def totals(spark: Any, inputs: Any, state: Any, context: Any) -> Any:
    from pyspark.sql import functions as F

    if context.epoch.index == context.params.get("fail") and context.try_number == 1:
        raise RuntimeError("injected")
    upto = inputs["count"].agg(F.sum("n").alias("total")).select(F.lit(1).cast("long").alias("one"), "total")
    return upto.withColumn("epoch", F.lit(context.epoch.index)), upto


def test_a_chain_checkpoints_every_member_at_one_boundary(spark: Any, store: ResultStore,
                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    graph = (JobGraphBuilder().step("src").step("count").step("total").step("sink")
             .edge("src", "count", exchange="BLOCKING")
             .edge("count", "total", exchange="PIPELINED", distribution="POINTWISE")
             .edge("total", "sink", exchange="BLOCKING").build())
    decl = {"epochs": 3}
    impls = {"src": StepImpl("src", fn=lambda s, i, c: s.range(0, 30, numPartitions=3).selectExpr("id % 4 AS k")),
             "count": StepImpl("count", fn=counting, checkpoint=Checkpoint(["k"], "k long, n long", **decl)),
             "total": StepImpl("total", fn=totals, checkpoint=Checkpoint(["one"], "one long, total long", **decl)),
             "sink": StepImpl("sink", fn=lambda s, i, c: None)}
    runtime = JobRuntime(JobSpec(graph, {}), impls)
    src = FakeTI({}, "src.0")
    run_task(runtime, (SubtaskId("src", 0),), src, {}, store, spark, monkeypatch)
    xcoms = {("src.0", xcom_key("src->count")): src.pushed[xcom_key("src->count")]}
    members = (SubtaskId("count", 0), SubtaskId("total", 0))
    with pytest.raises(RuntimeError, match="injected"):
        run_task(runtime, members, FakeTI(xcoms, "count.total.0"), {"fail": 2}, store, spark, monkeypatch)
    summary = run_task(runtime, members, FakeTI(xcoms, "count.total.0", 2), {"fail": 2}, store, spark, monkeypatch)
    assert summary["checkpoint"]["resumed_from"] == 2 and summary["checkpoint"]["skipped"] == 2
    from airflow_region_failover.checkpoint.storage import CheckpointStorage

    storage = CheckpointStorage(store.objects, store.run_keys(DAG, RUN), PartitionId("total", 0), 900)
    last = storage.completed()[0].manifest
    assert last is not None and [s.step for s in last.states] == ["count", "total"]  # one cut, both members
    sink = store.manifest(DAG, RUN, PartitionId("total->sink", 0))
    rows = sorted((r["epoch"], r["total"]) for r in store.read_arrow(sink).to_pylist())
    assert rows == [(0, 10), (1, 20), (2, 30)]
    assert PartitionRef("total->sink", 0, Exchange.BLOCKING, DAG, RUN, 2).partition == PartitionId("total->sink", 0)

"""A fused region on real Spark and a real S3 store (SeaweedFS): one task runs every subtask of the region in one
session, the keyed exchange inside never reaches S3, and what it commits equals what the unfused tasks commit.

    src#0,1 ==B==> gen#0,1 --AUTO, keyed by k--> agg#0,1 ==B==> sink#0      (plan: gen->agg FUSED)
                   \\_______ fused region: task gen.agg.0 _______/
"""

from __future__ import annotations

import secrets
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa
import pytest

from airflow_region_failover import JobGraphBuilder, PartitionId, SubtaskId
from airflow_region_failover.graph.auto import Choice, ExchangePlan, resolve
from airflow_region_failover.graph.model import Exchange
from airflow_region_failover.job import JobRuntime, JobSpec, StepImpl
from airflow_region_failover.naming import xcom_key
from airflow_region_failover.spark import chain as chain_module
from airflow_region_failover.spark import fused as fused_module
from airflow_region_failover.spark.chain import run_chain
from airflow_region_failover.spark.exchange import PartitionRef
from airflow_region_failover.spark.fused import run_fused
from airflow_region_failover.spark.store_io import StoreIO
from airflow_region_failover.standalone.seaweedfs import S3Endpoint
from airflow_region_failover.store.keys import AttemptId
from airflow_region_failover.store.result_store import ResultStore
from tests.support.spark import embedded
from tests.support.store import on_server

pytestmark = pytest.mark.integration

DECLARED = (JobGraphBuilder().step("src", parallelism=2).step("gen", parallelism=2).step("agg", parallelism=2)
            .step("sink", parallelism=1)
            .edge("src", "gen", exchange="BLOCKING", distribution="POINTWISE")
            .edge("gen", "agg", exchange="AUTO", partition_by=["k"], columns=["k", "v"])
            .edge("agg", "sink", exchange="BLOCKING", distribution="BROADCAST").build())
FUSED = ExchangePlan({"gen->agg": Choice.FUSED})
DAG = "fused"


@pytest.fixture(scope="module")
def spark() -> Iterator[Any]:
    yield from embedded(shuffle_partitions=2)


@pytest.fixture
def store(s3_server: S3Endpoint) -> ResultStore:
    return on_server(s3_server, f"fused-{secrets.token_hex(4)}", spark_io="driver")


class Steps:
    """The step functions, recording each call's subtask and the partitions its context names."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, dict[str, tuple[PartitionId, ...]]]] = []

    def gen(self, spark: Any, inputs: Any, context: Any) -> Any:
        self.calls.append((str(context.subtask), dict(context.partitions)))
        return inputs["src"].selectExpr("id % 7 AS k", f"id * {context.index + 1} AS v", "id AS dropped")

    def agg(self, spark: Any, inputs: Any, context: Any) -> Any:
        self.calls.append((str(context.subtask), dict(context.partitions)))
        self.columns = inputs["gen"].columns
        return inputs["gen"].groupBy("k").sum("v").withColumnRenamed("sum(v)", "total")

    def impls(self) -> dict[str, StepImpl]:
        return {"src": StepImpl("src", fn=self.gen), "gen": StepImpl("gen", fn=self.gen),
                "agg": StepImpl("agg", fn=self.agg), "sink": StepImpl("sink", fn=self.agg)}


@dataclass
class FakeTI:
    xcoms: dict[tuple[str, str], Any]
    run_id: str
    task_id: str
    pushed: dict[str, Any] = field(default_factory=dict)
    pulled: list[tuple[str, str]] = field(default_factory=list)
    dag_id: str = DAG
    try_number: int = 1

    def xcom_pull(self, *, task_ids: str, key: str) -> Any:
        self.pulled.append((task_ids, key))
        return self.xcoms.get((task_ids, key))

    def xcom_push(self, *, key: str, value: Any) -> None:
        self.pushed[key] = value


def commit_src(store: ResultStore, run_id: str) -> dict[tuple[str, str], Any]:
    """src's two partitions committed; the XComs its tasks src.0 and src.1 would have published."""
    xcoms = {}
    for index in (0, 1):
        manifest, _ = store.write_arrow(pa.table({"id": list(range(index * 50, index * 50 + 50))}),
                                        AttemptId(DAG, run_id, PartitionId("src->gen", index), 1))
        ref = PartitionRef("src->gen", index, Exchange.BLOCKING, DAG, run_id, 1, manifest.row_count)
        xcoms[(f"src.{index}", xcom_key("src->gen"))] = ref.to_json()
    return xcoms


def rows(spark: Any, store: ResultStore, run_id: str) -> list[tuple[int, int]]:
    frames = [store.read(spark, DAG, run_id, PartitionId("agg->sink", i)) for i in (0, 1)]
    return sorted((r.k, r.total) for f in frames for r in f.collect())


def patch(monkeypatch: pytest.MonkeyPatch, store: ResultStore, spark: Any) -> None:
    for module in (chain_module, fused_module):
        monkeypatch.setattr(module, "open_store_io", lambda: StoreIO(store))
        monkeypatch.setattr(module, "get_session", lambda target: spark)


def test_a_fused_region_runs_as_one_task_and_commits_what_the_unfused_tasks_commit(
        spark: Any, store: ResultStore, monkeypatch: pytest.MonkeyPatch) -> None:
    patch(monkeypatch, store, spark)
    steps = Steps()
    fused = JobRuntime(JobSpec(resolve(DECLARED, FUSED), {}, auto=_declaration(FUSED)), steps.impls())
    members = fused.spec.names.subtasks("gen.agg.0")
    assert members == tuple(SubtaskId.parse(s) for s in ("gen#0", "gen#1", "agg#0", "agg#1"))
    ti = FakeTI(commit_src(store, "fused"), "fused", "gen.agg.0")
    summary = run_fused(fused, members, {"ti": ti, "params": {}})

    assert sorted(ti.pulled) == [("src.0", "partition:src->gen"), ("src.1", "partition:src->gen")]
    assert sorted(ti.pushed) == ["partition:agg->sink:0", "partition:agg->sink:1"]
    assert store.partitions(DAG, "fused", "gen->agg") == ()  # the exchange inside the region never reached S3
    assert [c[0] for c in steps.calls] == ["gen#0", "gen#1", "agg#0", "agg#1"]
    assert steps.calls[2][1] == {"gen": (PartitionId("gen->agg", 0), PartitionId("gen->agg", 1))}
    assert steps.columns == ["k", "v"]  # in memory too, the fused result keeps only the columns its edge declared
    assert summary.members == members and set(summary.ledger.outputs) == {"agg->sink#0", "agg->sink#1"}
    assert set(summary.ledger.inputs) == {"src->gen#0", "src->gen#1"}

    # the same graph unfused (gen->agg BLOCKING): four tasks, what they commit is the same
    steps = Steps()
    plain = JobRuntime(JobSpec(resolve(DECLARED, ExchangePlan()), {}, auto=_declaration(ExchangePlan())),
                       steps.impls())
    xcoms = commit_src(store, "plain")
    for task in ("gen.0", "gen.1", "agg.0", "agg.1"):
        ti = FakeTI(xcoms, "plain", task)
        run_chain(plain, plain.spec.names.subtasks(task) or (), {"ti": ti, "params": {}})
        xcoms.update({(task, key): value for key, value in ti.pushed.items()})
    assert steps.columns == ["k", "v"]
    assert rows(spark, store, "fused") == rows(spark, store, "plain") != []


def test_a_consumer_outside_pulls_each_partition_from_the_fused_task(
        spark: Any, store: ResultStore, monkeypatch: pytest.MonkeyPatch) -> None:
    from airflow_region_failover.spark.run import pull_refs

    patch(monkeypatch, store, spark)
    fused = JobRuntime(JobSpec(resolve(DECLARED, FUSED), {}, auto=_declaration(FUSED)), Steps().impls())
    ti = FakeTI(commit_src(store, "pull"), "pull", "gen.agg.0")
    run_fused(fused, fused.spec.names.subtasks("gen.agg.0") or (), {"ti": ti, "params": {}})
    sink = FakeTI({("gen.agg.0", key): value for key, value in ti.pushed.items()}, "pull", "sink.0")
    refs = pull_refs(sink, fused.graph, SubtaskId("sink", 0), fused.spec.names)
    assert [r.partition for rs in refs.values() for r in rs] == [PartitionId("agg->sink", 0),
                                                                  PartitionId("agg->sink", 1)]


ONE_JOB = (JobGraphBuilder().step("src", parallelism=2).step("gen", parallelism=2, deterministic=True)
           .step("agg", parallelism=2).step("sink", parallelism=1)
           .edge("src", "gen", exchange="BLOCKING", distribution="POINTWISE")
           .edge("gen", "agg", exchange="AUTO", partition_by=["k"])
           .edge("agg", "sink", exchange="AUTO", distribution="BROADCAST").build())
ALL_FUSED = ExchangePlan({"gen->agg": Choice.FUSED, "agg->sink": Choice.FUSED})


def test_a_region_committing_one_result_reads_its_keyed_edge_through_one_shuffle_and_commits_what_unfused_does(
        spark: Any, store: ResultStore, monkeypatch: pytest.MonkeyPatch) -> None:
    #   src#0,1 ==B==> gen#0,1 --FUSED keyed by k--> agg#0,1 --FUSED--> sink#0     (one task, one commit: sink's)
    # gen is deterministic and its reads are one job: not persisted, shuffled once for both agg subtasks
    from airflow_region_failover.graph.auto import AutoDeclaration, declared_columns

    patch(monkeypatch, store, spark)
    steps = Steps()
    impls = {**steps.impls(), "sink": StepImpl("sink", fn=_total)}
    results = {}
    for run_id, plan in (("onejob", ALL_FUSED), ("onejob-plain", ExchangePlan())):
        declaration = AutoDeclaration(("gen->agg", "agg->sink"), {}, plan, declared_columns(ONE_JOB))
        runtime = JobRuntime(JobSpec(resolve(ONE_JOB, plan), {}, auto=declaration), impls)
        xcoms = commit_src(store, run_id)
        tasks = ["gen.agg.sink.0"] if plan is ALL_FUSED else ["gen.0", "gen.1", "agg.0", "agg.1", "sink.0"]
        for task in tasks:
            ti = FakeTI(xcoms, run_id, task)
            members = runtime.spec.names.subtasks(task) or ()
            if runtime.spec.names.is_fused(task):
                run_fused(runtime, members, {"ti": ti, "params": {}})
            else:
                run_chain(runtime, members, {"ti": ti, "params": {}})
            xcoms.update({(task, key): value for key, value in ti.pushed.items()})
        frame = store.read(spark, DAG, run_id, PartitionId("sink", 0))
        results[run_id] = sorted((r.k, r.total) for r in frame.collect())
    assert store.partitions(DAG, "onejob", "gen->agg") == () and store.partitions(DAG, "onejob", "agg->sink") == ()
    assert results["onejob"] == results["onejob-plain"] != []
    assert [c[0] for c in steps.calls[:4]] == ["gen#0", "gen#1", "agg#0", "agg#1"]


def _total(spark: Any, inputs: Any, context: Any) -> Any:
    return inputs["agg"].groupBy("k").sum("total").withColumnRenamed("sum(total)", "total")


def _declaration(plan: ExchangePlan) -> Any:
    from airflow_region_failover.graph.auto import AutoDeclaration, declared_columns

    return AutoDeclaration(("gen->agg",), {}, plan, declared_columns(DECLARED))


class PureSteps(Steps):
    """:class:`Steps` with a ``gen`` that does not use its subtask index (rescalable), recording each call's
    parallelism too."""

    def gen(self, spark: Any, inputs: Any, context: Any) -> Any:
        self.calls.append((f"{context.subtask} of {context.parallelism}", dict(context.partitions)))
        return inputs["src"].selectExpr("id % 7 AS k", "id * 3 AS v")

    def agg(self, spark: Any, inputs: Any, context: Any) -> Any:
        self.calls.append((f"{context.subtask} of {context.parallelism}", dict(context.partitions)))
        return inputs["gen"].groupBy("k").sum("v").withColumnRenamed("sum(v)", "total")


@pytest.mark.parametrize("rescalable", [("gen", "agg"), ("agg",)])
def test_a_fused_task_calls_a_rescalable_step_once_on_all_its_inputs_and_commits_what_unfused_does(
        spark: Any, store: ResultStore, monkeypatch: pytest.MonkeyPatch, rescalable: tuple[str, ...]) -> None:
    #   src#0,1 ==B==> gen#0,1 --FUSED keyed by k--> agg#0,1 --FUSED--> sink#0     (one task, one commit: sink's)
    # gen and agg rescalable: each called once, as subtask 0 of 1; the union of src's partitions, all key groups
    from airflow_region_failover.graph.auto import AutoDeclaration, declared_columns

    patch(monkeypatch, store, spark)
    shuffled: list[object] = []  # agg, alone reading every key group, needs no shared exchange: Spark's shuffle
    monkeypatch.setattr(fused_module.Fused, "_shuffled", lambda *args: shuffled.append(args))
    graph = (JobGraphBuilder().step("src", parallelism=2).step("gen", parallelism=2, rescalable="gen" in rescalable)
             .step("agg", parallelism=2, rescalable="agg" in rescalable).step("sink", parallelism=1)
             .edge("src", "gen", exchange="BLOCKING", distribution="POINTWISE")
             .edge("gen", "agg", exchange="AUTO", partition_by=["k"])
             .edge("agg", "sink", exchange="AUTO", distribution="BROADCAST").build())
    results, calls = {}, {}
    for run_id, plan in ((f"rescaled-{len(rescalable)}", ALL_FUSED), (f"rescaled-{len(rescalable)}-plain",
                                                                      ExchangePlan())):
        steps = PureSteps()
        impls = {**steps.impls(), "sink": StepImpl("sink", fn=_total)}
        declaration = AutoDeclaration(("gen->agg", "agg->sink"), {}, plan, declared_columns(graph))
        runtime = JobRuntime(JobSpec(resolve(graph, plan), {}, auto=declaration), impls)
        xcoms = commit_src(store, run_id)
        for task in ["gen.agg.sink.0"] if plan is ALL_FUSED else ["gen.0", "gen.1", "agg.0", "agg.1", "sink.0"]:
            ti = FakeTI(xcoms, run_id, task)
            members = runtime.spec.names.subtasks(task) or ()
            if runtime.spec.names.is_fused(task):
                summary = run_fused(runtime, members, {"ti": ti, "params": {}})
                assert summary.members == members  # every subtask named: the history splits the task over them
            else:
                run_chain(runtime, members, {"ti": ti, "params": {}})
            xcoms.update({(task, key): value for key, value in ti.pushed.items()})
        results[run_id] = sorted((r.k, r.total) for r in store.read(spark, DAG, run_id, PartitionId("sink", 0))
                                 .collect())
        calls[run_id] = steps.calls
    fused, plain = (f"rescaled-{len(rescalable)}", f"rescaled-{len(rescalable)}-plain")
    assert results[fused] == results[plain] != []
    gen_calls = [("gen#0 of 1", {"src": (PartitionId("src->gen", 0), PartitionId("src->gen", 1))})] \
        if "gen" in rescalable else [("gen#0 of 2", {"src": (PartitionId("src->gen", 0),)}),
                                     ("gen#1 of 2", {"src": (PartitionId("src->gen", 1),)})]
    producers = (PartitionId("gen->agg", 0),) if "gen" in rescalable else (PartitionId("gen->agg", 0),
                                                                          PartitionId("gen->agg", 1))
    assert calls[fused] == [*gen_calls, ("agg#0 of 1", {"gen": producers})] and shuffled == []
    assert [c[0] for c in calls[plain]] == ["gen#0 of 2", "gen#1 of 2", "agg#0 of 2", "agg#1 of 2"]

"""A chain subtask on real Spark and a real S3 store (SeaweedFS): both step functions run in one session, the
DataFrame passes in memory, and nothing of the chain's interior is written.

    src#i ==B==> gen#i -P-> clean#i ==B==> sink#i        (all POINTWISE, parallelism 2; gen -> clean chained)
"""

from __future__ import annotations

import secrets
from collections.abc import Iterator
from dataclasses import dataclass, field
from types import SimpleNamespace
from typing import Any

import pyarrow as pa
import pytest

from airflow_region_failover import JobGraphBuilder, PartitionId, SubtaskId
from airflow_region_failover.graph.chains import compute_chains
from airflow_region_failover.graph.model import Exchange
from airflow_region_failover.graph.subtasks import consumed_partitions
from airflow_region_failover.job import JobRuntime, JobSpec, StepImpl
from airflow_region_failover.naming import xcom_key
from airflow_region_failover.spark import chain as chain_module
from airflow_region_failover.spark.chain import run_chain
from airflow_region_failover.spark.compute import compute
from airflow_region_failover.spark.exchange import PartitionRef
from airflow_region_failover.spark.run import SubtaskRun, chain_contexts, current_inputs, input_versions
from airflow_region_failover.spark.store_io import StoreIO
from airflow_region_failover.standalone.seaweedfs import S3Endpoint
from airflow_region_failover.store.keys import AttemptId
from airflow_region_failover.store.result_store import ResultStore
from tests.support.spark import embedded

pytestmark = pytest.mark.integration

GRAPH = (JobGraphBuilder().step("src", parallelism=2).step("gen", parallelism=2).step("clean", parallelism=2)
         .step("sink", parallelism=2)
         .edge("src", "gen", exchange="BLOCKING", distribution="POINTWISE")
         .edge("gen", "clean", exchange="PIPELINED", distribution="POINTWISE")
         .edge("clean", "sink", exchange="BLOCKING", distribution="POINTWISE").build())
DAG, RUN = "chain", "run"


@pytest.fixture(scope="module")
def spark() -> Iterator[Any]:
    yield from embedded(shuffle_partitions=2)


@pytest.fixture
def store(s3_server: S3Endpoint) -> ResultStore:
    return ResultStore.from_endpoint(s3_server.endpoint_url, s3_server.access_key, s3_server.secret_key,
                                     s3_server.bucket, prefix=f"chain-{secrets.token_hex(4)}", spark_io="driver")


@dataclass
class Recorder:
    """A StoreIO that records every partition written and read."""

    io: StoreIO
    writes: list[PartitionId] = field(default_factory=list)
    reads: list[PartitionId] = field(default_factory=list)

    def current(self, ref: PartitionRef) -> Any:
        return self.io.current(ref)

    def read(self, spark: Any, ref: PartitionRef, current: Any = None) -> Any:
        self.reads.append(ref.partition)
        return self.io.read(spark, ref, current)

    def read_keys(self, spark: Any, ref: PartitionRef, edge: Any, key_groups: range, current: Any = None) -> Any:
        self.reads.append(ref.partition)
        return self.io.read_keys(spark, ref, edge, key_groups, current)

    def write(self, frame: Any, ref: PartitionRef, inputs: Any = (), code: str = "", cut: Any = None,
              clustering: Any = None) -> PartitionRef:
        self.writes.append(ref.partition)
        return self.io.write(frame, ref, inputs, code, cut, clustering)


class Calls:
    def __init__(self) -> None:
        self.seen: list[tuple[str, Any, Any]] = []
        self.returned: dict[str, Any] = {}

    def gen(self, spark: Any, inputs: Any, context: Any) -> Any:
        self.seen.append(("gen", spark, context))
        out = inputs["src"].selectExpr("id", "id * 10 AS v")
        self.returned["gen"] = out
        return out

    def clean(self, spark: Any, inputs: Any, context: Any) -> Any:
        self.seen.append(("clean", spark, context))
        assert inputs["gen"] is self.returned["gen"], "the chain passes gen's DataFrame itself, in memory"
        return inputs["gen"].where("id % 3 != 0")


def commit_src(store: ResultStore) -> list[PartitionRef]:
    refs = []
    for index in (0, 1):
        manifest, _ = store.write_arrow(pa.table({"id": list(range(index * 10, index * 10 + 10))}),
                                        AttemptId(DAG, RUN, PartitionId("src->gen", index), 1))
        refs.append(PartitionRef("src->gen", index, Exchange.BLOCKING, DAG, RUN, 1, manifest.row_count))
    return refs


def test_a_chain_runs_both_functions_in_one_session_and_writes_only_its_tail(spark: Any, store: ResultStore) -> None:
    src = commit_src(store)
    calls, io = Calls(), Recorder(StoreIO(store))
    members = compute_chains(GRAPH).of("gen").subtasks(1)
    assert members == (SubtaskId("gen", 1), SubtaskId("clean", 1))
    refs = {GRAPH.inputs("gen")[0]: (src[1],)}
    ti = SimpleNamespace(dag_id=DAG, run_id=RUN, try_number=1)
    contexts = chain_contexts(GRAPH, members, refs, {"ti": ti, "params": {"x": 1}})
    impls = (StepImpl("gen", fn=calls.gen), StepImpl("clean", fn=calls.clean))
    current = current_inputs(io, refs)  # type: ignore[arg-type]
    run = SubtaskRun(GRAPH, members, impls, contexts, refs, io, current,  # type: ignore[arg-type]
                     input_versions(current, GRAPH, members[0], refs), "code")
    written = compute(spark, run)
    assert [(name, s) for name, s, _ in calls.seen] == [("gen", spark), ("clean", spark)]
    gen_ctx, clean_ctx = calls.seen[0][2], calls.seen[1][2]
    assert (gen_ctx.subtask, clean_ctx.subtask) == members and clean_ctx.params == {"x": 1}
    assert gen_ctx.partitions == {"src": (PartitionId("src->gen", 1),)}
    assert clean_ctx.partitions == {"gen": (PartitionId("gen->clean", 1),)}
    assert io.reads == [PartitionId("src->gen", 1)]
    assert io.writes == [PartitionId("clean->sink", 1)]
    assert [(r.partition, r.exchange, r.rows) for r in written] == [(PartitionId("clean->sink", 1), "BLOCKING", 7)]
    assert store.partitions(DAG, RUN, "gen->clean") == ()  # nothing of the interior reached S3
    manifest = store.manifest(DAG, RUN, PartitionId("clean->sink", 1))
    assert [v.partition for v in manifest.inputs] == [PartitionId("src->gen", 1)] and manifest.code == "code"
    rows = store.read(spark, DAG, RUN, PartitionId("clean->sink", 1)).collect()
    assert sorted((r.id, r.v) for r in rows) == [(i, i * 10) for i in range(10, 20) if i % 3]


@dataclass
class FakeTI:
    xcoms: dict[tuple[str, str], Any]
    pushed: dict[str, Any] = field(default_factory=dict)
    pulled: list[str] = field(default_factory=list)
    dag_id: str = DAG
    run_id: str = RUN
    try_number: int = 1
    task_id: str = "gen.clean.0"

    def xcom_pull(self, *, task_ids: str, key: str) -> Any:
        self.pulled.append(task_ids)
        return self.xcoms.get((task_ids, key))

    def xcom_push(self, *, key: str, value: Any) -> None:
        self.pushed[key] = value


def test_run_chain_pulls_the_heads_inputs_and_publishes_the_tails_outputs(
        spark: Any, store: ResultStore, monkeypatch: pytest.MonkeyPatch) -> None:
    """In an Airflow task: the chain task gen.clean.0 pulls src#0's ref from task src.0, publishes clean->sink#0
    under its own XCom key; the consumer sink#0 then pulls it from the chain task's id."""
    from airflow_region_failover.spark.run import pull_refs

    src = commit_src(store)
    calls = Calls()
    impls = {"src": StepImpl("src", fn=calls.gen), "gen": StepImpl("gen", fn=calls.gen),
             "clean": StepImpl("clean", fn=calls.clean), "sink": StepImpl("sink", fn=calls.clean)}
    runtime = JobRuntime(JobSpec(GRAPH, {}), impls)
    monkeypatch.setattr(chain_module, "open_store_io", lambda: StoreIO(store))
    monkeypatch.setattr(chain_module, "get_session", lambda target: spark)
    ti = FakeTI({("src.0", xcom_key("src->gen")): src[0].to_json()})
    summary = run_chain(runtime, (SubtaskId("gen", 0), SubtaskId("clean", 0)), {"ti": ti, "params": {}}).to_json()
    assert ti.pulled == ["src.0"]
    assert list(ti.pushed) == [xcom_key("clean->sink")]
    src_bytes = store.manifest(src[0].dag_id, src[0].run_id, src[0].partition).total_bytes
    written = store.manifest(src[0].dag_id, src[0].run_id, PartitionId("clean->sink", 0))
    assert summary == {"subtask": "clean#0", "chain": ["gen#0", "clean#0"], "attempt": 1,
                       "rows": {"clean->sink": 6},
                       "read": {"bytes": src_bytes, "objects": 1, "partition_bytes": src_bytes},
                       # the ledger (spark/ledger.py): the head's BLOCKING input, the tail's BLOCKING output
                       "inputs": {str(src[0].partition): {"attempt": 1, "bytes": src_bytes, "objects": 1,
                                                          "reused": False}},
                       "outputs": {"clean->sink#0": {"attempt": 1, "rows": 6, "bytes": written.total_bytes,
                                                     "objects": len(written.objects),
                                                     "checksum": written.content_checksum, "kept": False}}}
    consumer = FakeTI({("gen.clean.0", key): value for key, value in ti.pushed.items()})
    refs = pull_refs(consumer, GRAPH, SubtaskId("sink", 0), runtime.spec.names)
    assert consumer.pulled == ["gen.clean.0"]
    assert [r.partition for rs in refs.values() for r in rs] == [PartitionId("clean->sink", 0)]
    assert consumed_partitions(GRAPH, SubtaskId("sink", 0))

"""The step operator's data contract, with fakes (single-module unit tests): which refs a subtask pulls, and that
it never reads anything but exactly what its producers' current tries published."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import pytest

from airflow_region_failover import GraphError, JobGraphBuilder, PartitionId, SubtaskId
from airflow_region_failover.exceptions import NotAvailable
from airflow_region_failover.graph.model import Exchange
from airflow_region_failover.naming import xcom_key
from airflow_region_failover.spark.exchange import (
    InputUnavailable,
    PartitionRef,
    StepOutputError,
    check_sinks,
    match_outputs,
    output_results,
)
from airflow_region_failover.spark.run import pull_refs, step_context
from airflow_region_failover.spark.store_io import StoreIO
from airflow_region_failover.store.keys import AttemptId

GRAPH = (JobGraphBuilder().step("gen", parallelism=2).step("clean", parallelism=2).step("join", parallelism=2)
         .step("report")
         .edge("gen", "clean", exchange="PIPELINED", distribution="POINTWISE")
         .edge("clean", "join", exchange="BLOCKING", result="rows")
         .edge("join", "report", exchange="BLOCKING").build())


def ref(result: str, index: int, exchange: Exchange = Exchange.BLOCKING, attempt: int = 1) -> PartitionRef:
    return PartitionRef(result, index, exchange, "d", "r", attempt, 10)


@dataclass
class FakeTI:
    """Answers ``xcom_pull`` from a dict ``(task_id, key) -> value`` and records what was pulled."""

    xcoms: dict[tuple[str, str], Any]
    pulled: list[tuple[str, str]] = field(default_factory=list)

    def xcom_pull(self, *, task_ids: str, key: str) -> Any:
        self.pulled.append((task_ids, key))
        return self.xcoms.get((task_ids, key))


def test_all_to_all_consumer_pulls_every_producer_partition() -> None:
    ti = FakeTI({(f"clean.{i}", xcom_key("rows")): ref("rows", i).to_json() for i in range(2)})
    refs = pull_refs(ti, GRAPH, SubtaskId("join", 1))
    assert [r.partition for rs in refs.values() for r in rs] == [PartitionId("rows", 0), PartitionId("rows", 1)]
    assert ti.pulled == [("clean.0", "partition:rows"), ("clean.1", "partition:rows")]


def test_pointwise_consumer_pulls_only_its_producer() -> None:
    ti = FakeTI({("gen.1", xcom_key("gen->clean")): ref("gen->clean", 1, Exchange.PIPELINED).to_json()})
    refs = pull_refs(ti, GRAPH, SubtaskId("clean", 1))
    assert ti.pulled == [("gen.1", "partition:gen->clean")]
    context = step_context(GRAPH, SubtaskId("clean", 1), refs, {"params": {"region_failover_job": {}, "x": 1}})
    assert context.partitions == {"gen": (PartitionId("gen->clean", 1),)}
    assert context.params == {"x": 1} and context.index == 1 and context.parallelism == 2


def test_missing_xcom_is_an_unavailable_input_naming_the_partition() -> None:
    """A cleared producer has no XCom until its new try succeeds: the consumer never reads stale output."""
    ti = FakeTI({("clean.0", xcom_key("rows")): ref("rows", 0).to_json()})
    with pytest.raises(InputUnavailable, match=r"rows#1 is unavailable: its producer published no location") as info:
        pull_refs(ti, GRAPH, SubtaskId("join", 0))
    assert info.value.partition == PartitionId("rows", 1)


def test_ref_of_another_partition_is_refused() -> None:
    with pytest.raises(InputUnavailable, match=r"published rows#0 instead"):
        PartitionRef.from_json(ref("rows", 0).to_json(), partition=PartitionId("rows", 1))


def test_a_ref_s_exchange_is_the_graph_s_enum_and_its_json_form_the_plain_name() -> None:
    body = ref("gen->clean", 1, Exchange.PIPELINED).to_json()
    assert body == {"result": "gen->clean", "index": 1, "exchange": "PIPELINED", "dag_id": "d", "run_id": "r",
                    "attempt": 1, "rows": 10}
    assert type(body["exchange"]) is str
    parsed = PartitionRef.from_json(body, partition=PartitionId("gen->clean", 1))
    assert parsed.exchange is Exchange.PIPELINED and parsed == ref("gen->clean", 1, Exchange.PIPELINED)
    with pytest.raises(InputUnavailable, match=r"gen->clean#1 is unavailable: malformed location XCom"):
        PartitionRef.from_json({**body, "exchange": "pipelined!"}, partition=PartitionId("gen->clean", 1))


@dataclass
class FakeManifest:
    attempt: int
    row_count: int = 5
    partition: PartitionId = field(default_factory=lambda: PartitionId("rows", 0))
    content_checksum: str = "c" * 64
    total_bytes: int = 100
    objects: tuple[Any, ...] = ("one object",)

    def version(self, key_groups: range | None = None, partition_by: tuple[str, ...] = (),
                max_parallelism: int = 0) -> Any:
        from airflow_region_failover.store.manifest import InputVersion

        return InputVersion(self.partition, self.attempt, self.content_checksum, key_groups)


@dataclass
class FakeStore:
    current_attempt: int
    reads: list[PartitionId] = field(default_factory=list)
    lookups: int = 0

    def manifest(self, dag_id: str, run_id: str, partition: PartitionId) -> FakeManifest:
        self.lookups += 1
        return FakeManifest(self.current_attempt, partition=partition)

    def read_version(self, spark: Any, manifest: FakeManifest, objects: Any = None, checked: Any = None) -> str:
        self.reads.append(manifest.partition)
        return "frame"

    def write(self, frame: Any, attempt: AttemptId, inputs: tuple[Any, ...] = (), code: str = "", cut: Any = None,
              clustering: Any = None, confirm: Any = ()) -> tuple[FakeManifest, None]:
        self.inputs = inputs
        return FakeManifest(attempt.attempt, 42), None


def test_read_returns_exactly_the_published_attempt() -> None:
    store = FakeStore(current_attempt=2)
    assert StoreIO(store).read(None, ref("rows", 0, attempt=2)) == "frame"  # type: ignore[arg-type]
    with pytest.raises(NotAvailable, match=r"published attempt 1, but the current version is attempt 2"):
        StoreIO(store).read(None, ref("rows", 0, attempt=1))  # type: ignore[arg-type]
    assert store.reads == [PartitionId("rows", 0)]


def test_read_of_a_version_already_looked_up_does_not_look_it_up_again() -> None:
    store = FakeStore(current_attempt=2)
    io = StoreIO(store)  # type: ignore[arg-type]
    current = io.current(ref("rows", 0, attempt=2))
    assert io.read(None, ref("rows", 0, attempt=2), current) == "frame"  # type: ignore[arg-type]
    assert store.lookups == 1 and store.reads == [PartitionId("rows", 0)]
    assert (io.reads.bytes, io.reads.objects, io.reads.partition_bytes) == (100, 1, 100), "the read is counted"


def test_write_records_rows_of_the_commit_and_the_input_versions() -> None:
    store = FakeStore(1)
    written = StoreIO(store).write("frame", ref("rows", 1, attempt=3), ("v",))  # type: ignore[arg-type]
    assert written.rows == 42 and written.attempt == 3 and store.inputs == ("v",)


def test_input_versions_are_checked_like_reads_and_name_the_partition() -> None:
    """Only BLOCKING inputs have versions; a superseded one is the failover cause, named."""
    from airflow_region_failover.spark.run import current_inputs, input_versions

    refs = {GRAPH.inputs("join")[0]: (ref("rows", 0, attempt=2), ref("rows", 1, attempt=2)),
            GRAPH.inputs("clean")[0]: (ref("gen->clean", 0, Exchange.PIPELINED, attempt=2),)}
    versions = input_versions(current_inputs(StoreIO(FakeStore(2)), refs), GRAPH,  # type: ignore[arg-type]
                              SubtaskId("join", 0), refs)
    assert [(str(v.partition), v.attempt) for v in versions] == [("rows#0", 2), ("rows#1", 2)]
    with pytest.raises(InputUnavailable, match=r"input partition rows#0 is unavailable: .*current version is "
                                               r"attempt 3"):
        current_inputs(StoreIO(FakeStore(3)), refs)  # type: ignore[arg-type]


def test_outputs_must_match_declared_results() -> None:
    with pytest.raises(StepOutputError, match=r"step 'clean' returned None but produces rows"):
        match_outputs(GRAPH, "clean", None)
    with pytest.raises(StepOutputError, match=r"step 'clean' returned key 'nope'; it produces rows"):
        match_outputs(GRAPH, "clean", {"nope": 1})
    with pytest.raises(StepOutputError, match=r"step 'clean' returned int"):
        match_outputs(GRAPH, "clean", 3)
    assert match_outputs(GRAPH, "report", None) == {}


def test_sink_step_writes_its_own_blocking_result() -> None:
    (sink,) = output_results(GRAPH, "report")
    assert sink.id == "report" and sink.exchange.value == "BLOCKING"
    clash = (JobGraphBuilder().step("a").step("b").step("c")
             .edge("a", "b", exchange="BLOCKING", result="c").build())
    with pytest.raises(GraphError, match=r"step 'c' has no results.*rename that result"):
        check_sinks(clash)

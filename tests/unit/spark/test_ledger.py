"""A task's ledger (:mod:`airflow_region_failover.spark.ledger`): the BLOCKING partitions it read and published,
with attempts and bytes from their manifests, and the restart that started it (fakes for the store)::

    a#0 ==+==> c#0        a (2) =BLOCKING ALL_TO_ALL=> c (1), c's sink result "c"
    a#1 ==+     ^         p -PIPELINED-> c (scratch: in neither list)
    p#0 --------+
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field, replace
from typing import Any

from airflow_region_failover import JobGraphBuilder, PartitionId, SubtaskId
from airflow_region_failover.failover.run_log import Decision, DecisionStatus, RunLog
from airflow_region_failover.graph.model import Exchange
from airflow_region_failover.spark.exchange import PartitionRef
from airflow_region_failover.spark.ledger import ReadTotals, TaskLedger, TaskSummary, fused_summary, ledger, summary
from airflow_region_failover.spark.run import SubtaskRun, current_inputs, restart_of, step_context
from airflow_region_failover.spark.store_io import StoreIO
from airflow_region_failover.store.manifest import Manifest, ObjectEntry
from airflow_region_failover.timeline import Clock, Span

GRAPH = (JobGraphBuilder().step("a", parallelism=2).step("p").step("c")
         .edge("a", "c", exchange="BLOCKING").edge("p", "c", exchange="PIPELINED").build())


def manifest(partition: PartitionId, attempt: int, sizes: tuple[int, ...]) -> Manifest:
    objects = tuple(ObjectEntry(f"{partition.result}/{attempt}/{i}", size, "0" * 64) for i, size in enumerate(sizes))
    return Manifest("d", "r", partition, attempt, "0123456789abcdef", "{}", 7, objects, "2026-01-01T00:00:00+00:00")


@dataclass
class FakeStore:
    manifests: dict[PartitionId, Manifest] = field(default_factory=dict)

    def manifest(self, dag_id: str, run_id: str, partition: PartitionId) -> Manifest:
        return self.manifests[partition]


def ref(result: str, index: int, attempt: int, exchange: Exchange = Exchange.BLOCKING) -> PartitionRef:
    return PartitionRef(result, index, exchange, "d", "r", attempt, 7)


def refs() -> dict[Any, tuple[PartitionRef, ...]]:
    edges = {e.source: e for e in GRAPH.inputs("c")}
    return {edges["a"]: (ref("a->c", 0, 2), ref("a->c", 1, 1)), edges["p"]: (ref("p->c", 0, 1, Exchange.PIPELINED),)}


def decision(reused: tuple[str, ...]) -> Decision:
    return Decision(id=4, status=DecisionStatus.APPLIED, created=0.0, failures=(), strategy="region",
                    restart=("a.0", "c.0"), reasons={"a.0": "failed", "c.0": "consumer"}, reused=reused)


def run_of(io: StoreIO, refs: dict[Any, tuple[PartitionRef, ...]], restart: Decision | None) -> SubtaskRun:
    """The run of task c.0, its BLOCKING inputs' current manifests looked up (as before reading them)."""
    head = SubtaskId("c", 0)
    return SubtaskRun(GRAPH, (head,), (), (step_context(GRAPH, head, refs, {}),), refs, io, current_inputs(io, refs),
                      (), "", restart, "c.0")


def test_a_restarted_task_that_recomputed_lists_its_blocking_inputs_and_its_sink_output() -> None:
    store = FakeStore({PartitionId("a->c", 0): manifest(PartitionId("a->c", 0), 2, (10, 20)),
                       PartitionId("a->c", 1): manifest(PartitionId("a->c", 1), 1, (5,))})
    run = run_of(StoreIO(store), refs(), decision(("a->c#1",)))  # type: ignore[arg-type]
    store.manifests[PartitionId("c", 0)] = manifest(PartitionId("c", 0), 2, (3, 4, 5))  # a script step committed it
    got = ledger(run, (ref("c", 0, 2),)).to_json()
    assert got["inputs"] == {"a->c#0": {"attempt": 2, "bytes": 30, "objects": 2, "reused": False},
                             "a->c#1": {"attempt": 1, "bytes": 5, "objects": 1, "reused": True}}
    assert got["outputs"] == {"c#0": {"attempt": 2, "rows": 7, "bytes": 12, "objects": 3, "kept": False,
                                      "checksum": store.manifests[PartitionId("c", 0)].content_checksum}}
    assert got["restart"] == {"decision": 4, "strategy": "region", "reason": "consumer"}


def test_a_try_no_clear_started_has_no_restart_and_an_output_of_another_attempt_has_no_sizes() -> None:
    store = FakeStore({PartitionId("c", 0): manifest(PartitionId("c", 0), 3, (1,))})
    got = ledger(run_of(StoreIO(store), {}, None), (ref("c", 0, 2),)).to_json()  # type: ignore[arg-type]
    assert "restart" not in got and got["inputs"] == {}
    assert got["outputs"] == {"c#0": {"attempt": 2, "rows": 7, "kept": False}}


@dataclass
class FakeTI:
    try_number: int
    dag_id: str = "d"
    run_id: str = "r"
    task_id: str = "c.0"


class Logs:
    def __init__(self, doc: RunLog | Exception) -> None:
        self.doc = doc

    def read(self, dag_id: str, run_id: str) -> RunLog:
        if isinstance(self.doc, Exception):
            raise self.doc
        return self.doc


def test_the_restart_is_the_applied_decision_whose_clear_started_this_try() -> None:
    doc = RunLog("d", "r", decisions=(decision(()),), cleared_tries={"c.0": 1})
    assert restart_of(FakeTI(2), Logs(doc)) == decision(())  # type: ignore[arg-type]
    assert restart_of(FakeTI(3), Logs(doc)) is None, "a later try (Airflow's retry) was not started by the clear"
    assert restart_of(FakeTI(1), Logs(OSError("never read"))) is None  # type: ignore[arg-type]
    assert restart_of(FakeTI(2), Logs(OSError("S3 down"))) is None  # type: ignore[arg-type]


def test_the_summary_of_a_kept_try_keeps_its_json_form_and_reads_back_as_it_was() -> None:
    """The summary is the step task's XCom ``return_value``: its JSON keys are the ones the task always returned."""
    store = FakeStore({PartitionId("a->c", 0): manifest(PartitionId("a->c", 0), 2, (10, 20)),
                       PartitionId("a->c", 1): manifest(PartitionId("a->c", 1), 1, (5,)),
                       PartitionId("c", 0): manifest(PartitionId("c", 0), 1, (3,))})
    run = run_of(StoreIO(store), refs(), decision(()))  # type: ignore[arg-type]
    got = summary(run, (ref("c", 0, 1),), kept=True)
    body = got.to_json()
    assert list(body) == ["subtask", "attempt", "rows", "kept", "read", "inputs", "outputs", "restart"]
    assert (body["subtask"], body["attempt"], body["rows"], body["kept"]) == ("c#0", 1, {"c": 7}, {"c": 1})
    assert body["read"] == {"bytes": 0, "objects": 0, "partition_bytes": 0}
    assert body["outputs"]["c#0"]["kept"] is True and got.ledger.kept
    assert json.loads(json.dumps(body)) == body, "plain JSON"
    assert TaskSummary.from_json(body) == got


def test_a_chain_summary_names_its_members_and_a_first_try_has_no_restart() -> None:
    members = (SubtaskId("a", 0), SubtaskId("b", 0))
    got = TaskSummary(members, 1, {"b->c": 3}, ReadTotals(5, 1, 5), TaskLedger())
    body = got.to_json()
    assert body == {"subtask": "b#0", "chain": ["a#0", "b#0"], "attempt": 1, "rows": {"b->c": 3},
                    "read": {"bytes": 5, "objects": 1, "partition_bytes": 5}, "inputs": {}, "outputs": {}}
    assert TaskSummary.from_json(body) == got and got.subtask == SubtaskId("b", 0)


def test_a_measured_summary_adds_its_timeline_last_and_keeps_every_other_key() -> None:
    clock = Clock(now=1000.0, process_started=998.5)
    clock.spans.append(Span("lookup", 0.25, 0.5))
    clock.add_work({"encode": 1.5})
    got = replace(TaskSummary((SubtaskId("c", 0),), 1, {"c": 3}, ReadTotals(0, 0, 0), TaskLedger()),
                  timeline=clock.timeline())
    body = got.to_json()
    assert list(body) == ["subtask", "attempt", "rows", "read", "inputs", "outputs", "timeline"]
    assert body["timeline"]["spans"] == [["lookup", 0.25, 0.5]] and body["timeline"]["work"] == {"encode": 1.5}
    assert body["timeline"]["process_started"] == 998.5 and body["timeline"]["started"] == 1000.0
    assert TaskSummary.from_json(json.loads(json.dumps(body))) == got


def test_a_fused_summary_lists_what_a_kept_member_would_have_read_as_a_kept_task_does() -> None:
    """A fused task's member ``c#0`` reads both ``a->c`` partitions. A try that kept ``c#0``'s region (it resumed:
    its commits of an earlier try stand) lists them too — the module rule: every BLOCKING partition the task read
    or, where it kept its outputs, would have read (the kept outputs' lineage), as a kept chain's summary does."""
    store = FakeStore({PartitionId("a->c", 0): manifest(PartitionId("a->c", 0), 2, (10, 20)),
                       PartitionId("a->c", 1): manifest(PartitionId("a->c", 1), 1, (5,)),
                       PartitionId("c", 0): manifest(PartitionId("c", 0), 1, (3,))})
    io = StoreIO(store)  # type: ignore[arg-type]
    member = SubtaskId("c", 0)
    member_refs = {member: refs()}
    current = current_inputs(io, refs())
    ran = fused_summary(GRAPH, (member,), 2, io, member_refs, current, (), None, "c.0")
    kept = fused_summary(GRAPH, (member,), 2, io, member_refs, current, (), None, "c.0", resumed=(member,))
    assert set(ran.ledger.inputs) == {"a->c#0", "a->c#1"} and kept.ledger.inputs == ran.ledger.inputs
    assert kept.resumed == (member,)
    whole = run_of(StoreIO(store), refs(), None)  # type: ignore[arg-type]
    assert set(summary(whole, (ref("c", 0, 1),), kept=True).ledger.inputs) == {"a->c#0", "a->c#1"}

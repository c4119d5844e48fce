"""Keeping a restarted consumer's committed result (:mod:`airflow_region_failover.spark.reuse`: "a finished consumer
restarted by this cascade keeps its committed result when the exact (sub)partitions it reads came back
byte-identical and its code fingerprint is unchanged"), against a fake store view (single-module unit tests). Unless a
test says otherwise, the try was started by our clear as a consumer restart and runs the code that committed the result.

    gen#0 ==> join#0 ==> report#0        gen (deterministic) --BLOCKING BROADCAST--> join
    gen#1 ==> join#1 ==/                 join --BLOCKING--> report;  side --PIPELINED--> tail
"""

from __future__ import annotations

from dataclasses import dataclass, field

import pytest

from airflow_region_failover import JobGraphBuilder, PartitionId, SubtaskId
from airflow_region_failover.failover.options import FailoverStrategy
from airflow_region_failover.failover.run_log import Decision, DecisionStatus
from airflow_region_failover.graph.model import Edge
from airflow_region_failover.spark.context import StepContext
from airflow_region_failover.spark.exchange import PartitionRef
from airflow_region_failover.spark.reuse import kept_outputs
from airflow_region_failover.spark.run import SubtaskRun
from airflow_region_failover.store.manifest import InputVersion, Manifest

GRAPH = (JobGraphBuilder().step("gen", parallelism=2, deterministic=True).step("join", parallelism=2)
         .step("report").step("side").step("tail")
         .edge("gen", "join", exchange="BLOCKING", result="rows")
         .edge("join", "report", exchange="BLOCKING")
         .edge("side", "tail", exchange="PIPELINED").build())
NONDET = (JobGraphBuilder().step("gen", parallelism=2).step("join", parallelism=2).step("report")
          .edge("gen", "join", exchange="BLOCKING", result="rows")
          .edge("join", "report", exchange="BLOCKING").build())


def v(partition: str, attempt: int, checksum: str) -> InputVersion:
    return InputVersion(PartitionId.parse(partition), attempt, checksum * 64)


CODE = "c0de" * 16


def committed(partition: str, attempt: int, inputs: tuple[InputVersion, ...], code: str = CODE) -> Manifest:
    return Manifest("d", "r", PartitionId.parse(partition), attempt, "w", "{}", 7, (), "t", inputs=inputs, code=code)


@dataclass
class FakeIO:
    manifests: dict[PartitionId, Manifest] = field(default_factory=dict)

    def committed(self, dag_id: str, run_id: str, partition: PartitionId) -> Manifest | None:
        return self.manifests.get(partition)


def refs_of(graph: object, subtask: SubtaskId, attempts: dict[str, int]) -> dict[Edge, tuple[PartitionRef, ...]]:
    from airflow_region_failover.graph.subtasks import consumed_partitions

    return {e: tuple(PartitionRef(p.result, p.index, e.exchange, "d", "r", attempts.get(str(p), 1))
                     for p in ps)
            for e, ps in consumed_partitions(graph, subtask).items()}  # type: ignore[arg-type]


def ctx(subtask: SubtaskId, try_number: int) -> StepContext:
    return StepContext(subtask=subtask, parallelism=2, deterministic=False, partitions={}, dag_id="d", run_id="r",
                       try_number=try_number, params={}, airflow={})


BEFORE = (v("rows#0", 1, "a"), v("rows#1", 1, "b"))
JOIN0 = SubtaskId("join", 0)


def keep(io: FakeIO, current: tuple[InputVersion, ...], try_number: int = 2, graph: object = GRAPH,
         subtask: SubtaskId = JOIN0, strategy: str = "region", restarted_as: str | None = "consumer",
         code: str = CODE, opted_out: bool = False) -> tuple[PartitionRef, ...] | None:
    """Whether ``subtask``'s try keeps its outputs, reading inputs of the versions ``current``; ``restarted_as``:
    its region's reason in the decision whose clear started it (``None``: no clear of ours did)."""
    refs = refs_of(graph, subtask, {str(c.partition): c.attempt for c in current})
    task_id = f"{subtask.step}.{subtask.index}"
    restart = None if restarted_as is None else Decision(
        id=1, status=DecisionStatus.APPLIED, created=0.0, failures=(), reasons={task_id: restarted_as})
    run = SubtaskRun(graph, (subtask,), (), (ctx(subtask, try_number),), refs, io, {}, current,  # type: ignore[arg-type]
                     code, restart, task_id, FailoverStrategy.parse(strategy), opted_out)
    return kept_outputs(run)


def test_consumer_of_a_deterministic_producer_re_produced_byte_identical_is_kept() -> None:
    """gen#1 re-produced (attempt 2) with the same checksum: join#0 keeps its committed attempt 1."""
    io = FakeIO({PartitionId("join->report", 0): committed("join->report#0", 1, BEFORE)})
    [ref] = keep(io, (v("rows#0", 1, "a"), v("rows#1", 2, "b"))) or pytest.fail("not kept")
    assert (ref.partition, ref.attempt, ref.rows, ref.exchange) == (PartitionId("join->report", 0), 1, 7,
                                                                     "BLOCKING")


@pytest.mark.parametrize("why, current, try_number, strategy", [
    ("a re-produced input differs", (v("rows#0", 1, "a"), v("rows#1", 2, "X")), 2, "region"),
    ("an input was added", (*BEFORE, v("rows#2", 1, "c")), 2, "region"),
    ("first try: nothing to keep", BEFORE, 1, "region"),
    ("full strategy reruns everything", BEFORE, 2, "full"),
])
def test_consumer_runs(why: str, current: tuple[InputVersion, ...], try_number: int, strategy: str) -> None:
    io = FakeIO({PartitionId("join->report", 0): committed("join->report#0", 1, BEFORE)})
    assert keep(io, current, try_number, strategy=strategy) is None, why


def test_consumer_runs_without_a_committed_output_or_a_recorded_input_list() -> None:
    assert keep(FakeIO(), BEFORE) is None
    old_writer = FakeIO({PartitionId("join->report", 0): committed("join->report#0", 1, ())})
    assert keep(old_writer, BEFORE) is None


def test_re_produced_identical_bytes_are_kept_whether_or_not_the_producer_is_declared_deterministic() -> None:
    """What is read is compared, not predicted: ``gen`` (not declared deterministic) re-produced rows#1 with the
    same bytes, so join#0 read exactly what it read before and keeps its result; changed bytes still rerun."""
    io = FakeIO({PartitionId("join->report", 0): committed("join->report#0", 1, BEFORE)})
    assert keep(io, (v("rows#0", 1, "a"), v("rows#1", 2, "b")), graph=NONDET) is not None
    assert keep(io, (v("rows#0", 1, "a"), v("rows#1", 2, "X")), graph=NONDET) is None


KEYED = (JobGraphBuilder().step("p").step("c", parallelism=2).step("out", parallelism=2)
         .edge("p", "c", exchange="BLOCKING", result="rows", partition_by=["k"])
         .edge("c", "out", exchange="BLOCKING", distribution="POINTWISE").build())


def keyed_manifest(attempt: int, shas: tuple[str, str]) -> Manifest:
    from airflow_region_failover.graph.keygroups import key_group_range
    from airflow_region_failover.store.manifest import ObjectEntry, partitioning

    objects = tuple(ObjectEntry(f"rows/data/p00000/a{attempt:06d}-w/part-00000-s{j:05d}-t0.parquet", 100, sha * 64,
                                j) for j, sha in enumerate(shas))
    ranges = (key_group_range(128, 2, 0), key_group_range(128, 2, 1))
    return Manifest("d", "r", PartitionId("rows", 0), attempt, "w", "{}", 20, objects, "t",
                    partitioning=partitioning(("k",), 128, ranges, objects, {0: 10, 1: 10}))


def test_flip1_nondeterministic_producer_reroutes_rows_to_consumer_0_only() -> None:
    """FLIP-1's lost-update case, made impossible by comparing what each consumer reads::

        p (1, not deterministic) =BLOCKING keyed by k=> c#0 (key groups 0-63)
                                                      => c#1 (key groups 64-127)

    p is re-produced (attempt 2) and routes different rows to subpartition 0, the same rows to subpartition 1:
    c#0 reruns, c#1 keeps its committed result."""
    from airflow_region_failover.graph.keygroups import key_group_range

    before, after = keyed_manifest(1, ("a", "b")), keyed_manifest(2, ("X", "b"))
    io = FakeIO({})
    outcome = {}
    for index in (0, 1):
        groups = key_group_range(128, 2, index)
        recorded = (before.version(groups, ("k",), 128),)
        io.manifests[PartitionId("c->out", index)] = committed(f"c->out#{index}", 1, recorded)
        now = (after.version(groups, ("k",), 128),)
        outcome[index] = keep(io, now, graph=KEYED, subtask=SubtaskId("c", index))
    assert outcome[0] is None, "c#0's subpartition changed: it reruns"
    assert outcome[1] is not None and outcome[1][0].attempt == 1, "c#1 read identical bytes: kept"


def test_pipelined_exchanges_and_sources_always_run() -> None:
    io = FakeIO({PartitionId("tail", 0): committed("tail#0", 1, ()),
                 PartitionId("side->tail", 0): committed("side->tail#0", 1, ()),
                 PartitionId("gen", 0): committed("rows#0", 1, ())})
    assert keep(io, (), subtask=SubtaskId("tail", 0)) is None
    assert keep(io, (), subtask=SubtaskId("gen", 0)) is None


@pytest.mark.parametrize("why, restarted_as", [
    ("a person cleared the task (e.g. to redo a warehouse load): it always runs", None),
    ("its region failed: it must run", "failed"),
    ("it is restarted to re-produce a lost input of another region: it must run", "producer-unavailable"),
    ("failover strategy full: everything reruns", "full"),
])
def test_only_a_consumer_restart_started_by_our_clear_may_keep(why: str, restarted_as: str | None) -> None:
    """The critical rule: what started the try decides. Unchanged inputs are not enough."""
    io = FakeIO({PartitionId("join->report", 0): committed("join->report#0", 1, BEFORE)})
    assert keep(io, BEFORE, restarted_as=restarted_as) is None, why


def test_a_result_computed_by_other_code_is_never_kept() -> None:
    """The step's code changed since it committed (a fix deployed, then our restart): it recomputes."""
    io = FakeIO({PartitionId("join->report", 0): committed("join->report#0", 1, BEFORE)})
    assert keep(io, BEFORE, code="f1xed" * 12) is None
    unknown = FakeIO({PartitionId("join->report", 0): committed("join->report#0", 1, BEFORE, code="")})
    assert keep(unknown, BEFORE) is None, "a manifest without a code fingerprint is never kept"


def test_a_step_or_run_that_opted_out_always_recomputes() -> None:
    io = FakeIO({PartitionId("join->report", 0): committed("join->report#0", 1, BEFORE)})
    assert keep(io, BEFORE, opted_out=True) is None


def evidence(current: tuple[InputVersion, ...], subtask: SubtaskId = JOIN0, code: str = CODE) -> object:
    """What a failure of ``subtask``'s try records as what it computed from (:func:`~.spark.run.try_inputs`)."""
    from airflow_region_failover.spark.run import try_inputs

    refs = refs_of(GRAPH, subtask, {str(c.partition): c.attempt for c in current})
    run = SubtaskRun(GRAPH, (subtask,), (), (ctx(subtask, 1),), refs, FakeIO(), {}, current,  # type: ignore[arg-type]
                     code)
    return try_inputs(run)


def test_a_failure_records_the_checksums_it_read_and_its_code_as_the_reuse_rule_compares_them() -> None:
    """Same checksums and code -> equal evidence (whatever the attempts); a changed checksum or code differs; a
    source step (reads outside the store) or a PIPELINED reader has none."""
    same = evidence((v("rows#0", 2, "a"), v("rows#1", 3, "b")))
    assert same is not None and same == evidence(BEFORE)
    assert evidence((v("rows#0", 1, "a"), v("rows#1", 1, "c"))) != same
    assert evidence(BEFORE, code="other") != same
    assert evidence((), SubtaskId("gen", 0)) is None
    assert evidence((), SubtaskId("tail", 0)) is None
    assert evidence(BEFORE[:1]) is None, "an input without its recorded checksum"

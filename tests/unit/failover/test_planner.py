"""The restart planner: Flink's RestartPipelinedRegionFailoverStrategyTest cases, on our job graphs.

Flink's tests connect single execution vertices; here a step of parallelism 2 joined ALL_TO_ALL stands for
Flink's pair of vertices joined pairwise (``v1,v2 -x-> v4,v5``).
"""

from __future__ import annotations

import pytest

from airflow_region_failover.failover.availability import KnownAvailability
from airflow_region_failover.failover.planner import plan_restart
from airflow_region_failover.failover.restart_plan import Reason
from airflow_region_failover.failover.topology import FailoverTopology
from airflow_region_failover.graph import JobGraph, JobGraphBuilder, OptionError, PartitionId, SubtaskId

ALL = KnownAvailability()


def _restarts(graph: JobGraph, failed: str, checker=ALL, strategy: str = "region", cause=()) -> set[str]:  # type: ignore[no-untyped-def]
    topology = FailoverTopology.build(graph)
    decision = plan_restart(topology, SubtaskId.parse(failed), checker, strategy, [PartitionId.parse(c) for c in cause])
    return {str(s) for s in decision.restart}


@pytest.fixture
def six_vertices() -> JobGraph:
    """Flink's testRegionFailoverForRegionInternalErrors / ...DataConsumptionErrors graph.

    (a#0) -+-> (b#0)
           x              every arrow BLOCKING; each subtask its own region
    (a#1) -+-> (b#1)

    (c#0) ---> (d#0)
    """
    return (
        JobGraphBuilder()
        .step("a", parallelism=2)
        .step("b", parallelism=2)
        .step("c")
        .step("d")
        .edge("a", "b", exchange="BLOCKING")
        .edge("c", "d", exchange="BLOCKING")
        .build()
    )


def test_region_internal_errors_restart_region_and_consumers(six_vertices: JobGraph) -> None:
    assert _restarts(six_vertices, "a#0") == {"a#0", "b#0", "b#1"}
    assert _restarts(six_vertices, "a#1") == {"a#1", "b#0", "b#1"}
    assert _restarts(six_vertices, "c#0") == {"c#0", "d#0"}
    assert _restarts(six_vertices, "b#0") == {"b#0"}
    assert _restarts(six_vertices, "b#1") == {"b#1"}
    assert _restarts(six_vertices, "d#0") == {"d#0"}


def test_data_consumption_errors_restart_the_producer_named_by_the_failure(six_vertices: JobGraph) -> None:
    assert _restarts(six_vertices, "b#0", cause=["a->b#0"]) == {"a#0", "b#0", "b#1"}
    assert _restarts(six_vertices, "b#0", cause=["a->b#1"]) == {"a#1", "b#0", "b#1"}
    assert _restarts(six_vertices, "b#1", cause=["a->b#0"]) == {"a#0", "b#0", "b#1"}
    assert _restarts(six_vertices, "d#0", cause=["c->d#0"]) == {"c#0", "d#0"}


@pytest.mark.parametrize(
    ("unavailable", "expected"),
    [
        ((), {"a#0": {"a#0", "c#0"}, "b#0": {"b#0", "c#0"}, "c#0": {"c#0"}}),
        (("rp1#0",), {"a#0": {"a#0", "c#0"}, "b#0": {"a#0", "b#0", "c#0"}, "c#0": {"a#0", "c#0"}}),
        (("rp2#0",), {"a#0": {"a#0", "b#0", "c#0"}, "b#0": {"b#0", "c#0"}, "c#0": {"b#0", "c#0"}}),
        (
            ("rp1#0", "rp2#0"),
            {"a#0": {"a#0", "b#0", "c#0"}, "b#0": {"a#0", "b#0", "c#0"}, "c#0": {"a#0", "b#0", "c#0"}},
        ),
    ],
)
def test_availability_combinations(unavailable: tuple[str, ...], expected: dict[str, set[str]]) -> None:
    """Flink's testRegionFailoverForVariousResultPartitionAvailabilityCombinations.

        (a) --rp1--\\
                    (c)       both BLOCKING
        (b) --rp2--/
    """
    graph = (
        JobGraphBuilder()
        .step("a")
        .step("b")
        .step("c")
        .edge("a", "c", exchange="BLOCKING", result="rp1")
        .edge("b", "c", exchange="BLOCKING", result="rp2")
        .build()
    )
    checker = KnownAvailability.except_(unavailable)
    for failed, restart in expected.items():
        assert _restarts(graph, failed, checker) == restart, failed


def test_multiple_vertices_regions() -> None:
    """Flink's testRegionFailoverForMultipleVerticesRegions.

    (v1) -P-> (v2) -B-> (v3) -P-> (v4) -B-> (v5) -P-> (v6)
    regions: {v1,v2} {v3,v4} {v5,v6}
    """
    b = JobGraphBuilder()
    for i in range(1, 7):
        b.step(f"v{i}")
    for i, exchange in zip(range(1, 6), ["PIPELINED", "BLOCKING", "PIPELINED", "BLOCKING", "PIPELINED"], strict=True):
        b.edge(f"v{i}", f"v{i + 1}", exchange=exchange)
    graph = b.build()
    assert _restarts(graph, "v3#0") == {"v3#0", "v4#0", "v5#0", "v6#0"}
    assert _restarts(graph, "v3#0", cause=["v2->v3#0"]) == {f"v{i}#0" for i in range(1, 7)}


def test_backtracking_is_recursive_and_reasons_are_recorded() -> None:
    """An unavailable input two hops up pulls in both producers, then their consumers.

    (a) -B-> (b) -B-> (c) -B-> (d)
    a->b and b->c lost; c fails
    """
    graph = (
        JobGraphBuilder()
        .step("a")
        .step("b")
        .step("c")
        .step("d")
        .edge("a", "b", exchange="BLOCKING")
        .edge("b", "c", exchange="BLOCKING")
        .edge("c", "d", exchange="BLOCKING")
        .build()
    )
    topology = FailoverTopology.build(graph)
    checker = KnownAvailability.except_(["a->b#0", "b->c#0"])
    decision = plan_restart(topology, SubtaskId("c", 0), checker)
    reasons = {r.region.steps[0]: r.reason for r in decision.regions}
    assert reasons == {
        "a": Reason.PRODUCER_UNAVAILABLE,
        "b": Reason.PRODUCER_UNAVAILABLE,
        "c": Reason.FAILED,
        "d": Reason.CONSUMER,
    }
    assert decision.to_dict()["restart"] == ["a#0", "b#0", "c#0", "d#0"]


def test_availability_marks_do_not_persist_between_failures(six_vertices: JobGraph) -> None:
    topology = FailoverTopology.build(six_vertices)
    first = plan_restart(topology, SubtaskId("b", 0), ALL, unavailable=[PartitionId("a->b", 0)])
    second = plan_restart(topology, SubtaskId("b", 0), ALL)
    assert SubtaskId("a", 0) in first.restart
    assert second.restart == (SubtaskId("b", 0),)


def test_full_strategy_restarts_everything_and_labels_the_extra_regions(six_vertices: JobGraph) -> None:
    topology = FailoverTopology.build(six_vertices)
    decision = plan_restart(topology, SubtaskId("b", 0), ALL, "full")
    assert len(decision.restart) == 6
    reasons = {r.region.id: r.reason for r in decision.regions}
    assert reasons[topology.regions.region_of(SubtaskId("b", 0)).id] is Reason.FAILED
    assert reasons[topology.regions.region_of(SubtaskId("c", 0)).id] is Reason.FULL


def test_unknown_strategy_names_the_option(six_vertices: JobGraph) -> None:
    with pytest.raises(OptionError, match=r"jobmanager\.execution\.failover-strategy: 'partial' is unknown"):
        plan_restart(FailoverTopology.build(six_vertices), SubtaskId("a", 0), ALL, "partial")


def test_checker_is_not_asked_about_partitions_of_restarting_producers() -> None:
    """(a) -B-> (b) -B-> (c) with a#0 already restarting: only b's output is never checked twice."""
    graph = (
        JobGraphBuilder().step("a", parallelism=3).step("b", parallelism=3).edge("a", "b", exchange="BLOCKING").build()
    )
    asked: list[PartitionId] = []

    class Recording:
        def is_available(self, partition: PartitionId) -> bool:
            asked.append(partition)
            return partition.index != 1

    plan_restart(FailoverTopology.build(graph), SubtaskId("b", 0), Recording())
    assert sorted(asked) == [PartitionId("a->b", 0), PartitionId("a->b", 1), PartitionId("a->b", 2)]


@pytest.fixture
def late_stage() -> JobGraph:
    """The example ETL's tail: aggregate subtasks each in their own region, report reads both.

    (join#0) -+-> (aggregate#0) --+
              x                    +--> (report#0)      every arrow BLOCKING
    (join#1) -+-> (aggregate#1) --+
    """
    return (
        JobGraphBuilder()
        .step("join", parallelism=2)
        .step("aggregate", parallelism=2)
        .step("report")
        .edge("join", "aggregate", exchange="BLOCKING")
        .edge("aggregate", "report", exchange="BLOCKING")
        .build()
    )


def test_a_producer_still_at_work_is_not_restarted(late_stage: JobGraph) -> None:
    """aggregate#0 fails while aggregate#1 is still running (its partition not committed yet): report restarts as
    a consumer and will wait for aggregate#1; aggregate#1 is *not* restarted (Flink tracks a partition from the
    producer's deployment)."""
    from airflow_region_failover.failover.availability import BeingProduced, NothingAvailable

    committed_joins = KnownAvailability.except_(["aggregate->report#1"])
    at_work = BeingProduced.of(committed_joins, late_stage, [SubtaskId("aggregate", 1)])
    assert _restarts(late_stage, "aggregate#0", at_work) == {"aggregate#0", "report#0"}
    # the same partition missing although its producer finished (not at work): backtracking restarts it
    assert _restarts(late_stage, "aggregate#0", committed_joins) == {"aggregate#0", "aggregate#1", "report#0"}
    # at work covers exactly the partitions that subtask produces
    assert BeingProduced.of(NothingAvailable(), late_stage, [SubtaskId("aggregate", 1)]).producing == {
        PartitionId("aggregate->report", 1)}
    assert BeingProduced.of(NothingAvailable(), late_stage, [SubtaskId("nope", 0)]).producing == frozenset()

"""AUTO exchanges and exchange plans: a plan resolves the graph, and regions and restart sets follow it.

    (gen#0) --AUTO pointwise--> (clean#0) -+
                                           +--BLOCKING keyed--> (join#0)
    (gen#1) --AUTO pointwise--> (clean#1) -+
"""

from __future__ import annotations

import pytest

from airflow_region_failover.failover.availability import KnownAvailability
from airflow_region_failover.failover.planner import plan_restart
from airflow_region_failover.failover.topology import FailoverTopology
from airflow_region_failover.graph import GraphError, JobGraph, JobGraphBuilder, SubtaskId, jsonformat
from airflow_region_failover.graph.auto import Choice, ExchangePlan, all_of, auto_results, resolve
from airflow_region_failover.graph.elements import Exchange
from airflow_region_failover.graph.regions import compute_regions

GEN_CLEAN = "gen->clean"


def _graph() -> JobGraph:
    return (JobGraphBuilder().step("gen", parallelism=2).step("clean", parallelism=2).step("join")
            .edge("gen", "clean", exchange="AUTO", distribution="POINTWISE", columns=["id"])
            .edge("clean", "join", exchange="BLOCKING", partition_by=["id"]).build())


def _regions(graph: JobGraph) -> list[list[str]]:
    return [[str(s) for s in r.subtasks] for r in compute_regions(graph).regions]


def _restart(graph: JobGraph, failed: str) -> set[str]:
    decision = plan_restart(FailoverTopology.build(graph), SubtaskId.parse(failed), KnownAvailability(), "region")
    return {str(s) for s in decision.restart}


def test_auto_is_parsed_and_listed() -> None:
    graph = _graph()
    assert graph.edges[0].exchange is Exchange.AUTO and auto_results(graph) == (GEN_CLEAN,)


def test_the_blocking_plan_keeps_every_subtask_its_own_region() -> None:
    concrete = resolve(_graph(), ExchangePlan({GEN_CLEAN: Choice.BLOCKING}))
    assert concrete.edges[0].exchange is Exchange.BLOCKING and concrete.edges[0].columns == ("id",)
    assert _regions(concrete) == [["gen#0"], ["gen#1"], ["clean#0"], ["clean#1"], ["join#0"]]
    assert _restart(concrete, "clean#1") == {"clean#1", "join#0"}


def test_the_fused_plan_merges_producer_and_consumer_regions() -> None:
    concrete = resolve(_graph(), ExchangePlan({GEN_CLEAN: Choice.FUSED}))
    assert concrete.edges[0].exchange is Exchange.PIPELINED and concrete.edges[0].columns == ()
    assert _regions(concrete) == [["gen#0", "clean#0"], ["gen#1", "clean#1"], ["join#0"]]
    assert _restart(concrete, "clean#1") == {"gen#1", "clean#1", "join#0"}


def test_a_plan_that_names_nothing_is_all_blocking() -> None:
    assert resolve(_graph(), ExchangePlan()) == resolve(_graph(), all_of(_graph(), Choice.BLOCKING))
    assert ExchangePlan() == ExchangePlan({GEN_CLEAN: Choice.BLOCKING})
    assert all_of(_graph(), Choice.FUSED, frozenset({GEN_CLEAN})).fused == ()


def test_declared_exchanges_are_never_changed() -> None:
    concrete = resolve(_graph(), all_of(_graph(), Choice.FUSED))
    assert concrete.edges[1].exchange is Exchange.BLOCKING


def test_a_stale_plan_is_named() -> None:
    with pytest.raises(GraphError, match=r"names result 'old->edge', which is not an AUTO result .* gen->clean"):
        resolve(_graph(), ExchangePlan({"old->edge": Choice.FUSED}))


def test_plan_json_round_trips_and_bad_choices_are_named() -> None:
    plan = ExchangePlan({GEN_CLEAN: Choice.FUSED})
    assert ExchangePlan.from_json(plan.to_json()) == plan
    with pytest.raises(GraphError, match=r"result 'gen->clean' has choice 'MAYBE'; use BLOCKING or FUSED"):
        ExchangePlan.from_json({"choices": {GEN_CLEAN: "MAYBE"}})


def test_auto_round_trips_through_json_and_keeps_persisted_columns() -> None:
    graph = _graph()
    assert jsonformat.loads(jsonformat.dumps(graph)) == graph


def test_one_result_has_one_exchange_auto_included() -> None:
    builder = (JobGraphBuilder().step("a").step("b").step("c")
               .edge("a", "b", exchange="AUTO", result="r").edge("a", "c", exchange="BLOCKING", result="r"))
    with pytest.raises(GraphError, match="result 'r' is AUTO on edge a -> b but BLOCKING here"):
        builder.build()


def test_cluster_by_stays_refused_on_pipelined_edges() -> None:
    builder = JobGraphBuilder().step("a").step("b").edge("a", "b", exchange="PIPELINED", cluster_by=["x"])
    with pytest.raises(GraphError, match=r"cluster_by applies to BLOCKING .* \(or 'AUTO'\)"):
        builder.build()


def test_an_unresolved_graph_has_the_regions_of_its_default_plan() -> None:
    """AUTO edges count as BLOCKING wherever a graph is used unresolved (the CLI on a JSON file), cycles included:

        (a#0) --PIPELINED--> (c#0)        {a, c} -> b -> {a, c} is a cycle through BLOCKING (AUTO) results,
          \\--AUTO--> (b#0) --AUTO--/     so the three make one region
    """
    graph = (JobGraphBuilder().step("a").step("b").step("c").edge("a", "c", exchange="PIPELINED")
             .edge("a", "b", exchange="AUTO").edge("b", "c", exchange="AUTO").build())
    assert _regions(graph) == _regions(resolve(graph, ExchangePlan())) == [["a#0", "b#0", "c#0"]]


def test_an_auto_declaration_keeps_the_columns_a_fused_result_declared() -> None:
    #   a --AUTO, columns k,v--> b        fused: the edge loses columns; the declaration keeps them
    from airflow_region_failover.graph.auto import AutoDeclaration, declared_columns

    graph = (JobGraphBuilder().step("a").step("b")
             .edge("a", "b", exchange="AUTO", distribution="POINTWISE", columns=["k", "v"]).build())
    declaration = AutoDeclaration(("a->b",), {}, ExchangePlan({"a->b": Choice.FUSED}), declared_columns(graph))
    assert declaration.columns == {"a->b": ("k", "v")}
    assert resolve(graph, declaration.plan).edges[0].columns == ()
    assert AutoDeclaration.from_json(declaration.to_json()) == declaration
    assert "columns" not in AutoDeclaration(("a->b",)).to_json()  # the form before, still read
    assert AutoDeclaration.from_json({"results": [], "pinned": {}, "plan": {"choices": {}}}) == AutoDeclaration()

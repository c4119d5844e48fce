"""Fused regions: which regions a plan runs as one task, their task ids, and the XCom keys of their partitions."""

from __future__ import annotations

from airflow_region_failover import JobGraphBuilder, SubtaskId
from airflow_region_failover.graph.auto import Choice, ExchangePlan, resolve
from airflow_region_failover.graph.chains import compute_chains
from airflow_region_failover.graph.fusion import fused_regions, refused
from airflow_region_failover.graph.model import JobGraph
from airflow_region_failover.graph.regions import compute_regions
from airflow_region_failover.naming import TaskNames


def _names(declared: JobGraph, plan: ExchangePlan) -> tuple[JobGraph, TaskNames]:
    graph = resolve(declared, plan)
    chains = compute_chains(graph)
    return graph, TaskNames(chains, fused_regions(graph, compute_regions(graph), chains, plan.fused))


KEYED = (JobGraphBuilder().step("src", parallelism=2).step("gen", parallelism=2).step("agg", parallelism=2)
         .step("sink", parallelism=1)
         .edge("src", "gen", exchange="BLOCKING", distribution="POINTWISE")
         .edge("gen", "agg", exchange="AUTO", partition_by=["k"])
         .edge("agg", "sink", exchange="BLOCKING", distribution="BROADCAST").build())


def test_a_fused_keyed_exchange_runs_its_region_as_one_task() -> None:
    #   src#0,1 ==B==> gen#0,1 --FUSED keyed--> agg#0,1 ==B==> sink#0
    _, names = _names(KEYED, ExchangePlan({"gen->agg": Choice.FUSED}))
    members = tuple(SubtaskId.parse(s) for s in ("gen#0", "gen#1", "agg#0", "agg#1"))
    assert {names.task_id(m) for m in members} == {"gen.agg.0"} and names.is_fused("gen.agg.0")
    assert names.subtasks("gen.agg.0") == members and names.head("gen.agg.0") == SubtaskId("gen", 0)
    assert names.task_id(SubtaskId("src", 1)) == "src.1" and not names.is_fused("src.1")
    # ":" and not "#": the Execution API puts the key in a URL path, where "#" ends it (the task pulling it got
    # another key's list); only characters the existing keys already carry
    assert names.xcom_key(SubtaskId("agg", 1), "agg->sink") == "partition:agg->sink:1"
    assert names.xcom_key(SubtaskId("src", 1), "src->gen") == "partition:src->gen"
    for other in ("gen.0", "agg.1", "gen.agg.1"):  # the unfused tasks' ids are no task of this plan
        assert names.subtasks(other) is None, other


def test_the_blocking_plan_fuses_nothing() -> None:
    _, names = _names(KEYED, ExchangePlan())
    assert names.fused == () and names.task_id(SubtaskId("gen", 1)) == "gen.1"
    assert names.xcom_key(SubtaskId("agg", 1), "agg->sink") == "partition:agg->sink"


def test_a_region_that_is_one_chain_subtask_stays_a_chain_task() -> None:
    #   a#i --FUSED POINTWISE--> b#i       chainable: chain task a.b.i, no fused task
    declared = (JobGraphBuilder().step("a", parallelism=2).step("b", parallelism=2)
                .edge("a", "b", exchange="AUTO", distribution="POINTWISE").build())
    _, names = _names(declared, ExchangePlan({"a->b": Choice.FUSED}))
    assert names.fused == () and names.task_id(SubtaskId("b", 1)) == "a.b.1"


def test_a_pointwise_fan_in_fuses_each_region_into_its_own_task() -> None:
    #   a#0,a#1 -> b#0     a#2,a#3 -> b#1      (FUSED POINTWISE 4 -> 2: two regions, two tasks)
    declared = (JobGraphBuilder().step("a", parallelism=4).step("b", parallelism=2)
                .edge("a", "b", exchange="AUTO", distribution="POINTWISE").build())
    _, names = _names(declared, ExchangePlan({"a->b": Choice.FUSED}))
    assert [r.task_id for r in names.fused] == ["a.b.0", "a.b.2"]
    assert names.subtasks("a.b.2") == tuple(SubtaskId.parse(s) for s in ("a#2", "a#3", "b#1"))


def test_a_region_holding_a_step_that_cannot_share_its_task_refuses_the_fusion() -> None:
    graph, names = _names(KEYED, ExchangePlan({"gen->agg": Choice.FUSED}))
    reasons = refused(graph, names.fused, ["gen->agg"],
                      lambda steps: {"agg": "a checkpointed step commits objects per epoch in its own task"}
                      if "agg" in steps else {})
    assert reasons == {"gen->agg": "fusing it would run step 'agg' in fused task 'gen.agg.0', but a checkpointed "
                                   "step commits objects per epoch in its own task"}
    assert refused(graph, names.fused, ["gen->agg"], lambda steps: {}) == {}

"""Which steps of a fused task run as one subtask (graph/rescaling.py rules 1-4), and the graph the task then runs."""

from __future__ import annotations

from collections.abc import Sequence

import pytest

from airflow_region_failover.graph import jsonformat
from airflow_region_failover.graph.builder import JobGraphBuilder
from airflow_region_failover.graph.errors import GraphError
from airflow_region_failover.graph.ids import SubtaskId
from airflow_region_failover.graph.model import JobGraph, Step
from airflow_region_failover.graph.rescaling import Rescaled, rescaled_steps


def members(graph: JobGraph, *steps: str) -> tuple[SubtaskId, ...]:
    return tuple(SubtaskId(s, i) for s in steps for i in range(graph.step(s).parallelism))


def one_region(task: Sequence[SubtaskId]) -> dict[SubtaskId, tuple[SubtaskId, ...]]:
    return dict.fromkeys(task, tuple(task))


def etl(*, rescalable: tuple[str, ...] = ("gen", "join", "agg"), join_to_agg: str = "PIPELINED",
        agg_to_sink: str = "BROADCAST") -> JobGraph:
    builder = JobGraphBuilder()
    for step, parallelism in (("gen", 4), ("join", 2), ("agg", 2), ("sink", 1)):
        builder.step(step, parallelism=parallelism, rescalable=step in rescalable)
    return (builder.edge("gen", "join", exchange="PIPELINED", partition_by=["k"])
            .edge("join", "agg", exchange=join_to_agg, partition_by=["c"])
            .edge("agg", "sink", exchange="PIPELINED", distribution=agg_to_sink).build())


def test_every_declared_step_of_a_one_region_task_whose_results_stay_inside_runs_as_one_subtask() -> None:
    #   gen#0..3 --keyed k--> join#0,1 --keyed c--> agg#0,1 --broadcast--> sink#0 ==B==>   (one task, one region)
    graph = etl()
    task = members(graph, "gen", "join", "agg", "sink")
    rescaled = Rescaled.of(graph, task, one_region(task))

    assert rescaled.steps == {"gen", "join", "agg"}
    assert rescaled.members == tuple(SubtaskId.parse(s) for s in ("gen#0", "join#0", "agg#0", "sink#0"))
    assert [s.parallelism for s in rescaled.graph.steps] == [1, 1, 1, 1]
    assert rescaled.regions[SubtaskId("join", 0)] == rescaled.members
    assert rescaled.expanded(rescaled.members) == task
    assert rescaled.expanded([SubtaskId("sink", 0)]) == (SubtaskId("sink", 0),)


def test_a_step_not_declared_rescalable_keeps_its_subtasks() -> None:
    #   gen#0..3 --keyed k--> join#0,1 --keyed c--> agg#0,1 --broadcast--> sink#0   (join not declared)
    graph = etl(rescalable=("gen", "agg"))
    task = members(graph, "gen", "join", "agg", "sink")
    rescaled = Rescaled.of(graph, task, one_region(task))

    assert rescaled.steps == {"gen", "agg"}
    assert [m for m in rescaled.members if m.step == "join"] == [SubtaskId("join", 0), SubtaskId("join", 1)]
    nothing = Rescaled.of(etl(rescalable=()), task, one_region(task))
    assert nothing.steps == frozenset() and nothing.graph is nothing.whole and nothing.members == task


def test_a_step_whose_result_is_committed_keeps_its_subtasks() -> None:
    #   gen#0..3 --keyed k--> join#0,1 ==B keyed c==> agg#0,1 --broadcast--> sink#0   (the plan persists join->agg)
    graph = etl(join_to_agg="BLOCKING")
    task = members(graph, "gen", "join", "agg", "sink")
    assert rescaled_steps(graph, task, one_region(task)) == {"gen", "agg"}


def test_a_pointwise_consumer_that_keeps_its_subtasks_keeps_its_producers_too() -> None:
    builder = JobGraphBuilder()
    for step, parallelism in (("a", 2), ("b", 2), ("c", 2), ("d", 2)):
        builder.step(step, parallelism=parallelism, rescalable=step != "d")
    graph = (builder.edge("a", "b", exchange="PIPELINED", distribution="POINTWISE")
             .edge("b", "c", exchange="PIPELINED", partition_by=["k"])
             .edge("c", "d", exchange="PIPELINED", distribution="POINTWISE").build())
    #   a#0,1 --pointwise--> b#0,1 --keyed k--> c#0,1 --pointwise--> d#0,1   (d not declared: c keeps its
    #   subtasks; b's consumer c is keyed, so b runs as one; a's pointwise consumer b does: a too)
    task = members(graph, "a", "b", "c", "d")
    assert rescaled_steps(graph, task, one_region(task)) == {"a", "b"}

    chain = (JobGraphBuilder().step("a", parallelism=2, rescalable=True).step("b", parallelism=2, rescalable=True)
             .step("c", parallelism=2).edge("a", "b", exchange="PIPELINED", distribution="POINTWISE")
             .edge("b", "c", exchange="PIPELINED", distribution="POINTWISE").build())
    #   a#0,1 --pointwise--> b#0,1 --pointwise--> c#0,1   (c not declared: b keeps its subtasks, then a does)
    task = members(chain, "a", "b", "c")
    assert rescaled_steps(chain, task, one_region(task)) == frozenset()


def test_a_step_split_over_regions_or_tasks_keeps_its_subtasks() -> None:
    #   gen#0..3 --keyed k--> join#0,1 --keyed c--> agg#0,1 --broadcast--> sink#0
    graph = etl()
    task = members(graph, "gen", "join", "agg", "sink")
    split = {**one_region(task), SubtaskId("agg", 1): (SubtaskId("agg", 1),)}  # agg#1 in a region of its own
    assert rescaled_steps(graph, task, split) == {"gen", "join"}
    partial = tuple(m for m in task if m != SubtaskId("gen", 3))  # gen#3 runs in another task
    assert rescaled_steps(graph, partial, one_region(partial)) == {"join", "agg"}


def test_rescalable_is_declared_true_or_false_and_written_only_when_true() -> None:
    graph = etl(rescalable=("join",))
    doc = jsonformat.to_dict(graph)
    assert [s.get("rescalable") for s in doc["steps"]] == [None, True, None, None]
    assert jsonformat.from_dict(doc) == graph
    with pytest.raises(GraphError, match=r"step 'x': rescalable 'yes' must be true or false"):
        JobGraph.of([Step("x", 2, rescalable="yes")], [])  # type: ignore[arg-type]

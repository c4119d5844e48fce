"""Which chains may be sliced into epochs of virtual subtasks (graph/slicing.py rules 1-3), how many epochs they may
take, and that the virtual subtasks' key groups tile their subtask's exactly."""

from __future__ import annotations

import pytest

from airflow_region_failover.graph.builder import JobGraphBuilder
from airflow_region_failover.graph.ids import SubtaskId
from airflow_region_failover.graph.keygroups import key_group_range
from airflow_region_failover.graph.model import JobGraph
from airflow_region_failover.graph.slicing import (
    MOST_SLICES,
    most_slices,
    sliceable,
    virtual_graph,
    virtual_subtask,
)
from airflow_region_failover.graph.subtasks import read_key_groups


def etl(*, rescalable: tuple[str, ...] = ("gen", "clean", "dim", "join"), gen_to_clean: str = "PIPELINED",
        dim: str = "BROADCAST", cluster: bool = False) -> JobGraph:
    builder = JobGraphBuilder()
    for step, parallelism in (("gen", 2), ("clean", 2), ("dim", 1), ("join", 4), ("sink", 1)):
        builder.step(step, parallelism=parallelism, rescalable=step in rescalable)
    builder.edge("gen", "clean", exchange=gen_to_clean, distribution="POINTWISE")
    if dim == "BROADCAST":
        builder.edge("dim", "join", exchange="BLOCKING", distribution="BROADCAST")
    else:
        builder.edge("dim", "join", exchange="BLOCKING", distribution="POINTWISE")
    builder.edge("clean", "join", exchange="BLOCKING", partition_by=["k"], max_parallelism=64)
    if cluster:
        return builder.edge("join", "sink", exchange="BLOCKING", distribution="BROADCAST", cluster_by=["k"]).build()
    return builder.edge("join", "sink", exchange="BLOCKING", distribution="BROADCAST").build()


def test_rescalable_chains_with_keyed_broadcast_or_no_inputs_may_be_sliced() -> None:
    #   gen#0,1 -PIPELINED pointwise-> clean#0,1 ==B keyed k==> join#0..3 ==B broadcast==> sink#0
    #   dim#0 ==B broadcast==> join
    graph = etl()
    assert sliceable(graph, ("gen", "clean"))  # a generator heads the chain: it slices its own range
    assert sliceable(graph, ("dim",))
    assert sliceable(graph, ("join",))  # a keyed and a BROADCAST input, both committed
    assert not sliceable(graph, ("sink",))  # not declared rescalable


def test_an_undeclared_member_a_pointwise_or_uncommitted_input_or_a_clustered_output_is_not_sliced() -> None:
    #   as above, with one thing changed each time
    assert not sliceable(etl(rescalable=("gen", "dim", "join")), ("gen", "clean"))  # rule 1: every member
    assert not sliceable(etl(dim="POINTWISE"), ("join",))  # rule 2: POINTWISE pairs partitions by index
    assert not sliceable(etl(gen_to_clean="BLOCKING"), ("clean",))  # rule 2: committed, but POINTWISE
    assert not sliceable(etl(gen_to_clean="PIPELINED"), ("clean",))  # rule 2: an input that is not committed
    assert not sliceable(etl(cluster=True), ("join",))  # rule 3: the epochs' objects are committed as they come


def test_the_most_epochs_keep_every_virtual_subtask_a_key_group() -> None:
    graph = etl()
    assert most_slices(graph, "join") == 64 // 4
    assert most_slices(graph, "gen") == MOST_SLICES  # no keyed input: the planner's bound only


@pytest.mark.parametrize(("parallelism", "epochs", "groups"), [(1, 1, 1), (2, 3, 128), (3, 7, 64), (4, 16, 64),
                                                               (5, 2, 11), (7, 3, 32768)])
def test_the_virtual_subtasks_of_a_subtask_tile_its_key_groups(parallelism: int, epochs: int, groups: int) -> None:
    graph = (JobGraphBuilder().step("a", parallelism=1).step("b", parallelism=parallelism, rescalable=True)
             .edge("a", "b", exchange="BLOCKING", partition_by=["k"], max_parallelism=groups).build())
    edge = graph.inputs("b")[0]
    finer = virtual_graph(graph, ("b",), epochs)
    assert finer.step("b").parallelism == parallelism * epochs and finer.step("a").parallelism == 1
    for index in range(parallelism):
        read: list[int] = []
        for k in range(epochs):
            virtual = virtual_subtask(SubtaskId("b", index), epochs, k)
            assert virtual == SubtaskId("b", index * epochs + k)
            found = read_key_groups(finer, edge, virtual.index)
            assert found is not None
            read.extend(found)
        assert read == list(key_group_range(groups, parallelism, index))  # each key group once, in order

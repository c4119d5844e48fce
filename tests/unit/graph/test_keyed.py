"""Keyed exchanges at the graph level: partition_by validation, the JSON versions, key-group assignment."""

from __future__ import annotations

import json
import warnings

import pytest

from airflow_region_failover.exceptions import GraphError
from airflow_region_failover.graph import jsonformat
from airflow_region_failover.graph.builder import JobGraphBuilder
from airflow_region_failover.graph.elements import Distribution
from airflow_region_failover.graph.keygroups import key_group_range, operator_index
from airflow_region_failover.graph.subtasks import consumed_range, read_key_groups
from airflow_region_failover.graph.validation import DistributionDeprecation


def _two(**edge: object) -> JobGraphBuilder:
    return JobGraphBuilder().step("a", parallelism=2).step("b", parallelism=4).edge("a", "b", exchange="BLOCKING",
                                                                                    **edge)  # type: ignore[arg-type]


def test_partition_by_makes_a_keyed_all_to_all_with_128_key_groups() -> None:
    #   a(2) =BLOCKING ALL_TO_ALL by [k]=> b(4)
    graph = _two(partition_by=["k"]).build()
    (edge,) = graph.edges
    assert (edge.distribution, edge.partition_by, edge.max_parallelism, edge.keyed) == (
        Distribution.ALL_TO_ALL, ("k",), 128, True)
    assert consumed_range(edge, 2, 4, 3) == range(2)  # every producer partition ...
    assert read_key_groups(graph, edge, 3) == range(96, 128)  # ... but only b#3's key groups of each


def test_no_key_defaults_to_broadcast_and_old_all_to_all_is_deprecated() -> None:
    #   a(2) =BLOCKING=> b(4): every b subtask reads both partitions whole
    (edge,) = _two().build().edges
    assert edge.distribution is Distribution.BROADCAST and not edge.keyed
    with pytest.warns(DistributionDeprecation, match="now spelled distribution='BROADCAST'"):
        (old,) = _two(distribution="ALL_TO_ALL").build().edges
    assert old.distribution is Distribution.BROADCAST


@pytest.mark.parametrize(
    ("edge", "expected"),
    [
        ({"distribution": "POINTWISE", "partition_by": ["k"]},
         "edge 'a' -> 'b': partition_by applies to ALL_TO_ALL (keyed) exchanges, not POINTWISE"),
        ({"distribution": "BROADCAST", "partition_by": ["k"]}, "not BROADCAST"),
        ({"partition_by": "k"}, "partition_by='k' must be a list of column names"),
        ({"partition_by": ["k", "k"]}, "must name distinct, non-empty columns"),
        ({"partition_by": [""]}, "must name distinct, non-empty columns"),
        ({"partition_by": ["k"], "max_parallelism": 3}, "max_parallelism 3 must be an integer between the "
                                                         "consumer's parallelism (4) and 32768"),
        ({"partition_by": ["k"], "max_parallelism": 40000}, "max_parallelism 40000"),
        ({"max_parallelism": 16}, "max_parallelism applies to keyed exchanges"),
    ],
)
def test_bad_keys_are_refused_at_parse_time_naming_the_edge(edge: dict[str, object], expected: str) -> None:
    with pytest.raises(GraphError) as exc:
        _two(**edge).build()
    assert expected in str(exc.value)


def test_keyed_consumers_of_one_result_must_agree() -> None:
    #   a =r by [k]=> b(4)
    #     =r by [j]=> c(4)   one result cut two ways: refused
    builder = (JobGraphBuilder().step("a").step("b", parallelism=4).step("c", parallelism=4)
               .edge("a", "b", exchange="BLOCKING", result="r", partition_by=["k"])
               .edge("a", "c", exchange="BLOCKING", result="r", partition_by=["j"]))
    with pytest.raises(GraphError, match=r"result 'r' is already partitioned by \['k'\].*its own result name"):
        builder.build()
    # a broadcast consumer of a keyed result is fine: it reads every subpartition
    (JobGraphBuilder().step("a").step("b", parallelism=4).step("c")
     .edge("a", "b", exchange="BLOCKING", result="r", partition_by=["k"])
     .edge("a", "c", exchange="BLOCKING", result="r").build())


def test_json_version_2_round_trips_keys_and_version_1_reads_as_broadcast() -> None:
    graph = _two(partition_by=["k", "j"], max_parallelism=64).build()
    document = jsonformat.to_dict(graph)
    assert document["version"] == 2
    assert document["edges"][0]["partition_by"] == ["k", "j"] and document["edges"][0]["max_parallelism"] == 64
    assert jsonformat.from_dict(document) == graph
    old = {"version": 1, "steps": [{"id": "a"}, {"id": "b"}], "edges": [{"from": "a", "to": "b",
                                                                         "exchange": "BLOCKING"}]}
    with pytest.warns(DistributionDeprecation):
        assert jsonformat.from_dict(old).edges[0].distribution is Distribution.BROADCAST
    with pytest.raises(GraphError, match=r"edges\[0\]: unknown key 'partition_by'"):
        jsonformat.from_dict({**old, "edges": [{**old["edges"][0], "partition_by": ["k"]}]})  # type: ignore[dict-item]
    v2 = {**old, "version": 2, "edges": [{**old["edges"][0], "distribution": "ALL_TO_ALL"}]}  # type: ignore[dict-item]
    with pytest.raises(GraphError, match='ALL_TO_ALL needs "partition_by"'):
        jsonformat.loads(json.dumps(v2))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert jsonformat.from_dict({**v2, "edges": [{"from": "a", "to": "b", "exchange": "BLOCKING"}]}
                                    ).edges[0].distribution is Distribution.BROADCAST


@pytest.mark.parametrize("max_parallelism", [1, 7, 128, 1000])
@pytest.mark.parametrize("parallelism", [1, 2, 3, 4, 7, 32])
def test_key_group_ranges_tile_and_agree_with_the_owner(max_parallelism: int, parallelism: int) -> None:
    if parallelism > max_parallelism:
        return
    ranges = [key_group_range(max_parallelism, parallelism, i) for i in range(parallelism)]
    assert [g for r in ranges for g in r] == list(range(max_parallelism))  # contiguous, disjoint, complete
    for i, r in enumerate(ranges):
        assert r, "every subtask owns at least one key group"
        assert all(operator_index(max_parallelism, parallelism, g) == i for g in r)


def test_key_group_arguments_are_checked() -> None:
    with pytest.raises(GraphError, match="1 <= parallelism <= max_parallelism"):
        key_group_range(4, 8, 0)
    with pytest.raises(GraphError, match="outside parallelism"):
        key_group_range(128, 4, 4)
    with pytest.raises(GraphError, match="outside max_parallelism"):
        operator_index(128, 4, 128)

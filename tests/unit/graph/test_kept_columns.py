"""columns at the graph level (the columns a persisted result keeps): validation at parse time, agreement per
result, key and cluster columns kept, the JSON format."""

from __future__ import annotations

import json

import pytest

from airflow_region_failover.exceptions import GraphError
from airflow_region_failover.graph import jsonformat
from airflow_region_failover.graph.builder import JobGraphBuilder


def _two(**edge: object) -> JobGraphBuilder:
    return JobGraphBuilder().step("a", parallelism=2).step("b", parallelism=4).edge("a", "b", **edge)  # type: ignore[arg-type]


def test_columns_are_kept_on_a_blocking_edge_in_their_order() -> None:
    #   a(2) =BLOCKING keyed by [id], columns [amount, id]=> b(4)
    (edge,) = _two(exchange="BLOCKING", partition_by=["id"], columns=["amount", "id"]).build().edges
    assert edge.columns == ("amount", "id") and edge.keyed
    (plain,) = _two(exchange="BLOCKING").build().edges
    assert plain.columns == ()


@pytest.mark.parametrize(
    ("edge", "expected"),
    [
        ({"exchange": "PIPELINED", "columns": ["k"]},
         "edge 'a' -> 'b': columns applies to BLOCKING (persisted) results, not PIPELINED; use "
         "exchange='BLOCKING' (or 'AUTO') or drop columns"),
        ({"exchange": "BLOCKING", "columns": "k"}, "edge 'a' -> 'b': columns='k' must be a list of column names"),
        ({"exchange": "BLOCKING", "columns": ["k", "k"]}, "columns=['k', 'k'] must name distinct, non-empty"),
        ({"exchange": "BLOCKING", "columns": [""]}, "must name distinct, non-empty columns"),
        ({"exchange": "BLOCKING", "partition_by": ["id"], "columns": ["amount"]},
         "edge 'a' -> 'b': result 'a->b' keeps only columns ['amount'] (edge a -> b), without 'id', which this "
         "edge partitions or clusters by; add 'id' to columns"),
        ({"exchange": "BLOCKING", "cluster_by": ["day"], "columns": ["amount"]}, "without 'day'"),
    ],
)
def test_bad_columns_are_refused_at_parse_time_naming_the_edge(edge: dict[str, object], expected: str) -> None:
    with pytest.raises(GraphError) as exc:
        _two(**edge).build()
    assert expected in str(exc.value)


def test_consumers_of_one_result_agree_on_its_columns_and_may_omit_them() -> None:
    #   a =BLOCKING "r" columns [k, v] => b
    #     =BLOCKING "r" (inherits)     => c
    #     =BLOCKING "r" columns [k]    => d   (refused)
    builder = JobGraphBuilder().step("a").step("b").step("c").step("d")
    builder.edge("a", "b", exchange="BLOCKING", result="r", columns=["k", "v"])
    builder.edge("a", "c", exchange="BLOCKING", result="r")
    assert [e.columns for e in builder.build().edges] == [("k", "v"), ()]
    builder.edge("a", "d", exchange="BLOCKING", result="r", columns=["k"])
    with pytest.raises(GraphError, match=r"edge 'a' -> 'd': result 'r' keeps columns \['k', 'v'\] on edge a -> b, "
                                         r"here \['k'\]; one result is stored one way"):
        builder.build()


def test_a_sibling_edge_key_must_be_among_the_columns_another_edge_keeps() -> None:
    #   a =BLOCKING "r" columns [v]        => b
    #     =BLOCKING "r" keyed by [k] (no columns: inherits [v]) => c   (refused: k not kept)
    builder = JobGraphBuilder().step("a").step("b").step("c", parallelism=2)
    builder.edge("a", "b", exchange="BLOCKING", result="r", columns=["v"])
    builder.edge("a", "c", exchange="BLOCKING", result="r", partition_by=["k"])
    with pytest.raises(GraphError, match=r"edge 'a' -> 'c': result 'r' keeps only columns \['v'\] \(edge a -> b\), "
                                         r"without 'k'"):
        builder.build()


def test_json_round_trips_columns_and_omits_them_when_unset() -> None:
    graph = _two(exchange="BLOCKING", columns=["id", "amount"]).build()
    document = jsonformat.to_dict(graph)
    assert document["version"] == 2 and document["edges"][0]["columns"] == ["id", "amount"]
    assert jsonformat.loads(json.dumps(document)) == graph
    assert "columns" not in jsonformat.to_dict(_two(exchange="BLOCKING").build())["edges"][0]


def test_json_columns_must_be_a_list_and_are_checked_like_the_api() -> None:
    base = {"version": 2, "steps": [{"id": "a"}, {"id": "b"}]}
    with pytest.raises(GraphError, match="edge 'a' -> 'b': columns 'k' must be a JSON list of column names"):
        jsonformat.from_dict({**base, "edges": [{"from": "a", "to": "b", "exchange": "BLOCKING", "columns": "k"}]})
    with pytest.raises(GraphError, match="columns applies to BLOCKING"):
        jsonformat.from_dict({**base, "edges": [{"from": "a", "to": "b", "exchange": "PIPELINED",
                                                 "columns": ["k"]}]})
    with pytest.raises(GraphError, match="unknown key 'columns'"):  # version 1 has no such key
        jsonformat.from_dict({**base, "version": 1, "edges": [{"from": "a", "to": "b", "exchange": "BLOCKING",
                                                               "columns": ["k"]}]})

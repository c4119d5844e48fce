"""cluster_by at the graph level: validation at parse time, agreement per result, the JSON format."""

from __future__ import annotations

import json

import pytest

from airflow_region_failover.exceptions import GraphError
from airflow_region_failover.graph import jsonformat
from airflow_region_failover.graph.builder import JobGraphBuilder


def _two(**edge: object) -> JobGraphBuilder:
    return JobGraphBuilder().step("a", parallelism=2).step("b", parallelism=4).edge("a", "b", **edge)  # type: ignore[arg-type]


def test_cluster_by_is_kept_on_a_blocking_edge_with_or_without_a_key() -> None:
    #   a(2) =BLOCKING cluster_by [day, id]=> b(4)
    (edge,) = _two(exchange="BLOCKING", cluster_by=["day", "id"]).build().edges
    assert edge.cluster_by == ("day", "id") and not edge.keyed
    (keyed,) = _two(exchange="BLOCKING", partition_by=["id"], cluster_by=["id"]).build().edges
    assert keyed.cluster_by == ("id",) and keyed.keyed


@pytest.mark.parametrize(
    ("edge", "expected"),
    [
        ({"exchange": "PIPELINED", "cluster_by": ["k"]},
         "edge 'a' -> 'b': cluster_by applies to BLOCKING (persisted) results, not PIPELINED; use "
         "exchange='BLOCKING' (or 'AUTO') or drop cluster_by"),
        ({"exchange": "BLOCKING", "cluster_by": "k"}, "edge 'a' -> 'b': cluster_by='k' must be a list of column "
                                                      "names"),
        ({"exchange": "BLOCKING", "cluster_by": ["k", "k"]}, "cluster_by=['k', 'k'] must name distinct, non-empty"),
        ({"exchange": "BLOCKING", "cluster_by": [" "]}, "must name distinct, non-empty columns"),
        ({"exchange": "BLOCKING", "cluster_by": [3]}, "must name distinct, non-empty columns"),
    ],
)
def test_bad_cluster_by_is_refused_at_parse_time_naming_the_edge(edge: dict[str, object], expected: str) -> None:
    with pytest.raises(GraphError) as exc:
        _two(**edge).build()
    assert expected in str(exc.value)


def test_consumers_of_one_result_agree_on_cluster_by_and_may_omit_it() -> None:
    #   a =BLOCKING "r" cluster_by [k]=> b
    #     =BLOCKING "r" (inherits)    => c
    #     =BLOCKING "r" cluster_by [j]=> d   (refused)
    builder = JobGraphBuilder().step("a").step("b").step("c").step("d")
    builder.edge("a", "b", exchange="BLOCKING", result="r", cluster_by=["k"])
    builder.edge("a", "c", exchange="BLOCKING", result="r")
    assert [e.cluster_by for e in builder.build().edges] == [("k",), ()]
    builder.edge("a", "d", exchange="BLOCKING", result="r", cluster_by=["j"])
    with pytest.raises(GraphError, match=r"edge 'a' -> 'd': result 'r' is already clustered by \['k'\] on edge a -> "
                                         r"b, here by \['j'\]"):
        builder.build()


def test_json_round_trips_cluster_by_and_omits_it_when_unset() -> None:
    graph = _two(exchange="BLOCKING", cluster_by=["day"]).build()
    document = jsonformat.to_dict(graph)
    assert document["version"] == 2 and document["edges"][0]["cluster_by"] == ["day"]
    assert jsonformat.loads(json.dumps(document)) == graph
    plain = jsonformat.to_dict(_two(exchange="BLOCKING").build())
    assert "cluster_by" not in plain["edges"][0]


def test_json_cluster_by_must_be_a_list_and_is_checked_like_the_api() -> None:
    base = {"version": 2, "steps": [{"id": "a"}, {"id": "b"}]}
    with pytest.raises(GraphError, match="edge 'a' -> 'b': cluster_by 'k' must be a JSON list of column names"):
        jsonformat.from_dict({**base, "edges": [{"from": "a", "to": "b", "exchange": "BLOCKING", "cluster_by": "k"}]})
    with pytest.raises(GraphError, match="cluster_by applies to BLOCKING"):
        jsonformat.from_dict({**base, "edges": [{"from": "a", "to": "b", "exchange": "PIPELINED",
                                                 "cluster_by": ["k"]}]})
    with pytest.raises(GraphError, match="unknown key 'cluster_by'"):  # version 1 has no such key
        jsonformat.from_dict({**base, "version": 1, "edges": [{"from": "a", "to": "b", "exchange": "BLOCKING",
                                                               "cluster_by": ["k"]}]})

"""Bad input never escapes as a Python error: any JSON document either parses into a job graph or raises one
:class:`GraphError` (a fuzzed property), and the offenders a fuzzer found are named at parse time.

    a#0 ==> b#0      (the fuzzed documents use steps a, b, c and any edges between them)
"""

from __future__ import annotations

import json
import re
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from airflow_region_failover.graph import GraphError, JobGraph, JobGraphBuilder, jsonformat
from airflow_region_failover.graph.keygroups import UPPER_MAX_PARALLELISM

ANY_JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=6),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=4), inner, max_size=3),
    max_leaves=6,
)
IDS = st.sampled_from(["a", "b", "c", "", "a.b"])
COLUMNS = st.lists(st.sampled_from(["k", "v", ""]), max_size=3)


def field(good: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    """A value of the right shape most of the time, anything JSON holds otherwise."""
    return st.one_of(good, good, ANY_JSON)


STEP = st.fixed_dictionaries(
    {"id": field(IDS)},
    optional={"parallelism": field(st.integers(min_value=-1, max_value=4) | st.integers()),
              "deterministic": field(st.booleans()), "paralelism": ANY_JSON})
EDGE = st.fixed_dictionaries(
    {"from": field(IDS), "to": field(IDS), "exchange": field(st.sampled_from(["BLOCKING", "pipelined", "X"]))},
    optional={"distribution": field(st.sampled_from(["ALL_TO_ALL", "BROADCAST", "POINTWISE", "all-to-all"])),
              "result": field(st.sampled_from(["r", "s", "a->b", "x/../y"])), "partition_by": field(COLUMNS),
              "max_parallelism": field(st.integers(min_value=0, max_value=200)), "cluster_by": field(COLUMNS),
              "columns": field(COLUMNS)})
DOCUMENT = st.fixed_dictionaries(
    {"version": field(st.sampled_from([1, 2]))},
    optional={"steps": field(st.lists(field(STEP), max_size=4)), "edges": field(st.lists(field(EDGE), max_size=4))})


@settings(max_examples=3000, derandomize=True, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.one_of(DOCUMENT, DOCUMENT, ANY_JSON))
def test_any_json_document_parses_or_raises_one_graph_error(document: Any) -> None:
    try:
        graph = jsonformat.loads(json.dumps(document))
    except GraphError as exc:
        assert "\n" not in str(exc), f"not one line: {exc}"
    else:
        assert isinstance(graph, JobGraph)
        assert jsonformat.from_dict(jsonformat.to_dict(graph)) == graph


@pytest.mark.parametrize(("end", "value"), [("from", ["a"]), ("to", {"id": "b"}), ("from", 7), ("to", None)])
def test_an_edge_end_that_is_not_a_string_is_named(end: str, value: Any) -> None:
    edge = {"from": "a", "to": "b", "exchange": "BLOCKING", end: value}
    document = {"version": 2, "steps": [{"id": "a"}, {"id": "b"}], "edges": [edge]}
    with pytest.raises(GraphError, match=re.escape(f"edges[0]: {end!r} {value!r} must be a step id")):
        jsonformat.from_dict(document)


def test_a_builder_edge_whose_end_is_not_a_string_is_named() -> None:
    with pytest.raises(GraphError, match=r"edge \['a'\] -> 'b': \['a'\] is not a step id"):
        JobGraphBuilder().step("a").step("b").edge(["a"], "b", exchange="BLOCKING").build()  # type: ignore[arg-type]


@pytest.mark.parametrize("parallelism", [UPPER_MAX_PARALLELISM + 1, 10**6, 10**7])
def test_a_parallelism_above_the_upper_bound_is_refused_at_parse_time(parallelism: int) -> None:
    """Each subtask is an Airflow task and ``p<index:05d>`` store key: 10**7 subtasks never render, and indices
    >= 10**6 can never be written. The bound is Flink's upper bound of max parallelism."""
    document = {"version": 2, "steps": [{"id": "a", "parallelism": parallelism}], "edges": []}
    with pytest.raises(GraphError, match=rf"step 'a': parallelism {parallelism} must be an integer between 1 and "
                                         rf"{UPPER_MAX_PARALLELISM}"):
        jsonformat.from_dict(document)
    assert jsonformat.from_dict({**document, "steps": [{"id": "a", "parallelism": UPPER_MAX_PARALLELISM}]})

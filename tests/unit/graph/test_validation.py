"""Validation of job graphs: each bad graph gives one line naming the offender and the fix."""

from __future__ import annotations

import json

import pytest

from airflow_region_failover.graph import GraphError, JobGraphBuilder, PartitionId, SubtaskId, jsonformat
from airflow_region_failover.graph.ids import key_part


def _one_line(exc: pytest.ExceptionInfo[GraphError]) -> str:
    message = str(exc.value)
    assert "\n" not in message
    return message


def test_valid_graph_is_ordered_topologically_and_defaults_result_names() -> None:
    #   load <-B- clean <-P- extract   (declared out of order)
    graph = (
        JobGraphBuilder()
        .step("load")
        .step("clean", parallelism=2)
        .step("extract", parallelism=2)
        .edge("extract", "clean", exchange="pipelined", distribution="pointwise")
        .edge("clean", "load", exchange="BLOCKING")
        .build()
    )
    assert [s.id for s in graph.steps] == ["extract", "clean", "load"]
    assert [e.result for e in graph.edges] == ["extract->clean", "clean->load"]
    assert graph.subtask_count == 5


def test_edges_naming_one_result_share_it() -> None:
    #   a -B(r)-> b
    #   a -B(r)-> c
    graph = (
        JobGraphBuilder()
        .step("a")
        .step("b")
        .step("c")
        .edge("a", "b", exchange="BLOCKING", result="r")
        .edge("a", "c", exchange="BLOCKING", result="r", distribution="POINTWISE")
        .build()
    )
    assert len(graph.results) == 1
    assert [e.target for e in graph.result("r").consumers] == ["b", "c"]


@pytest.mark.parametrize(
    ("build", "expected"),
    [
        (lambda b: b.step("a").edge("a", "x", exchange="BLOCKING"), "unknown step 'x'"),
        (lambda b: b.step("a").step("a"), "duplicate step id 'a'"),
        (lambda b: b.step("a").edge("a", "a", exchange="BLOCKING"), "self-loop on step 'a'"),
        (
            lambda b: (
                b.step("a")
                .step("b")
                .step("c")
                .edge("a", "b", exchange="BLOCKING")
                .edge("b", "c", exchange="BLOCKING")
                .edge("c", "a", exchange="BLOCKING")
            ),
            "cycle among steps: a -> b -> c -> a",
        ),
        (lambda b: b.step("a", parallelism=0), "step 'a': parallelism 0 must be an integer >= 1"),
        (lambda b: b.step("a", parallelism=True), "step 'a': parallelism True"),
        (lambda b: b.step("a.b"), "step id 'a.b' is not usable as an Airflow task id"),
        (lambda b: b.step("../etc"), "step id '../etc' is not usable"),
        (lambda b: b.step("caf\u00e9"), "is not usable as an Airflow task id"),
        (lambda b: b.step("-x"), "step id '-x'"),
        (lambda b: b.step("x" * 101), "at most 100"),
        (lambda b: b.step("a").step("b").edge("a", "b", exchange="SOMETIMES"), "edge 'a' -> 'b': exchange 'SOMETIMES'"),
        (
            lambda b: b.step("a").step("b").edge("a", "b", exchange="BLOCKING", distribution="SHUFFLE"),
            "distribution 'SHUFFLE' is unknown",
        ),
        (
            lambda b: b.step("a").step("b").edge("a", "b", exchange="BLOCKING", result="x/../y"),
            "result name 'x/../y' is not usable",
        ),
        (
            lambda b: (
                b.step("a")
                .step("b")
                .step("c")
                .edge("a", "c", exchange="BLOCKING", result="r")
                .edge("b", "c", exchange="BLOCKING", result="r")
            ),
            "result 'r' is already produced by step 'a'",
        ),
        (
            lambda b: (
                b.step("a")
                .step("b")
                .step("c")
                .edge("a", "b", exchange="BLOCKING", result="r")
                .edge("a", "c", exchange="PIPELINED", result="r")
            ),
            "one result has one exchange",
        ),
        (
            lambda b: (
                b.step("a")
                .step("b")
                .edge("a", "b", exchange="BLOCKING", result="r")
                .edge("a", "b", exchange="BLOCKING", result="r")
            ),
            "duplicate edge",
        ),
    ],
)
def test_bad_graphs_name_the_offender(build, expected: str) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(GraphError) as exc:
        build(JobGraphBuilder()).build()
    assert expected in _one_line(exc)


def test_cycle_is_named_even_with_a_tail_downstream() -> None:
    #   a -> b -> c -> b, c -> d
    with pytest.raises(GraphError, match="cycle among steps: b -> c -> b"):
        (
            JobGraphBuilder()
            .step("a")
            .step("b")
            .step("c")
            .step("d")
            .edge("a", "b", exchange="BLOCKING")
            .edge("b", "c", exchange="BLOCKING")
            .edge("c", "b", exchange="BLOCKING", result="back")
            .edge("c", "d", exchange="BLOCKING")
            .build()
        )


def test_json_round_trip_and_errors() -> None:
    graph = (
        JobGraphBuilder()
        .step("a", parallelism=3, deterministic=True)
        .step("b", parallelism=2)
        .edge("a", "b", exchange="BLOCKING", distribution="POINTWISE", result="rows")
        .build()
    )
    assert jsonformat.loads(jsonformat.dumps(graph)) == graph
    with pytest.raises(GraphError, match="'version' 7 is unsupported"):
        jsonformat.loads(json.dumps({"version": 7, "steps": []}))
    with pytest.raises(GraphError, match=r"steps\[0\]: unknown key 'paralelism'"):
        jsonformat.loads(json.dumps({"version": 1, "steps": [{"id": "a", "paralelism": 2}]}))
    with pytest.raises(GraphError, match=r"edges\[0\]: missing 'exchange'"):
        jsonformat.loads(
            json.dumps({"version": 1, "steps": [{"id": "a"}, {"id": "b"}], "edges": [{"from": "a", "to": "b"}]})
        )
    with pytest.raises(GraphError, match="not valid JSON"):
        jsonformat.loads("{")


def test_ids_parse_and_key_parts_are_safe() -> None:
    assert SubtaskId.parse("join#12") == SubtaskId("join", 12)
    assert str(PartitionId.parse("clean->join#3")) == "clean->join#3"
    assert key_part("clean->join") == "clean.to.join"
    assert key_part("a->to->b") != key_part("a.to.to->b".replace(".", "_"))
    for bad in ("join", "join#", "join#-1", "#3", "join#\u0663"):
        with pytest.raises(GraphError, match="must look like"):
            SubtaskId.parse(bad)
    for bad in ("a->", "->a", "a->>b", "a>b", "a/b", "..", "a..b"):
        with pytest.raises(GraphError):
            key_part(bad)


@pytest.mark.parametrize(("steps", "edge", "offender"), [
    (("_holds", "b"), {}, "step id '_holds'"),
    (("a", "_run"), {}, "step id '_run'"),
    (("a", "b"), {"result": "_holds"}, "result name '_holds'"),
])
def test_ids_starting_with_an_underscore_are_reserved_for_the_store(steps: tuple[str, str], edge: dict[str, str],
                                                                     offender: str) -> None:
    """``R/_holds/`` holds a run's results against gc: a result named ``_holds`` made every run count as held (gc
    skipped it for ever). Ids beginning with ``_`` are the store's, refused at parse time naming the id and the fix.

        a -B-> b        (one of them, or the result, named with a leading '_')
    """
    builder = JobGraphBuilder().step(steps[0]).step(steps[1]).edge(steps[0], steps[1], exchange="BLOCKING", **edge)
    with pytest.raises(GraphError, match="reserved") as exc:
        builder.build()
    assert offender in _one_line(exc) and "rename it" in _one_line(exc)

"""The failover view's layout and SVG: columns follow the edges, pipelines line up, regions and reasons are drawn,
states colour the cells, and everything taken from the graph or the run is escaped.

    a#0 -> b#0 ==+==> c#0 ==> d#0        a -PIPELINED POINTWISE-> b -BLOCKING ALL_TO_ALL-> c
    a#1 -> b#1 ==+==> c#1 ==> d#1          -BLOCKING POINTWISE-> d; plus an unconnected side#0
"""

from __future__ import annotations

import xml.etree.ElementTree as ET

from airflow_region_failover.failover_view.layout import MAX_CELLS, columns, layout
from airflow_region_failover.failover_view.svg import (
    KEPT,
    REASON_COLOURS,
    STATE_COLOURS,
    CellState,
    Highlight,
    render_svg,
)
from airflow_region_failover.graph.elements import Distribution, Edge, Exchange, Step
from airflow_region_failover.graph.ids import SubtaskId
from airflow_region_failover.graph.model import JobGraph
from airflow_region_failover.graph.regions import compute_regions

SVG = "{http://www.w3.org/2000/svg}"


def e2e_graph() -> JobGraph:
    return JobGraph.of(
        [Step("a", 2), Step("b", 2), Step("c", 2), Step("d", 2), Step("side", 1)],
        [Edge("a", "b", Exchange.PIPELINED, Distribution.POINTWISE),
         Edge("b", "c", Exchange.BLOCKING, Distribution.ALL_TO_ALL, partition_by=("k",)),
         Edge("c", "d", Exchange.BLOCKING, Distribution.POINTWISE)])


def groups(svg: str, cls: str) -> dict[str, ET.Element]:
    root = ET.fromstring(svg)  # well-formed XML, or this raises
    key = {"rf-region": "data-region", "rf-subtask": "data-subtask", "rf-edge": "data-edge"}[cls]
    return {g.attrib[key]: g for g in root.iter(f"{SVG}g") if g.attrib.get("class") == cls}


def test_every_edge_points_right_and_a_pointwise_pipeline_lines_up_row_by_row() -> None:
    graph = e2e_graph()
    places = layout(graph)
    assert columns(graph) == {"a": 0, "b": 1, "c": 2, "d": 3, "side": 0}
    for edge in graph.edges:
        assert places.boxes[edge.source].rect.right < places.boxes[edge.target].rect.x
    for i in (0, 1):
        assert places.cell(SubtaskId("a", i)).y == places.cell(SubtaskId("b", i)).y
    side, a = places.boxes["side"].rect, places.boxes["a"].rect
    assert side.y >= a.bottom, "two steps of one column do not overlap"
    assert places.width >= places.boxes["d"].rect.right and places.height >= side.bottom


def test_a_wide_step_shows_its_first_subtasks_and_one_cell_for_the_rest() -> None:
    graph = JobGraph.of([Step("wide", 40)], [])
    box = layout(graph).boxes["wide"]
    assert len(box.cells) == MAX_CELLS - 1 and box.hidden == 40 - (MAX_CELLS - 1)
    assert layout(graph).cell(SubtaskId("wide", 39)) == box.more
    assert "+25 more subtasks" in render_svg(compute_regions(graph))


def test_restarted_regions_carry_their_reason_and_the_others_are_kept() -> None:
    """c#0 failed: r(c#0) failed, r(d#0) consumer; every other region kept."""
    regions = compute_regions(e2e_graph())
    c0, d0 = regions.region_of(SubtaskId("c", 0)).id, regions.region_of(SubtaskId("d", 0)).id
    svg = render_svg(regions, highlights={c0: Highlight("failed", "c#0"), d0: Highlight("consumer", c0)},
                     failed=[SubtaskId("c", 0)])
    drawn = groups(svg, "rf-region")
    assert {r: g.attrib["data-reason"] for r, g in drawn.items()} == {
        r.id: {c0: "failed", d0: "consumer"}.get(r.id, KEPT) for r in regions.regions}
    assert f"{c0}: failed" in "".join(drawn[c0].itertext())
    assert REASON_COLOURS["consumer"] in ET.tostring(drawn[d0]).decode()
    assert "✗ #0" in "".join(groups(svg, "rf-subtask")["c#0"].itertext())
    assert "✗" not in "".join(groups(svg, "rf-subtask")["c#1"].itertext())


def test_without_a_decision_no_region_is_marked() -> None:
    svg = render_svg(compute_regions(e2e_graph()))
    assert {g.attrib["data-reason"] for g in groups(svg, "rf-region").values()} == {""}


def test_cells_show_the_state_and_try_of_their_task_instance() -> None:
    regions = compute_regions(e2e_graph())
    states = {SubtaskId("c", 0): CellState("success", 2, "c.0"), SubtaskId("c", 1): CellState("failed", 1, "c.1")}
    cells = groups(render_svg(regions, states), "rf-subtask")
    assert cells["c#0"].attrib["data-state"] == "success" and cells["c#1"].attrib["data-state"] == "failed"
    assert cells["d#0"].attrib["data-state"] == "none"
    assert "#0 success · try 2" in "".join(cells["c#0"].itertext())
    assert STATE_COLOURS["failed"] in ET.tostring(cells["c#1"]).decode()


def test_pipelined_edges_are_solid_and_blocking_edges_dashed() -> None:
    edges = groups(render_svg(compute_regions(e2e_graph())), "rf-edge")
    assert edges["a->b"].attrib["data-exchange"] == "PIPELINED"
    assert "stroke-dasharray" not in ET.tostring(edges["a->b"]).decode()
    assert "stroke-dasharray" in ET.tostring(edges["b->c"]).decode()


def test_texts_from_the_run_and_the_decision_are_escaped() -> None:
    """A state, task id, cause or title holding markup stays text: the SVG parses and holds no injected element
    (step ids cannot: the graph refuses them)."""
    evil = '<script>alert("x")</script>&'
    regions = compute_regions(e2e_graph())
    first = regions.regions[0].id
    svg = render_svg(regions, {SubtaskId("a", 0): CellState('fa"iled<b>', 1, "t<1>")},
                     {first: Highlight("failed", evil)}, title=evil)
    root = ET.fromstring(svg)
    assert not [e for e in root.iter() if e.tag.endswith("script") or e.tag.endswith("}b")]
    assert "<script>" not in svg and "&lt;script&gt;" in svg
    assert groups(svg, "rf-subtask")["a#0"].attrib["data-state"] == 'fa"iled<b>'


def test_the_graph_is_laid_out_at_its_natural_size_with_readable_text() -> None:
    """An 8-step DAG: its viewBox is its natural size (one unit, one CSS pixel at most: ``max-width``), drawn to the
    box's width (``test_fit``), and no text is under 11 px at the natural size."""
    graph = JobGraph.of([Step(f"s{i}", 2) for i in range(8)],
                        [Edge(f"s{i}", f"s{i + 1}", Exchange.BLOCKING, Distribution.POINTWISE) for i in range(7)])
    svg = render_svg(compute_regions(graph))
    root = ET.fromstring(svg)
    places = layout(graph)
    assert root.attrib["width"] == "100%" and root.attrib["data-width"] == str(int(places.width))
    assert root.attrib["viewBox"] == f"0 0 {int(places.width)} {int(places.height)}"
    assert f"max-width:{int(places.width)}px" in root.attrib["style"] and int(places.width) > 2000
    sizes = {float(t.attrib["font-size"]) for t in root.iter(f"{SVG}text")}
    assert min(sizes) >= 11, sizes


def test_a_dry_run_draws_no_state_in_its_cells() -> None:
    """Without a run (the dry run) a cell is its subtask, not ``#0 none``."""
    regions = compute_regions(e2e_graph())
    c0 = regions.region_of(SubtaskId("c", 0)).id
    cells = groups(render_svg(regions, None, {c0: Highlight("failed", "c#0")}, [SubtaskId("c", 0)]), "rf-subtask")
    texts = {s: "".join(g.itertext()) for s, g in cells.items()}
    assert not [t for t in texts.values() if "none" in t], texts
    assert texts["a#1"].endswith("#1") and texts["c#0"].endswith("✗ #0")
    assert {g.attrib["data-state"] for g in cells.values()} == {""}

"""The Failover tab's graph fits the tab: the example ETL (``dags/tpch_etl.py``, five columns) is wider than the
tab at its natural size, so the SVG is drawn ``width="100%"`` of its box, never wider than its natural size, with
its viewBox and ``preserveAspectRatio`` keeping its proportions; and what a person reads says *failover* region
(Airflow 3.4 has regions of its own).

    gen_customer ----------------------\\
    gen_orders   -> clean_orders   -----> join -> aggregate -> report
    gen_lineitem -> clean_lineitem ----/
"""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET

import pytest

from airflow_region_failover.failover.availability import KnownAvailability
from airflow_region_failover.failover.run_log import RunLog
from airflow_region_failover.failover_view.layout import layout
from airflow_region_failover.failover_view.page import plan_page, run_page
from airflow_region_failover.failover_view.svg import render_svg
from airflow_region_failover.graph.ids import SubtaskId
from airflow_region_failover.graph.model import JobGraph
from airflow_region_failover.graph.regions import compute_regions
from tests.support.examples import example_module
from tests.unit.failover_view.test_page import SPEC, decision

TAB_WIDTHS = (800, 1000, 1250)
"""The Failover tab's width in a 1400-px window (the browser test's), with and without Airflow's grid beside it."""


def example_graph() -> JobGraph:
    graph: JobGraph = example_module("tpch_etl").job.graph()
    return graph


def drawn_width(svg: ET.Element, container: float) -> float:
    """The width CSS gives the SVG inside a box ``container`` px wide (its ``width`` attribute, and a
    ``max-width`` in its style)."""
    width = svg.attrib["width"]
    found = re.search(r"max-width:\s*([0-9.]+)px", svg.attrib.get("style", ""))
    cap = float(found.group(1)) if found else float("inf")
    return min(container * float(width[:-1]) / 100, cap) if width.endswith("%") else min(float(width), cap)


@pytest.mark.parametrize("container", TAB_WIDTHS)
def test_the_example_graph_fits_the_failover_tab(container: int) -> None:
    graph = example_graph()
    places = layout(graph)
    assert places.width > max(TAB_WIDTHS), "the example is wider than the tab at its natural size"
    root = ET.fromstring(render_svg(compute_regions(graph)))
    assert root.attrib["viewBox"] == f"0 0 {int(places.width)} {int(places.height)}"
    assert root.attrib["preserveAspectRatio"] == "xMinYMin meet"
    assert "height" not in root.attrib, "the height follows the width (the viewBox's proportions)"
    assert drawn_width(root, container) <= container


def test_a_graph_is_never_drawn_wider_than_its_natural_size() -> None:
    graph = example_graph()
    root = ET.fromstring(render_svg(compute_regions(graph)))
    assert drawn_width(root, 10 * layout(graph).width) == int(layout(graph).width)


def test_what_a_person_reads_says_failover_region() -> None:
    doc = RunLog("dag", "run", decisions=(decision(1, "c#0"),))
    page = run_page(SPEC, doc, [], None, "/region-failover")
    assert "Restarted failover regions:" in page and "<th>failover region</th>" in page
    plan = SPEC.plan(SubtaskId("c", 0), KnownAvailability.except_([]))
    dry = plan_page(SPEC, "dag", plan, {}, "/region-failover", "c#0")
    assert "failover region(s) would restart" in dry
    assert "which failover regions would restart" in plan_page(SPEC, "dag", None, {}, "/region-failover")
    text = re.sub(r"<[^>]+>", " ", page.split("<svg", 1)[0] + page.split("</svg>", 1)[1])
    # "Region failover" is the provider's name, "strategy region" Flink's name of the failover strategy
    bare = list(re.finditer(r"(?<!failover )(?<!strategy )\bregions?\b(?! failover)", text, flags=re.IGNORECASE))
    assert not bare, [text[max(0, m.start() - 30):m.end() + 30] for m in bare]


def test_the_region_groups_say_failover_region_in_their_tooltip_and_doc() -> None:
    from airflow_region_failover.rendering.task_groups import inputs_by_step, region_doc, region_tooltip

    graph = example_graph()
    inputs = inputs_by_step(graph)
    for region in compute_regions(graph).regions:
        for text in (region_tooltip(region, inputs), region_doc(region, inputs)):
            words = re.sub(r"`[^`]*`", "", text)
            bare = re.findall(r"(?<!failover )(?<!Failover )\bregions?\b", words)
            assert not bare, text

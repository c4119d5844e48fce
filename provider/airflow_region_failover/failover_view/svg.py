"""The job graph of one run as an SVG: steps, subtasks coloured by state, regions, and what a decision restarts.

Rules (what a person reads at a glance; positions from :mod:`.layout`):

* laid out at its natural size (one SVG unit is one CSS pixel, no text under :data:`MIN_FONT_PX`) and drawn to
  the width of the tab: ``width="100%"`` of its box, at most its natural width (``max-width``: a small graph is
  never blown up), the height following from the ``viewBox`` (``preserveAspectRatio="xMinYMin meet"``) — so a
  wide graph (the example ETL's five columns) is scaled down until its right-hand failover regions are in sight,
  and every detail stays in the tooltips;

* one box per step, one cell per subtask, the cell filled with the colour of its task instance's state in this
  run (Airflow's state colours; no state: white) and labelled ``#i state`` (``try n`` once retried); without a
  run (the dry run: ``states`` is ``None``) a cell is labelled ``#i`` and carries no state;
* every failover region is a cluster: a translucent band in its own colour around its cells, labelled with its
  id; the cells of a region that is restarted have the colour of the region's *reason* as their outline
  (``failed`` red, ``producer-unavailable`` purple, ``consumer`` orange, ``full`` grey) and its cluster is
  labelled ``r3: failed``; regions the decision does not restart are *kept* (drawn faint);
* the subtasks whose failure the decision answers are marked with ``✗``;
* edges run from producer box to consumer box: PIPELINED solid, BLOCKING dashed (results persisted), labelled
  with the result and the distribution;
* everything from the graph, the run or the decision is escaped (task ids, causes, states) and every element
  carries a ``<title>`` (its tooltip) and a ``data-*`` attribute naming it, which the browser test reads.

Pure: imports no Airflow.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from dataclasses import dataclass
from html import escape

from airflow_region_failover.failover_view.layout import HEADER, Layout, Rect, StepBox, layout
from airflow_region_failover.graph.elements import Exchange
from airflow_region_failover.graph.ids import SubtaskId
from airflow_region_failover.graph.model import Edge
from airflow_region_failover.graph.regions import Region, Regions

REGION_COLOURS = ("#8dd3c7", "#ffffb3", "#bebada", "#fb8072", "#80b1d3", "#fdb462", "#b3de69", "#fccde5",
                  "#d9d9d9", "#bc80bd", "#ccebc5", "#ffed6f")
STATE_COLOURS: Mapping[str, str] = {
    "success": "#4caf50", "failed": "#e53935", "upstream_failed": "#ff9800", "up_for_retry": "#fdd835",
    "up_for_reschedule": "#26c6da", "running": "#8bc34a", "queued": "#9e9e9e", "scheduled": "#d2b48c",
    "restarting": "#ba68c8", "skipped": "#f48fb1", "removed": "#bdbdbd", "deferred": "#9575cd",
}
REASON_COLOURS: Mapping[str, str] = {
    "failed": "#c62828", "producer-unavailable": "#6a1b9a", "consumer": "#ef6c00", "full": "#455a64",
}
KEPT = "kept"
_SHORT_REASONS = {"producer-unavailable": "producer unavail."}
_TEXT = "font-family:sans-serif"
MIN_FONT_PX = 11


@dataclass(frozen=True)
class Highlight:
    """Why a region restarts in the decision shown: its reason and the partition or region behind it."""

    reason: str
    cause: str = ""


@dataclass(frozen=True)
class CellState:
    """A subtask's task instance in this run: its state (``None``: not scheduled yet) and try number."""

    state: str | None
    try_number: int = 0
    task_id: str = ""


def render_svg(regions: Regions, states: Mapping[SubtaskId, CellState] | None = None,
               highlights: Mapping[str, Highlight] | None = None, failed: Collection[SubtaskId] = (),
               title: str = "") -> str:
    """The SVG of ``regions.graph`` (module rules). ``highlights``: region id -> why it restarts; ``None``
    draws no decision (no region is marked kept); ``states`` ``None`` draws no run (the dry run)."""
    places = layout(regions.graph)
    parts = [_header(places, title)]
    parts.extend(_frame(box) for box in places.boxes.values())
    parts.extend(_cluster(places, i, region, highlights) for i, region in enumerate(regions.regions))
    parts.extend(_edge(places, edge) for edge in regions.graph.edges)
    parts.extend(_cells(box, states, set(failed), regions) for box in places.boxes.values())
    parts.append("</svg>")
    return "\n".join(p for p in parts if p)


def _header(places: Layout, title: str) -> str:
    width, height = int(places.width), int(places.height)
    return (f'<svg xmlns="http://www.w3.org/2000/svg" class="rf-graph" width="100%" '
            f'viewBox="0 0 {width} {height}" preserveAspectRatio="xMinYMin meet" '
            f'style="max-width:{width}px;height:auto;display:block" data-width="{width}" role="img" '
            f'aria-label="{escape(title or "job graph")}">'
            f"<title>{escape(title or 'job graph')}</title>"
            '<defs><marker id="rf-arrow" viewBox="0 0 10 10" refX="10" refY="5" markerWidth="7" markerHeight="7" '
            'orient="auto-start-reverse"><path d="M0,0 L10,5 L0,10 z" fill="#555"/></marker></defs>')


def _cluster(places: Layout, number: int, region: Region, highlights: Mapping[str, Highlight] | None) -> str:
    """The region's band: around its cells, in its colour; restarted: outlined in its reason's colour."""
    cells = list(dict.fromkeys(places.cell(s) for s in region.subtasks))
    band = Rect.around(cells).grown(4)
    colour = REGION_COLOURS[number % len(REGION_COLOURS)]
    found = highlights.get(region.id) if highlights is not None else None
    reason = found.reason if found else (KEPT if highlights is not None else "")
    stroke = REASON_COLOURS.get(reason, colour)
    width = 3 if found else 1
    opacity = "0.25" if reason == KEPT else "0.55"
    tip = f"failover region {region.id}: {', '.join(str(s) for s in region.subtasks[:40])}"
    if found:
        tip += f" — restarts: {found.reason}" + (f" ({found.cause})" if found.cause else "")
    elif reason == KEPT:
        tip += " — kept (not restarted)"
    label = f"{region.id}: {_SHORT_REASONS.get(reason, reason)}" if found else region.id
    return (f'<g class="rf-region" data-region="{escape(region.id)}" data-reason="{escape(reason)}">'
            f"<title>{escape(tip)}</title>"
            f'<rect x="{band.x:.1f}" y="{band.y:.1f}" width="{band.width:.1f}" height="{band.height:.1f}" rx="6" '
            f'fill="{colour}" fill-opacity="{opacity}" stroke="{stroke}" stroke-width="{width}"/>'
            f'<text x="{band.right + 3:.1f}" y="{band.y + 11:.1f}" font-size="{MIN_FONT_PX}" style="{_TEXT}" '
            f'fill="{stroke if found else "#555"}" font-weight="{"bold" if found else "normal"}">'
            f"{escape(label)}</text></g>")


def _edge(places: Layout, edge: Edge) -> str:
    """A producer -> consumer arrow: solid PIPELINED, dashed BLOCKING, labelled with result and distribution."""
    source, target = places.boxes[edge.source].rect, places.boxes[edge.target].rect
    x1, y1 = source.right, source.y + HEADER / 2
    x2, y2 = target.x, target.y + HEADER / 2
    bend = max(30.0, (x2 - x1) / 2)
    dash = "" if edge.exchange is Exchange.PIPELINED else ' stroke-dasharray="7 4"'
    label = f"{edge.result} · {edge.exchange.value} {edge.distribution.value}"
    return (f'<g class="rf-edge" data-edge="{escape(edge.source)}->{escape(edge.target)}" '
            f'data-exchange="{edge.exchange.value}"><title>{escape(label)}</title>'
            f'<path d="M{x1:.1f},{y1:.1f} C{x1 + bend:.1f},{y1:.1f} {x2 - bend:.1f},{y2:.1f} {x2:.1f},{y2:.1f}" '
            f'fill="none" stroke="#555" stroke-width="1.5"{dash} marker-end="url(#rf-arrow)"/>'
            f'<text x="{(x1 + x2) / 2:.1f}" y="{(y1 + y2) / 2 - 5:.1f}" font-size="{MIN_FONT_PX}" text-anchor="middle" '
            f'style="{_TEXT}" fill="#333">{escape(_short(edge.exchange.value.lower(), 12))}</text></g>')


def _frame(box: StepBox) -> str:
    """The step's box and name (drawn under the regions' bands)."""
    r = box.rect
    return (f'<g class="rf-step" data-step="{escape(box.step)}"><title>step {escape(box.step)}</title>'
            f'<rect x="{r.x:.1f}" y="{r.y:.1f}" width="{r.width:.1f}" height="{r.height:.1f}" rx="4" '
            'fill="#fafafa" stroke="#333" stroke-width="1.2"/>'
            f'<text x="{r.x + 8:.1f}" y="{r.y + 16:.1f}" font-size="12" font-weight="bold" style="{_TEXT}">'
            f"{escape(_short(box.step, 34))}</text></g>")


def _cells(box: StepBox, states: Mapping[SubtaskId, CellState] | None, failed: set[SubtaskId],
           regions: Regions) -> str:
    """The step's subtask cells, over the regions' bands (``states`` ``None``: no run, no state to show)."""
    parts = [f'<g class="rf-cells" data-step="{escape(box.step)}">']
    for subtask, rect in box.cells.items():
        cell = None if states is None else states.get(subtask, CellState(None))
        parts.append(_cell(subtask, rect, cell, subtask in failed, regions.region_of(subtask).id))
    if box.more is not None:
        m = box.more
        parts.append(f'<g class="rf-more"><rect x="{m.x:.1f}" y="{m.y:.1f}" width="{m.width:.1f}" '
                     f'height="{m.height:.1f}" rx="3" fill="#eee" stroke="#999"/>'
                     f'<text x="{m.x + 6:.1f}" y="{m.y + 14:.1f}" font-size="{MIN_FONT_PX}" style="{_TEXT}">'
                     f"+{box.hidden} more subtasks</text></g>")
    parts.append("</g>")
    return "".join(parts)


def _cell(subtask: SubtaskId, rect: Rect, cell: CellState | None, failed: bool, region: str) -> str:
    """One subtask's cell: ``cell`` is its task instance in the run (``None``: no run is drawn)."""
    state = "" if cell is None else cell.state or "none"
    fill = STATE_COLOURS.get(state, "#ffffff")
    tries = f" · try {cell.try_number}" if cell is not None and cell.try_number > 1 else ""
    mark = "✗ " if failed else ""
    task = f", task {cell.task_id}" if cell is not None and cell.task_id else ""
    tip = f"{subtask} ({region}{task})" + (f": {state}{tries}" if cell is not None else "") + (
        " — the failure this decision answers" if failed else "")
    return (f'<g class="rf-subtask" data-subtask="{escape(str(subtask))}" data-state="{escape(state)}" '
            f'data-region="{escape(region)}"><title>{escape(tip)}</title>'
            f'<rect x="{rect.x:.1f}" y="{rect.y:.1f}" width="{rect.width:.1f}" height="{rect.height:.1f}" rx="3" '
            f'fill="{fill}" stroke="{"#b71c1c" if failed else "#666"}" stroke-width="{2 if failed else 0.8}"/>'
            f'<text x="{rect.x + 6:.1f}" y="{rect.y + 14:.1f}" font-size="{MIN_FONT_PX}" style="{_TEXT}">'
            f"{escape(_short(f'{mark}#{subtask.index} {state}{tries}'.rstrip(), 30))}</text></g>")


def _short(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"

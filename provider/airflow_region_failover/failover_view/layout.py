"""A small layered layout of a job graph for the failover view: where each step's box and each subtask's cell go.

Rules (no Graphviz: the API server needs no system binary, and a job graph is a small DAG whose steps have a
natural left-to-right order):

* **Layers**: a step's column is the length of the longest path from a source to it, so every edge points to
  the right.
* **Rows**: steps are placed column by column, in the graph's topological order. A step is put at the height of
  the predecessor it is tied to most tightly (a PIPELINED input first, else its first input), or lower if that
  place is taken — so a POINTWISE pipeline ``a#i -> b#i`` lines up row by row and its regions form bands.
* **Cells**: one cell per subtask under the step's header, at most :data:`MAX_CELLS`; a wider step shows the
  first ``MAX_CELLS - 1`` and one cell standing for the rest (``+N more``).

Pure: imports no Airflow.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from airflow_region_failover.graph.elements import Exchange
from airflow_region_failover.graph.ids import SubtaskId
from airflow_region_failover.graph.model import JobGraph

MAX_CELLS = 16
BOX_WIDTH = 210
CELL_WIDTH = 130
"""The rest of a box's width, right of its cells, holds the labels of the regions (``r3: failed``)."""
COLUMN_GAP = 56
ROW_GAP = 34
HEADER = 24
CELL_HEIGHT = 20
CELL_GAP = 4
PAD = 8
MARGIN = 24


@dataclass(frozen=True)
class Rect:
    """An axis-aligned rectangle (SVG user units)."""

    x: float
    y: float
    width: float
    height: float

    @property
    def right(self) -> float:
        """x + width."""
        return self.x + self.width

    @property
    def bottom(self) -> float:
        """y + height."""
        return self.y + self.height

    def grown(self, by: float) -> Rect:
        """This rectangle with ``by`` added on every side."""
        return Rect(self.x - by, self.y - by, self.width + 2 * by, self.height + 2 * by)

    @staticmethod
    def around(rects: list[Rect]) -> Rect:
        """The smallest rectangle holding every one of ``rects`` (at least one)."""
        x, y = min(r.x for r in rects), min(r.y for r in rects)
        return Rect(x, y, max(r.right for r in rects) - x, max(r.bottom for r in rects) - y)


@dataclass(frozen=True)
class StepBox:
    """A step's box: its column, its rectangle, and the cells of the subtasks it shows."""

    step: str
    column: int
    rect: Rect
    cells: Mapping[SubtaskId, Rect]
    hidden: int
    """Subtasks not shown one by one (drawn as one ``+N more`` cell at :attr:`more`)."""
    more: Rect | None


@dataclass(frozen=True)
class Layout:
    """Every step's box and the drawing's size."""

    boxes: Mapping[str, StepBox]
    width: float
    height: float

    def cell(self, subtask: SubtaskId) -> Rect:
        """The cell of ``subtask`` (the ``+N more`` cell for a subtask not shown one by one)."""
        box = self.boxes[subtask.step]
        found = box.cells.get(subtask)
        if found is not None:
            return found
        assert box.more is not None, f"{subtask} has no cell"
        return box.more


def columns(graph: JobGraph) -> dict[str, int]:
    """``step -> column``: the longest path from a source (module rule)."""
    column: dict[str, int] = {}
    for step in graph.steps:  # topological order: every input's column is known
        column[step.id] = max((column[e.source] + 1 for e in graph.inputs(step.id)), default=0)
    return column


def _anchor(graph: JobGraph, step: str) -> str | None:
    """The predecessor a step is lined up with: a PIPELINED input first, else the first input."""
    inputs = graph.inputs(step)
    pipelined = [e.source for e in inputs if e.exchange is Exchange.PIPELINED]
    return pipelined[0] if pipelined else (inputs[0].source if inputs else None)


def _box_height(parallelism: int) -> float:
    shown = min(parallelism, MAX_CELLS)
    return HEADER + shown * (CELL_HEIGHT + CELL_GAP) - CELL_GAP + PAD


def layout(graph: JobGraph) -> Layout:
    """Place every step and subtask of ``graph`` (module rules)."""
    column = columns(graph)
    bottom: dict[int, float] = {}
    tops: dict[str, float] = {}
    boxes: dict[str, StepBox] = {}
    for step in graph.steps:
        col = column[step.id]
        anchor = _anchor(graph, step.id)
        wanted = tops[anchor] if anchor is not None else MARGIN
        top = max(wanted, bottom.get(col, MARGIN))
        height = _box_height(step.parallelism)
        tops[step.id] = top
        bottom[col] = top + height + ROW_GAP
        boxes[step.id] = _box(step.id, step.parallelism, col, top, height)
    width = MARGIN * 2 + (max(column.values(), default=0) + 1) * (BOX_WIDTH + COLUMN_GAP)  # a gap: labels overflow
    height = max(bottom.values(), default=MARGIN) - ROW_GAP + MARGIN
    return Layout(boxes, width, height)


def _box(step: str, parallelism: int, col: int, top: float, height: float) -> StepBox:
    x = MARGIN + col * (BOX_WIDTH + COLUMN_GAP)
    rect = Rect(x, top, BOX_WIDTH, height)
    shown = parallelism if parallelism <= MAX_CELLS else MAX_CELLS - 1
    cells = {SubtaskId(step, i): _cell(rect, i) for i in range(shown)}
    hidden = parallelism - shown
    return StepBox(step, col, rect, cells, hidden, _cell(rect, shown) if hidden else None)


def _cell(box: Rect, slot: int) -> Rect:
    return Rect(box.x + PAD, box.y + HEADER + slot * (CELL_HEIGHT + CELL_GAP), CELL_WIDTH, CELL_HEIGHT)

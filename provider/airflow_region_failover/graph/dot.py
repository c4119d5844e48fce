"""Graphviz DOT of a job graph with its steps coloured by failover region.

Rule: steps are nodes and results are edges (solid = PIPELINED, dashed = BLOCKING, labelled with the result and
the distribution). A step is coloured by its *region family*: the set of steps its regions span. A step whose
subtasks fall into k parallel regions of the same family (e.g. a POINTWISE pipeline) is labelled ``×k``; steps of
one family sit in one cluster.
"""

from __future__ import annotations

from airflow_region_failover.graph.model import Exchange
from airflow_region_failover.graph.regions import Regions

_PALETTE = (
    "#8dd3c7",
    "#ffffb3",
    "#bebada",
    "#fb8072",
    "#80b1d3",
    "#fdb462",
    "#b3de69",
    "#fccde5",
    "#d9d9d9",
    "#bc80bd",
    "#ccebc5",
    "#ffed6f",
)


def to_dot(regions: Regions) -> str:
    """The DOT text of ``regions.graph`` (see the module rule)."""
    families: dict[tuple[str, ...], list[str]] = {}
    count: dict[str, int] = {}
    placed: set[str] = set()
    for region in regions.regions:
        family = families.setdefault(region.steps, [])
        for step in region.steps:
            count[step] = count.get(step, 0) + 1
            if step not in placed:
                placed.add(step)
                family.append(step)
    lines = ["digraph job_graph {", "  rankdir=LR;", '  node [shape=box, style="rounded,filled"];']
    for i, (steps, members) in enumerate(f for f in families.items() if f[1]):
        colour = _PALETTE[i % len(_PALETTE)]
        lines.append(f'  subgraph "cluster_{i}" {{')
        lines.append(f'    label="region family {i}: {", ".join(steps)}"; style=dashed;')
        for step in members:
            label = step if count[step] == 1 else f"{step} ×{count[step]}"
            lines.append(f'    "{step}" [label="{label}", fillcolor="{colour}"];')
        lines.append("  }")
    for edge in regions.graph.edges:
        style = "solid" if edge.exchange is Exchange.PIPELINED else "dashed"
        label = f"{edge.result}\\n{edge.exchange.value} {edge.distribution.value}"
        lines.append(f'  "{edge.source}" -> "{edge.target}" [style={style}, label="{label}"];')
    lines.append("}")
    return "\n".join(lines) + "\n"

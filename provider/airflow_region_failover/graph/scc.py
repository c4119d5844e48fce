"""Strongly connected components, iteratively (Tarjan's algorithm with an explicit stack).

Recursion-free so that a 100,000-node ring does not overflow Python's stack. Nodes are ``0..n-1``; the graph is
an adjacency list. Returns, for every node, the id of its component (components numbered in completion order).
"""

from __future__ import annotations

from collections.abc import Sequence


def strongly_connected_components(adjacency: Sequence[Sequence[int]]) -> list[int]:
    """Component id of every node of ``adjacency`` (Tarjan; iterative; O(nodes + edges))."""
    n = len(adjacency)
    index = [-1] * n
    low = [0] * n
    on_stack = [False] * n
    component = [-1] * n
    stack: list[int] = []
    counter = 0
    components = 0
    for root in range(n):
        if index[root] != -1:
            continue
        work: list[tuple[int, int]] = [(root, 0)]
        while work:
            node, child = work[-1]
            if child == 0:
                index[node] = low[node] = counter
                counter += 1
                stack.append(node)
                on_stack[node] = True
            successors = adjacency[node]
            if child < len(successors):
                work[-1] = (node, child + 1)
                nxt = successors[child]
                if index[nxt] == -1:
                    work.append((nxt, 0))
                elif on_stack[nxt]:
                    low[node] = min(low[node], index[nxt])
                continue
            work.pop()
            if work:
                parent = work[-1][0]
                low[parent] = min(low[parent], low[node])
            if low[node] == index[node]:
                while True:
                    member = stack.pop()
                    on_stack[member] = False
                    component[member] = components
                    if member == node:
                        break
                components += 1
    return component

"""Sliced chains: a rescalable chain subtask run as epochs of finer subtasks, so that a failure loses one epoch.

Issue 47: "under failures more frequent than the longest subtask nothing finishes" — a task restarts from its start,
so a subtask longer than the time between failures never completes. A step declared ``rescalable``
(:class:`~.elements.Step`: its results, as its consumers use them, are the same at any parallelism) need not run its
share as one unit: subtask ``i`` of ``p`` computes what the *virtual subtasks* ``i·E … i·E+E−1`` of ``p·E``
compute together, so it may run them one after another as ``E`` epochs, each epoch's output stored at once and a
checkpoint (with no state) after it (:mod:`~airflow_region_failover.spark.sliced`); a retry resumes after the last
checkpointed epoch, as a checkpointed step does. The planner chooses ``E`` per run (Young/Daly,
:mod:`~airflow_region_failover.planning.epochs`); 1 runs the subtask as before.

Rules — a chain (a lone step is a chain of one) may be sliced when:

1. every member is declared ``rescalable``;
2. every input of its head is BLOCKING and keyed (``ALL_TO_ALL`` with ``partition_by``: a virtual subtask reads its
   key groups) or ``BROADCAST`` (every virtual subtask reads it whole), or the head reads nothing (a generator
   slices its own range by its context's index and parallelism); ``POINTWISE`` pairs partitions by index, which a
   virtual subtask has none of;
3. no result of its tail is ``cluster_by`` (the epochs' objects are committed as they come, as for a checkpointed
   step, :mod:`~airflow_region_failover.checkpoint.declared`).

Checkpointed and script steps are never sliced (the job says which those are, :mod:`~airflow_region_failover.job`).

Over a keyed input of ``M`` key groups, the range of virtual subtask ``i·E+k`` of ``p·E`` lies inside subtask
``i``'s range of ``p``, and the ``E`` of them tile it (:func:`~.keygroups.key_group_range`: ``⌈i·M/p⌉`` is where
both start), so the epochs read each of the subtask's rows once; ``p·E`` may not exceed ``M``: :func:`most_slices`.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

from airflow_region_failover.graph.elements import Distribution, Exchange
from airflow_region_failover.graph.ids import SubtaskId
from airflow_region_failover.graph.model import JobGraph

MOST_SLICES = 1000
"""The most epochs a sliced chain without keyed inputs is cut into (each is a Spark job and a checkpoint)."""


def sliceable(graph: JobGraph, steps: Sequence[str]) -> bool:
    """Whether the chain of ``steps`` (head first) of ``graph`` may be sliced (module rules 1-3)."""
    if not steps or not all(graph.step(s).rescalable for s in steps):
        return False
    for edge in graph.inputs(steps[0]):
        if edge.exchange is not Exchange.BLOCKING:
            return False
        if not edge.keyed and edge.distribution is not Distribution.BROADCAST:
            return False
    return not any(e.cluster_by for r in graph.outputs(steps[-1]) for e in r.consumers)


def most_slices(graph: JobGraph, head: str) -> int:
    """The most epochs the chain headed by ``head`` may take: ``M // p`` over its keyed inputs (module rule), at most
    :data:`MOST_SLICES`."""
    parallelism = graph.step(head).parallelism
    keyed = [e.max_parallelism // parallelism for e in graph.inputs(head) if e.keyed]
    return max(1, min([MOST_SLICES, *keyed]))


def virtual_graph(graph: JobGraph, steps: Sequence[str], epochs: int) -> JobGraph:
    """``graph`` with the chain's ``steps`` at ``epochs`` times their parallelism: the graph a virtual subtask reads
    its inputs in (its key groups of each keyed input)."""
    chain = set(steps)
    return JobGraph.of([dataclasses.replace(s, parallelism=s.parallelism * epochs) if s.id in chain else s
                        for s in graph.steps], graph.edges)


def virtual_subtask(member: SubtaskId, epochs: int, epoch: int) -> SubtaskId:
    """The virtual subtask epoch ``epoch`` of ``epochs`` of ``member`` runs: ``i·E + k``."""
    return SubtaskId(member.step, member.index * epochs + epoch)

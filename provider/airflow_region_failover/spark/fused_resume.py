"""What a fused task's commits record, and which of its regions a later try keeps instead of running them
(:mod:`.fused` runs the task; :mod:`.reuse` is the rule a region is kept by).

Rules:

* **lineage** — a member's commit records, as the inputs it was computed from, the versions of every BLOCKING
  partition it read *and* the lineage of every member it reads in Spark (recursively): what its rows depend on,
  not only what it read last. A member that reads only BLOCKING results records what it read, as a chain does;
  a member that reads a fused result records the BLOCKING inputs of the members it was computed from;
* **a region is kept whole or not at all** — the unit is the failover region of the run's plan (its members in
  this task: a region's PIPELINED and FUSED edges never leave it, so it lies inside one task). FLIP-1: "a
  FailoverRegion is just a collection of vertices that are restarted as a unit". A later try keeps a region's
  commits, running none of its members, when for every member, in the task's order:

  1. it may resume (:func:`resumable`);
  2. it has outputs, and each one that is not BLOCKING is read only by members of its region;
  3. every BLOCKING partition it reads is known now: from outside the task, or committed (or kept) by a member
     before it — a try runs its members region by region (:func:`region_order`), so a region's inputs from the
     task's other regions are;
  4. each of its BLOCKING outputs has a commit of an earlier try of this run by this task's code, from inputs whose
     checksums equal the member's lineage now (:func:`~.reuse.unchanged_commits`);

  and the region commits at least one partition. Otherwise every member of the region runs.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

from airflow_region_failover.failover.options import FailoverStrategy
from airflow_region_failover.failover.restart_plan import Reason
from airflow_region_failover.failover.run_log import Decision
from airflow_region_failover.graph.ids import PartitionId, SubtaskId
from airflow_region_failover.graph.model import Edge, Exchange, JobGraph
from airflow_region_failover.graph.regions import Regions
from airflow_region_failover.graph.subtasks import consumed_partitions
from airflow_region_failover.job import REUSE_PARAM, JobRuntime
from airflow_region_failover.spark.exchange import PartitionRef, output_results
from airflow_region_failover.store.manifest import InputVersion

Reads = Callable[[SubtaskId, Mapping[PartitionId, PartitionRef]], "dict[Edge, tuple[PartitionRef, ...]] | None"]
"""A member's BLOCKING reads given the refs written so far (``None`` when one is not written yet)."""
Versions = Callable[[SubtaskId, Mapping[Edge, Sequence[PartitionRef]]], tuple[InputVersion, ...]]
Committed = Callable[[Sequence[PartitionId], tuple[InputVersion, ...]], "tuple[PartitionRef, ...] | None"]


def resumable(runtime: JobRuntime, members: Sequence[SubtaskId], context: Mapping[str, Any],
              restart: Decision | None) -> frozenset[SubtaskId]:
    """The members this try may resume: a later try, ``region`` strategy, reuse not turned off by the run or the
    member's step, and not in a region restarted because its result was found unavailable
    (``producer-unavailable``: it must be recomputed)."""
    ti = context.get("ti")
    if int(getattr(ti, "try_number", 1) or 1) <= 1 or runtime.spec.config.failover_strategy is not \
            FailoverStrategy.REGION or (context.get("params") or {}).get(REUSE_PARAM) is False:
        return frozenset()
    lost = {s for r in (restart.regions if restart is not None else ())
            if r.reason == Reason.PRODUCER_UNAVAILABLE.value for s in r.subtasks}
    return frozenset(m for m in members if runtime.impl(m.step).reuse and str(m) not in lost)


def task_regions(regions: Regions, members: Sequence[SubtaskId]) -> dict[SubtaskId, tuple[SubtaskId, ...]]:
    """For every member, the members of its plan region, in the task's order."""
    order = {m: n for n, m in enumerate(members)}
    found: dict[SubtaskId, tuple[SubtaskId, ...]] = {}
    for member in members:
        if member not in found:
            region = tuple(sorted((s for s in regions.region_of(member).subtasks if s in order), key=order.__getitem__))
            found.update(dict.fromkeys(region, region))
    return found


def region_order(graph: JobGraph, members: Sequence[SubtaskId],
                 regions: Mapping[SubtaskId, tuple[SubtaskId, ...]]) -> tuple[SubtaskId, ...]:
    """``members`` in the order a try runs them: region by region, each region after the regions of the task it
    reads (lowest first member first), its members in their order — still topological, and every BLOCKING input
    of a region is known when its first member is reached (module rule 3)."""
    position = {m: n for n, m in enumerate(members)}
    groups = list(dict.fromkeys(regions.get(m, (m,)) for m in members))
    index = {m: g for g, region in enumerate(groups) for m in region}
    before: list[set[int]] = [set() for _ in groups]
    for member in members:
        for edge, parts in consumed_partitions(graph, member).items():
            producers = (index.get(SubtaskId(edge.source, p.index)) for p in parts)
            before[index[member]].update(g for g in producers if g is not None and g != index[member])
    done: list[int] = []
    while len(done) < len(groups):
        ready = [g for g in range(len(groups)) if g not in done and before[g] <= set(done)]
        if not ready:  # a cycle between regions cannot be (they would be one region): keep the task's order
            return tuple(members)
        done.append(min(ready, key=lambda g: position[groups[g][0]]))
    return tuple(m for g in done for m in groups[g])


def merged(*groups: Iterable[InputVersion]) -> tuple[InputVersion, ...]:
    """The versions of ``groups``, each (partition, key groups) once, sorted."""
    found = {(str(v.partition), repr(v.key_groups)): v for group in groups for v in group}
    return tuple(found[k] for k in sorted(found))


def lineage(graph: JobGraph, member: SubtaskId, own: tuple[InputVersion, ...],
            known: Mapping[SubtaskId, tuple[InputVersion, ...]]) -> tuple[InputVersion, ...] | None:
    """``member``'s lineage (module rule): ``own`` (its BLOCKING reads' versions) and the lineage ``known`` of each
    member it reads in memory; ``None`` if one of those is not known."""
    upstream: list[tuple[InputVersion, ...]] = []
    for edge, parts in consumed_partitions(graph, member).items():
        if edge.exchange is Exchange.BLOCKING:
            continue
        for part in parts:
            producer = known.get(SubtaskId(edge.source, part.index))
            if producer is None:
                return None
            upstream.append(producer)
    return merged(own, *upstream)


def kept_region(graph: JobGraph, region: tuple[SubtaskId, ...], resumable: frozenset[SubtaskId],
                readers: Mapping[PartitionId, Sequence[SubtaskId]], written: Mapping[PartitionId, PartitionRef],
                reads: Reads, versions: Versions,
                committed: Committed) -> dict[SubtaskId, tuple[PartitionRef, ...]] | None:
    """The commits each member of ``region`` keeps when a later try keeps it whole (module rules 1-4), else
    ``None``; ``written``: the refs committed or kept so far in this try."""
    if not region or not all(m in resumable for m in region):
        return None
    inside, now = set(region), dict(written)
    known: dict[SubtaskId, tuple[InputVersion, ...]] = {}
    kept: dict[SubtaskId, tuple[PartitionRef, ...]] = {}
    for member in region:
        outputs = output_results(graph, member.step)
        if not outputs or any(r.exchange is not Exchange.BLOCKING and not set(
                readers.get(PartitionId(r.id, member.index), ())) <= inside for r in outputs):
            return None
        read = reads(member, now)
        found = None if read is None else lineage(graph, member, versions(member, read), known)
        if found is None:
            return None
        known[member] = found
        blocking = [PartitionId(r.id, member.index) for r in outputs if r.exchange is Exchange.BLOCKING]
        refs = committed(blocking, found) if blocking else ()
        if refs is None:
            return None
        now.update((ref.partition, ref) for ref in refs)
        kept[member] = refs
    return kept if any(kept.values()) else None

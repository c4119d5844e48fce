"""Recovery-cost simulation: work redone after one failure under ``region``, ``region+reuse``, ``full`` and the minimum.

What is simulated. Graph families (each instance seeded, with per-step costs):

* ``pipelines``: independent ETL pipelines ``extract -> transform -> aggregate -> load`` (exchanges drawn per
  pipeline: POINTWISE PIPELINED or BLOCKING hops, one ALL_TO_ALL BLOCKING shuffle);
* ``tpch``: TPC-H-shaped join DAGs: ``scan_<table> -> clean_<table>`` (POINTWISE, PIPELINED or BLOCKING) for the
  8 TPC-H tables at table-sized parallelism; 2-4 queries, each a left-deep chain of ALL_TO_ALL BLOCKING joins over
  a random subset of the cleaned tables (a cleaned table is one BLOCKING result shared by every query reading
  it), then ``aggregate`` (ALL_TO_ALL BLOCKING) and ``report`` (POINTWISE, PIPELINED or BLOCKING);
* ``shuffles``: chains of 6-12 ALL_TO_ALL shuffles at parallelism 4-12, each hop PIPELINED (1/3) or BLOCKING.

Execution and failure model. Each trial draws a topological execution of the *regions* (random tie-breaks, so
independent branches interleave) and a failure point: a region index k, uniformly. Every region before k has
finished (each subtask did its whole cost, BLOCKING outputs committed). Region k is partly done: a random prefix
of its subtasks in topological order has started and is running, each having done a uniform fraction of its cost
(a prefix, so every started subtask's in-region producers have started); later regions have done nothing. The
failed subtask ``x`` is drawn among the started ones. With probability 1/3 (when ``x`` reads any BLOCKING
partition) one committed BLOCKING partition ``x`` reads is also lost, as if its objects had vanished — the
backtracking case. A partition is available iff its producer finished and it is not lost. ``done(s)`` is the work
subtask ``s`` has done so far.

Re-run outcomes (``_sim_reuse.py``). A share ``--reproducible`` (default 0.7) of the steps, drawn per graph,
re-produce byte-identical output when run again on identical input; the others are nondeterministic: each
subpartition read of their re-produced output (one consumer subtask's key range of a keyed ALL_TO_ALL partition,
or a whole POINTWISE partition) differs with probability ``--differs`` (default 0.5), drawn once per trial and
shared by every strategy. A subtask that runs again after reading any different subpartition produces a different
output in every subpartition; one that had not finished has no committed output to match (its output differs).
These draws use their own random stream, so graphs and failures are the same whatever the two options.

The restart sets: ``region`` and ``full`` are :func:`~airflow_region_failover.failover.planner.plan_restart`'s
(the lost partition named unavailable). ``region+reuse`` is the ``region`` set minus the subtasks the product's
new reuse rule keeps: walking the set in topological order, a subtask is kept when its region restarts only as a
consumer, its step reads and writes only BLOCKING results, it had finished, and every subpartition it reads comes
back unchanged (from a producer that does not run again, is kept, or re-produced it byte-identical); a kept
subtask re-produces nothing. The **minimal correct set** M is the least set of subtasks with ``done > 0`` (work
already done; subtasks that did nothing are not counted, they just run) such that:

1. ``x`` is in M (its partial work is lost);
2. **ephemeral inputs**: if ``s`` is in M and ``s`` reads a PIPELINED partition of a started ``p``, then ``p`` is in
   M: PIPELINED data is never kept, so rerunning ``s`` means re-producing it (``x``'s PIPELINED ancestors, and
   theirs);
3. **consumed streams**: if ``s`` is in M and a *running* ``y`` reads a PIPELINED partition of ``s``, then ``y`` is
   in M: ``y`` has consumed part of a stream that is being re-produced, and a stream cannot be resumed mid-way
   (``x``'s PIPELINED descendants that already consumed its output). Finished subtasks exist only in earlier
   regions, whose PIPELINED consumers have finished too;
4. **lost inputs**: if ``s`` is in M and reads a lost BLOCKING partition, its producer is in M (recursively, through
   2 and 4 — the producer's own PIPELINED inputs must be re-produced, its lost inputs too);
5. **changed inputs**: if ``s`` is in M and a subtask ``y`` with ``done > 0`` reads a subpartition of ``s``'s output
   that comes back different (the outcomes above, given that exactly M runs again), then ``y`` is in M: what ``y``
   computed from the old data is inconsistent with what the re-produced data feeds everyone else.

M assumes a clairvoyant scheduler that knows which re-produced subpartitions come back identical: finished
consumers of an identical one are *not* in M (the ``region`` rule 2 reruns them because a re-produced result may
differ). Rule 5 is new with the outcome model: before it, M assumed every re-produced BLOCKING result identical,
a lower bound for nondeterministic steps; with ``--reproducible 1`` it is that set again. M is computed as a fixed
point (close under 1-4, add rule 5's consumers, repeat). Work redone = sum of ``done(s)`` over a set (a kept
subtask's work is not redone); the simulation asserts minimal ⊆ region+reuse ⊆ region ⊆ full on every trial.

Printed per family (all trials, then with and without a lost partition): trials, share with a lost partition, mean
and p95 of ``region / minimal``, ``region+reuse / minimal`` and ``full / minimal`` (work ratios; 1.00 = no waste),
the share of trials where ``region`` and ``region+reuse`` redo exactly the minimum, and the mean work redone by
``minimal``, ``region`` and ``region+reuse`` as a percentage of the work done at the failure (``full`` redoes 100%).

Usage: ``python benchmarks/sim_recovery.py [--quick] [--seed N] [--graphs G] [--failures F] [--reproducible R]
[--differs Q]``.
"""

from __future__ import annotations

import argparse
import math
import random
import statistics
import sys
from collections.abc import Callable, Iterable
from dataclasses import dataclass

import _repo_path  # noqa: F401 - puts the repository root on sys.path
from _sim_reuse import Wiring, World, minimal_set, reproducible_steps
from airflow_region_failover.failover.planner import plan_restart
from airflow_region_failover.failover.topology import FailoverTopology
from airflow_region_failover.graph import JobGraph, JobGraphBuilder, PartitionId, SubtaskId

# ------------------------------------------------------------------------------------------------- graph families


@dataclass
class Instance:
    """A job graph plus the cost of one subtask of each step (arbitrary work units)."""

    graph: JobGraph
    cost: dict[str, float]


def _pick(rng: random.Random, pipelined_share: float) -> str:
    return "PIPELINED" if rng.random() < pipelined_share else "BLOCKING"


def pipelines_family(rng: random.Random) -> Instance:
    """4-10 independent pipelines ``extract -> transform -> aggregate -> load`` at parallelism 2-8."""
    b, cost = JobGraphBuilder(), {}
    for k in range(rng.randint(4, 10)):
        p = rng.choice((2, 4, 8))
        names = [f"p{k}_extract", f"p{k}_transform", f"p{k}_aggregate", f"p{k}_load"]
        for name, par, base in zip(names, (p, p, max(1, p // 2), 1), (4.0, 3.0, 2.0, 1.0), strict=True):
            b.step(name, parallelism=par)
            cost[name] = base * rng.uniform(0.5, 1.5)
        b.edge(names[0], names[1], exchange=_pick(rng, 0.5), distribution="POINTWISE")
        b.edge(names[1], names[2], exchange="BLOCKING")  # the shuffle: keyed in the reuse model (_sim_reuse.py)
        b.edge(names[2], names[3], exchange=_pick(rng, 0.5), distribution="POINTWISE")
    return Instance(b.build(), cost)


# TPC-H tables with a parallelism proportional to their size (SF-agnostic) and a scan cost per subtask.
_TABLES = {
    "lineitem": (16, 6.0),
    "orders": (8, 4.0),
    "partsupp": (8, 3.0),
    "part": (4, 2.0),
    "customer": (4, 2.0),
    "supplier": (2, 1.0),
    "nation": (1, 0.2),
    "region": (1, 0.1),
}


def tpch_family(rng: random.Random) -> Instance:
    """Scans and cleans of the TPC-H tables feeding 2-4 join queries (see the module docstring)."""
    b, cost = JobGraphBuilder(), {}
    for table, (par, base) in _TABLES.items():
        b.step(f"scan_{table}", parallelism=par).step(f"clean_{table}", parallelism=par)
        cost[f"scan_{table}"], cost[f"clean_{table}"] = base * rng.uniform(0.7, 1.3), base * rng.uniform(0.3, 0.6)
        b.edge(f"scan_{table}", f"clean_{table}", exchange=_pick(rng, 0.7), distribution="POINTWISE")
    for q in range(rng.randint(2, 4)):
        tables = ["lineitem", *rng.sample([t for t in _TABLES if t != "lineitem"], rng.randint(1, 4))]
        left = f"clean_{tables[0]}"
        for i, table in enumerate(tables[1:]):
            join = f"q{q}_join{i}"
            b.step(join, parallelism=rng.choice((8, 16)))
            cost[join] = rng.uniform(3.0, 8.0)
            b.edge(left, join, exchange="BLOCKING", result=left if left.startswith("clean_") else None)
            b.edge(f"clean_{table}", join, exchange="BLOCKING", result=f"clean_{table}")
            left = join
        b.step(f"q{q}_aggregate", parallelism=4).step(f"q{q}_report", parallelism=1)
        cost[f"q{q}_aggregate"], cost[f"q{q}_report"] = rng.uniform(1.0, 3.0), rng.uniform(0.2, 1.0)
        b.edge(left, f"q{q}_aggregate", exchange="BLOCKING")
        b.edge(f"q{q}_aggregate", f"q{q}_report", exchange=_pick(rng, 0.5), distribution="POINTWISE")
    return Instance(b.build(), cost)


def shuffles_family(rng: random.Random) -> Instance:
    """A chain of 6-12 ALL_TO_ALL shuffles, each hop PIPELINED with probability 1/3."""
    b, cost = JobGraphBuilder(), {}
    length = rng.randint(6, 12)
    for i in range(length):
        b.step(f"stage{i}", parallelism=rng.choice((4, 8, 12)))
        cost[f"stage{i}"] = rng.uniform(1.0, 5.0)
        if i:
            b.edge(f"stage{i - 1}", f"stage{i}", exchange=_pick(rng, 1 / 3))
    return Instance(b.build(), cost)


FAMILIES: dict[str, Callable[[random.Random], Instance]] = {
    "pipelines": pipelines_family,
    "tpch": tpch_family,
    "shuffles": shuffles_family,
}

# ------------------------------------------------------------------------------------------------------ simulating


@dataclass(frozen=True)
class Availability:
    """A partition is available iff its producer finished and it is not the lost one."""

    producer_step: dict[str, str]
    finished: frozenset[SubtaskId]
    lost: frozenset[PartitionId]

    def is_available(self, partition: PartitionId) -> bool:
        """True when committed (producer finished) and not lost."""
        producer = SubtaskId(self.producer_step[partition.result], partition.index)
        return producer in self.finished and partition not in self.lost


def random_region_order(topology: FailoverTopology, wiring: Wiring, rng: random.Random) -> list[int]:
    """A topological order of the region DAG, ties broken at random."""
    count = len(topology.regions.regions)
    indegree = [0] * count
    for targets in wiring.region_edges.values():
        for t in targets:
            indegree[t] += 1
    ready = [r for r in range(count) if indegree[r] == 0]
    order: list[int] = []
    while ready:
        i = rng.randrange(len(ready))
        ready[i], ready[-1] = ready[-1], ready[i]
        region = ready.pop()
        order.append(region)
        for t in wiring.region_edges.get(region, ()):
            indegree[t] -= 1
            if indegree[t] == 0:
                ready.append(t)
    assert len(order) == count, "the region graph must be acyclic"
    return order


@dataclass
class Trial:
    """Work redone by each strategy in one trial, and whether a partition was lost."""

    region: float
    reuse: float
    full: float
    minimal: float
    done: float
    lost: bool


def simulate(
    instance: Instance, failures: int, rng: random.Random, model: tuple[float, float, random.Random]
) -> list[Trial]:
    """``failures`` random single failures on one graph instance; ``model``: (reproducible, differs, its rng)."""
    graph = instance.graph
    topology = FailoverTopology.build(graph)
    wiring = Wiring.of(topology)
    reproducible = reproducible_steps(graph, model[0], model[2])
    producer_step = {e.result: e.source for e in graph.edges}
    regions = topology.regions.regions
    trials: list[Trial] = []
    for _ in range(failures):
        order = random_region_order(topology, wiring, rng)
        k = rng.randrange(len(order))
        done: dict[SubtaskId, float] = {}
        for region in order[:k]:
            for s in regions[region].subtasks:
                done[s] = instance.cost[s.step]
        finished = frozenset(done)
        members = regions[order[k]].subtasks  # already in topological (global) order
        started = members[: rng.randint(1, len(members))]
        for s in started:
            done[s] = instance.cost[s.step] * rng.uniform(0.05, 1.0)
        failed = rng.choice(started)
        lost: frozenset[PartitionId] = frozenset()
        inputs = sorted(wiring.blocking_in.get(failed, ()))
        if inputs and rng.random() < 1 / 3:
            lost = frozenset({rng.choice(inputs)})
        checker = Availability(producer_step, finished, lost)
        plan = plan_restart(topology, failed, checker, "region", lost)
        region_set = set(plan.restart)
        full_set = set(plan_restart(topology, failed, checker, "full", lost).restart)
        world = World(reproducible, model[1], model[2], finished)
        minimal = minimal_set(failed, done, set(started), lost, wiring, world)
        reuse_set = world.reuse_set(plan, wiring)
        assert minimal <= reuse_set <= region_set <= full_set, "minimal ⊆ region+reuse ⊆ region ⊆ full must hold"
        trials.append(
            Trial(
                region=_work(region_set, done),
                reuse=_work(reuse_set, done),
                full=_work(full_set, done),
                minimal=_work(minimal, done),
                done=sum(done.values()),
                lost=bool(lost),
            )
        )
    return trials


def _work(subtasks: Iterable[SubtaskId], done: dict[SubtaskId, float]) -> float:
    return sum(done.get(s, 0.0) for s in subtasks)


def _p95(values: list[float]) -> float:
    ordered = sorted(values)
    return ordered[max(0, math.ceil(0.95 * len(ordered)) - 1)]


def summarise(name: str, trials: list[Trial]) -> list[str]:
    """One table row: ratios to the minimal set (mean, p95), exact hits, and work redone as % of work done."""
    ratios = {a: [getattr(t, a) / t.minimal for t in trials] for a in ("region", "reuse", "full")}

    def pct(attr: str) -> str:
        return f"{100 * statistics.fmean(getattr(t, attr) / t.done for t in trials):.1f}%"

    def exact(attr: str) -> str:
        return f"{100 * sum(math.isclose(getattr(t, attr), t.minimal) for t in trials) / len(trials):.0f}%"

    stats = [f"{f(ratios[a]):.2f}" for a in ratios for f in (statistics.fmean, _p95)]
    lost = f"{100 * sum(t.lost for t in trials) / len(trials):.0f}%"
    shares = [exact("region"), exact("reuse"), *map(pct, ("minimal", "region", "reuse"))]
    return [name, f"{len(trials):,}", lost, *stats, *shares]


def main(argv: list[str] | None = None) -> int:
    """Simulate every family and print the table."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="few graphs and failures: a smoke run")
    parser.add_argument("--seed", type=int, default=20261122)
    parser.add_argument("--graphs", type=int, default=0, help="graph instances per family (default 40, quick 3)")
    parser.add_argument("--failures", type=int, default=0, help="failures per graph (default 50, quick 10)")
    parser.add_argument("--reproducible", type=float, default=0.7, help="share of reproducible steps (0.7)")
    parser.add_argument("--differs", type=float, default=0.5, help="P(a nondeterministic re-read differs) (0.5)")
    args = parser.parse_args(argv)
    graphs = args.graphs or (3 if args.quick else 40)
    failures = args.failures or (10 if args.quick else 50)
    rows: list[list[str]] = []
    for name, family in FAMILIES.items():
        rng = random.Random(f"{args.seed}:{name}")
        model = (args.reproducible, args.differs, random.Random(f"{args.seed}:{name}:outcomes"))
        trials: list[Trial] = []
        sizes: list[int] = []
        for _ in range(graphs):
            instance = family(rng)
            sizes.append(instance.graph.subtask_count)
            trials += simulate(instance, failures, rng, model)
        label = f"{name} ({min(sizes)}-{max(sizes)} subtasks)"
        rows.append(summarise(label, trials))
        lost = [t for t in trials if t.lost]
        if lost:
            rows.append(summarise("  … with a lost partition", lost))
        plain = [t for t in trials if not t.lost]
        if plain:
            rows.append(summarise("  … without", plain))
    header = [
        "family",
        "trials",
        "lost",
        "region/min mean",
        "region/min p95",
        "reuse/min mean",
        "reuse/min p95",
        "full/min mean",
        "full/min p95",
        "region = min",
        "reuse = min",
        "min % of done",
        "region % of done",
        "reuse % of done",
    ]
    widths = [max(len(h), *(len(r[i]) for r in rows)) for i, h in enumerate(header)]
    print(
        f"# sim_recovery {'--quick ' if args.quick else ''}(seed {args.seed}, {graphs} graphs x {failures} "
        f"failures per family; reproducible {args.reproducible}, differs {args.differs}; reuse = region+reuse)\n"
    )
    print("| " + " | ".join(h.ljust(w) for h, w in zip(header, widths, strict=True)) + " |")
    print("|" + "|".join("-" * (w + 2) for w in widths) + "|")
    for r in rows:
        cells = [r[0].ljust(widths[0]), *(c.rjust(w) for c, w in zip(r[1:], widths[1:], strict=True))]
        print("| " + " | ".join(cells) + " |")
    return 0


if __name__ == "__main__":
    sys.exit(main())

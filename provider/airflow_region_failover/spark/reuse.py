"""Keeping a restarted consumer's committed result instead of recomputing it — only when that is safe.

Flink restarts every consumer of a re-produced result, because a re-produced result may differ. Going beyond
Flink ("a finished consumer restarted by this cascade keeps its committed result when the exact
(sub)partitions it reads came back byte-identical and its code fingerprint is unchanged"), a restarted try (try > 1,
``region`` failover strategy) keeps its committed outputs when:

1. **our clear started it as a consumer restart**: the run's decision log says the first try after one of our
   clears is this one, and its region restarts only because it reads a re-produced result (``consumer``). A try
   started by a person's clear, by Airflow's retry, or as the failed or a producer region, always runs;
2. it exchanges data only through BLOCKING results (a PIPELINED input or output lives only within one region
   attempt), and reads at least one — so a chain subtask, whose interior is PIPELINED, never keeps;
3. every output has a committed version whose manifest records the input versions it was computed from and the
   fingerprint of the code that computed it, and that **code fingerprint is this try's**;
4. **what it reads is byte-identical**: for every input partition, the objects this try would read — the whole
   partition, or over a keyed exchange exactly its subpartitions — have the content checksum recorded when the
   output was computed (and the same key groups). Whether the producer was re-produced, and whether it is
   declared ``deterministic``, does not matter: what is read is compared, not predicted (so FLIP-1's lost-update
   case — a nondeterministic producer re-routing rows — cannot keep a consumer whose rows changed);
5. neither the step (``reuse=False``) nor the run (DAG param ``region_failover_reuse: false``) opted out.

The task then republishes its kept outputs and ends without running Spark. Any doubt means: run.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from airflow_region_failover.failover.options import FailoverStrategy
from airflow_region_failover.failover.restart_plan import Reason
from airflow_region_failover.graph.ids import PartitionId
from airflow_region_failover.graph.model import Exchange
from airflow_region_failover.spark.exchange import PartitionRef, output_results
from airflow_region_failover.spark.run import SubtaskRun
from airflow_region_failover.spark.store_io import StoreIO
from airflow_region_failover.store.manifest import InputVersion


def kept_outputs(run: SubtaskRun) -> tuple[PartitionRef, ...] | None:
    """The refs of the run's committed outputs if this try may keep them (module rule), else ``None``."""
    if run.opted_out or run.strategy is not FailoverStrategy.REGION or run.try_number <= 1 \
            or run.restarted_as != Reason.CONSUMER.value:
        return None
    if not _only_blocking(run) or not any(run.refs.values()):
        return None
    sctx = run.contexts[-1]
    return unchanged_commits(run.io, sctx.dag_id, sctx.run_id,
                             [PartitionId(r.id, run.tail.index) for r in run.outputs], run.code, run.versions)


def unchanged_commits(io: StoreIO, dag_id: str, run_id: str, partitions: Sequence[PartitionId], code: str,
                      versions: Iterable[InputVersion]) -> tuple[PartitionRef, ...] | None:
    """Rules 3 and 4 for outputs ``partitions`` of run ``run_id``: the refs of their committed versions if every
    one was computed by ``code`` from inputs whose checksums equal ``versions`` (what this try would read), else
    ``None`` (also for no partitions). A fused region's task resumes by the same rule (:mod:`.fused`)."""
    manifests = [io.committed(dag_id, run_id, p) for p in partitions]
    if not manifests or any(m is None or not m.code or m.code != code for m in manifests):
        return None
    current = tuple(versions)
    if not all(_unchanged(m.inputs, current) for m in manifests if m is not None):
        return None
    return tuple(PartitionRef(m.partition.result, m.partition.index, Exchange.BLOCKING, dag_id, run_id,
                              m.attempt, m.row_count) for m in manifests if m is not None)


def _only_blocking(run: SubtaskRun) -> bool:
    """Rule 2: every member's inputs and outputs are BLOCKING (a chain's interior edges are PIPELINED)."""
    steps = [m.step for m in run.members]
    return all(e.exchange is Exchange.BLOCKING for s in steps for e in run.graph.inputs(s)) and \
        all(r.exchange is Exchange.BLOCKING for s in steps for r in output_results(run.graph, s))


def _unchanged(recorded: Iterable[InputVersion], current: Iterable[InputVersion]) -> bool:
    """Rule 4 for one output: what it read then and what this try would read have equal checksums (a partition
    read as several key-group ranges, by the members a fused commit was computed from, each range)."""
    before = {(v.partition, v.key_groups): v.content_checksum for v in recorded}
    now = {(v.partition, v.key_groups): v.content_checksum for v in current}
    return before == now

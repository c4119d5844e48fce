"""Running one step task: a chain subtask — several chained steps' subtask ``i`` in one Spark session, or one
unchained subtask as a chain of one (Flink's ``OperatorChain``). The one entry is :func:`run_chain`.

Rule (:mod:`~airflow_region_failover.graph.chains` says which steps chain): the task looks up its
:class:`~.run.SubtaskRun` once — the head's inputs exactly as its producers' current tries published them, BLOCKING
ones at their committed version — and then takes one of three branches:

* **keep** (:mod:`.reuse`): a restarted try whose committed outputs are still valid republishes them without
  running Spark (never a chain: its interior is PIPELINED, so it is not a BLOCKING-only step);
* **script**: a lone script step is spark-submitted as its own application (:mod:`.submit`), which runs the same
  :func:`~.compute.compute`; the task checks and publishes what it committed;
* **compute** (:func:`~.compute.compute`): every step function is called in order in this process's session, the
  DataFrame a step returns passed on in memory; only the tail's outputs are written, under this try's attempt,
  recording the head's BLOCKING input versions and the run's code fingerprint;
* **checkpointed** (:mod:`.checkpointed`, when a member declares ``checkpoint=``): the same, once per epoch of the
  head's sliced input, resuming from the latest complete checkpoint that matches this try; ``listener`` hears of
  where the try started and of each checkpoint it completes (metrics);
* **sliced** (:mod:`.sliced`, a chain the job slices whose run's plan fixed more than one epoch): once per
  virtual subtask, with a checkpoint after each, resuming as a checkpointed chain does.

The refs published (BLOCKING outputs are committed store versions, PIPELINED ones attempt-scoped scratch versions
of the same store) become the task's XComs, and the task returns its summary (:mod:`.ledger`), built once. Before
running, the task logs once, for each PIPELINED input of the head that is not chained, why not and that it reads
the producer's scratch partition from the store.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from airflow_region_failover.checkpoint.declared import chain_checkpoint
from airflow_region_failover.checkpoint.runner import Listener
from airflow_region_failover.decisions.plans import Plans
from airflow_region_failover.decisions.try_log import TryLog
from airflow_region_failover.failover.error_class import TryInputs
from airflow_region_failover.graph.ids import SubtaskId
from airflow_region_failover.job import JobRuntime, JobSpec
from airflow_region_failover.naming import xcom_key
from airflow_region_failover.spark.checkpointed import run_checkpointed
from airflow_region_failover.spark.compute import compute, inputs_named
from airflow_region_failover.spark.exchange import PartitionRef
from airflow_region_failover.spark.ledger import CheckpointEntry, TaskSummary, summary
from airflow_region_failover.spark.reuse import kept_outputs
from airflow_region_failover.spark.run import SubtaskRun, start, try_inputs
from airflow_region_failover.spark.session import get_session, resolve_target
from airflow_region_failover.spark.sliced import run_sliced, slices_of
from airflow_region_failover.spark.store_io import open_store_io
from airflow_region_failover.spark.submit import submit_script
from airflow_region_failover.store.checkpoint_manifest import CheckpointManifest, TryRecord
from airflow_region_failover.timeline import current, phase

log = logging.getLogger(__name__)


def run_chain(runtime: JobRuntime, members: Sequence[SubtaskId], context: Mapping[str, Any],
              run_log: TryLog | None = None, listener: Listener | None = None,
              looked_up: Callable[[TryInputs | None], None] | None = None) -> TaskSummary:
    """Run chain subtask ``members`` (head first; one member for an unchained subtask) inside an Airflow task
    (``context`` is the task context; ``run_log``: the decision log as the caller read it for this try, ``None``:
    read here); returns the task's summary (module rule). ``looked_up`` hears, before anything runs, what the try
    computes from (:func:`~.run.try_inputs`): what a failure of this try records as its evidence."""
    log_scratch_inputs(runtime.spec, members[0])
    with phase("store_open"):
        io = open_store_io()
    with phase("lookup"):
        run = start(runtime, members, context, io, run_log)
    if looked_up is not None:
        looked_up(try_inputs(run))
    with phase("keep"):
        kept = kept_outputs(run)
    heard = Heard(listener)
    published = kept if kept is not None else _produce(run, heard)
    ti = context["ti"]
    with phase("publish"):
        for ref in published:
            publish(ti, ref)
    for ref in published:
        if kept is not None:
            log.info("kept BLOCKING partition %s (attempt %d, %d rows): its inputs are byte-identical to the ones "
                     "it was computed from, so try %d does not recompute it", ref.partition, ref.attempt, ref.rows,
                     run.try_number)
        else:
            log.info("wrote %s partition %s (attempt %d, %d rows)", ref.exchange.value, ref.partition, ref.attempt,
                     ref.rows)
    reads = run.io.reads
    if reads.partition_bytes:
        log.info("read %d of the %d bytes of its input partitions (%d objects)", reads.bytes, reads.partition_bytes,
                 reads.objects)
    with phase("ledger"):
        done = summary(run, published, kept=kept is not None, checkpoint=heard.entry())
    clock = current()
    return done if clock is None else replace(done, timeline=clock.timeline())


def _produce(run: SubtaskRun, heard: Heard) -> tuple[PartitionRef, ...]:
    """The outputs of this try: spark-submitted for a script step, else computed in this process (in epochs for
    a checkpointed or sliced chain, which ``heard`` hears of)."""
    if run.script is not None:
        with phase("submit"):
            return submit_script(run)
    with phase("session"):
        spark = get_session(resolve_target(run.impls[0].spark_conn_id))
    checkpointed = chain_checkpoint(run.graph, [m.step for m in run.members], {i.step_id: i for i in run.impls})
    with phase("compute"):
        if checkpointed is not None:
            with inputs_named(run):
                return run_checkpointed(spark, run, checkpointed, heard)
        sctx = run.contexts[-1]
        epochs = slices_of(Plans(run.io.store.objects), sctx.dag_id, sctx.run_id, run.head.step) if run.sliced else 1
        if epochs > 1:
            heard.sliced = True
            with inputs_named(run):
                return run_sliced(spark, run, epochs, heard)
        return compute(spark, run)


@dataclass
class Heard:
    """What a checkpointed try reported (where it started, the checkpoints it completed), passed on to ``outer``;
    ``sliced``: its epochs are a sliced chain's."""

    outer: Listener | None = None
    started: TryRecord | None = None
    checkpoints: list[CheckpointManifest] = field(default_factory=list)
    sliced: bool = False

    def __call__(self, event: CheckpointManifest | TryRecord) -> None:
        if isinstance(event, TryRecord):
            self.started = event
        else:
            self.checkpoints.append(event)
        if self.outer is not None:
            self.outer(event)

    def entry(self) -> CheckpointEntry | None:
        """The summary's checkpoint entry, or ``None`` when the try was not checkpointed."""
        if self.started is None:
            return None
        return CheckpointEntry(self.started.epochs, self.started.resumed_seq, self.started.skipped,
                               len(self.checkpoints), sum(c.uploaded_bytes for c in self.checkpoints), self.sliced)


def publish(ti: Any, ref: PartitionRef) -> None:
    """Publish where this task's partition of ``ref.result`` lives (the XCom its consumers pull)."""
    ti.xcom_push(key=xcom_key(ref.result), value=ref.to_json())


def log_scratch_inputs(spec: JobSpec, head: SubtaskId) -> None:
    """Log, once per edge, why each PIPELINED input of ``head`` is not chained (it is read from the store)."""
    for edge in spec.graph.inputs(head.step):
        reason = spec.chains.why_not(edge)
        if reason is not None:
            log.info("PIPELINED %s -> %s is not chained (%s): %s reads %s's scratch partitions of %r from the "
                     "store", edge.source, edge.target, reason, head, edge.source, edge.result)

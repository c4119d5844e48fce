"""A sliced chain subtask on Spark: its epochs are virtual subtasks (:mod:`~..graph.slicing`), run by the epoch loop of
:mod:`~..checkpoint.runner` with no state.

Rules:

* the run's plan fixed how many epochs ``E`` the chain's subtasks take (:func:`slices_of`: the plan the scheduler
  decided for the run, :meth:`~..decisions.plans.Plans.fix`; every try of the run the same number, so a retry resumes
  the checkpoints of the try before it). A plan that cannot be read or fixed fails the try with
  :class:`~..exceptions.RunPlanUnavailable` — never another number. With ``E`` = 1 the chain runs as any chain does
  (:func:`~.compute.compute`), with no checkpoint;
* epoch ``k`` of subtask ``i`` runs virtual subtask ``v = i·E+k`` of ``p·E`` (:func:`~..checkpoint.plan
  .plan_subtasks`): the head reads its inputs as ``v`` would — over a keyed edge only ``v``'s key groups of every
  producer partition, a BROADCAST input whole — and every member's function is called with ``v`` and ``p·E`` as its
  context's subtask and parallelism (and the epoch), passing each returned DataFrame on as a chain does;
* the tail's outputs of the epoch are stored as objects at once, cut into subpartitions for keyed consumers as the
  partition ``i`` they belong to is (:meth:`~..store.result_store.ResultStore.write_objects`), and a checkpoint
  holding the outputs so far (no state) is committed after the epoch (:mod:`~..checkpoint.runner`: resumed only
  under the same inputs, code and epoch plan, a lost object sending the try to an older one);
* what an epoch's job read through Spark's own reader is confirmed unchanged after it
  (:func:`~..store.dataplane.reading.confirm_unchanged`);
* at the end every result's objects of all epochs are committed as partition ``i``'s ordinary result
  (:func:`~.checkpointed.commit_epochs`): consumers, reuse, lineage and publication see an ordinary result.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

from airflow_region_failover.checkpoint.plan import Epoch, plan_subtasks
from airflow_region_failover.checkpoint.resume import Identity
from airflow_region_failover.checkpoint.runner import EpochResult, Listener, Settings, run_epochs
from airflow_region_failover.decisions.plans import Plans
from airflow_region_failover.graph.slicing import virtual_graph, virtual_subtask
from airflow_region_failover.spark.checkpointed import commit_epochs, epoch_outputs, fixed_plan, write_tail
from airflow_region_failover.spark.compute import call_members, read_inputs
from airflow_region_failover.spark.exchange import PartitionRef
from airflow_region_failover.spark.run import SubtaskRun
from airflow_region_failover.store.dataplane.types import Target
from airflow_region_failover.timeline import phase

if TYPE_CHECKING:
    import pyarrow as pa
    from pyspark.sql import SparkSession

log = logging.getLogger(__name__)


def slices_of(plans: Plans, dag_id: str, run_id: str, head: str) -> int:
    """The epochs the sliced chain headed by ``head`` takes in this run, as its plan fixed them (module rule)."""
    fixed = fixed_plan(plans, dag_id, run_id, f"step {head!r} is rescalable and runs the epochs its run's plan fixed")
    chosen = fixed.slices_of(head)
    log.info("%s runs %d epoch(s), as its run's plan fixed them: %s", head, chosen.epochs, chosen.reason)
    return chosen.epochs


def run_sliced(spark: SparkSession, run: SubtaskRun, epochs: int,
               listener: Listener | None = None) -> tuple[PartitionRef, ...]:
    """Run the chain subtask ``run`` as ``epochs`` virtual subtasks with checkpoints and commit its outputs (module
    rules)."""
    targets, storage = epoch_outputs(run)
    settings = Settings(storage, tuple(targets.values()), tuple(m.step for m in run.members), {}, {},
                        run.contexts[-1].try_number, Identity(run.versions, run.code, ""), run.checkpointing, True,
                        run.opted_out, {})
    engine = SlicedEngine(spark, run, epochs, targets)
    outcome = run_epochs(settings, plan_subtasks(run.head.index, epochs), engine, listener)
    return commit_epochs(run, targets, outcome)


@dataclass
class SlicedEngine:
    """Runs a sliced chain subtask's members on one epoch: one virtual subtask (module rules)."""

    spark: SparkSession
    run: SubtaskRun
    epochs: int
    targets: Mapping[str, Target]

    def virtual(self, epoch: Epoch) -> SubtaskRun:
        """The chain subtask as virtual subtask ``epoch.subtask`` runs it: the graph at ``E`` times the chain's
        parallelism, its members and contexts at the virtual index."""
        run, count = self.run, self.epochs
        members = tuple(virtual_subtask(m, count, epoch.index) for m in run.members)
        contexts = tuple(replace(c, subtask=m, parallelism=c.parallelism * count, epoch=epoch)
                         for c, m in zip(run.contexts, members, strict=True))
        return replace(run, graph=virtual_graph(run.graph, [m.step for m in run.members], count), members=members,
                       contexts=contexts)

    def run_epoch(self, epoch: Epoch, states: Mapping[str, pa.Table]) -> EpochResult:
        """Every member as the epoch's virtual subtask; the tail's outputs stored as partition ``i``'s objects."""
        run, virtual = self.run, self.virtual(epoch)
        before = len(run.io.jvm_reads)
        with phase("read"):
            inputs = read_inputs(self.spark, virtual)
        written = write_tail(run, self.targets, call_members(self.spark, virtual, inputs))
        run.io.store.confirm_unchanged(tuple(run.io.jvm_reads[before:]))
        return written

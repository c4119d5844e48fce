"""One try of a step task, looked up once before anything runs: :class:`SubtaskRun`.

Rule (Flink runs every task as an ``OperatorChain``; a lone operator is a chain of one): a step task runs the chain
subtask ``members`` — several chained steps' subtask ``i`` (:mod:`~airflow_region_failover.graph.chains`), or one
unchained subtask as a chain of one. Everything the try needs is looked up once, into one frozen value
(:func:`start`):

* the head's inputs: exactly the refs its producers' current tries published (XComs ``partition:<result>``,
  :func:`pull_refs`; see :mod:`.exchange` for the data contract), and the current committed manifest of each
  BLOCKING one, which must be the published attempt (:func:`current_inputs`) — what the outputs' manifests record
  as the inputs they were computed from (:func:`input_versions`: over a keyed edge, the checksum of exactly the
  subpartitions the head reads);
* each member's :class:`StepContext` (its subtask, parallelism and partitions: an interior input names the
  partition it would have been, :func:`chain_contexts`);
* the code fingerprint — a lone step's own, a chain's over every member's (:func:`chain_fingerprint`);
* what decides whether the try may keep its committed outputs (:mod:`.reuse`): the applied decision whose clear
  started it (:func:`restart_of`), the job's failover strategy, and whether the step or the run opted out.

Only a lone step may be a script step (a chain's members are step functions, :mod:`.submit` is spark-submitted).
"""

from __future__ import annotations

import hashlib
import logging
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from airflow_region_failover.decisions.storage import RunLogs
from airflow_region_failover.decisions.try_log import TryLog, read_try_log
from airflow_region_failover.exceptions import GraphError, InputUnavailable, NotAvailable
from airflow_region_failover.failover.checkpointing import CheckpointConfig
from airflow_region_failover.failover.error_class import TryInputs
from airflow_region_failover.failover.options import FailoverStrategy
from airflow_region_failover.failover.run_log import Decision
from airflow_region_failover.graph.ids import SubtaskId
from airflow_region_failover.graph.model import Edge, Exchange, JobGraph, Result
from airflow_region_failover.graph.subtasks import consumed_partitions, read_key_groups
from airflow_region_failover.job import REUSE_PARAM, JobRuntime, StepFunction, StepImpl
from airflow_region_failover.naming import JOB_PARAM, TaskNames, task_id_of, xcom_key
from airflow_region_failover.spark.context import StepContext, input_name
from airflow_region_failover.spark.exchange import PartitionRef, output_results
from airflow_region_failover.spark.store_io import StoreIO
from airflow_region_failover.store.manifest import InputVersion, Manifest
from airflow_region_failover.timeline import phase

log = logging.getLogger(__name__)

Refs = Mapping[Edge, Sequence[PartitionRef]]


@dataclass(frozen=True)
class SubtaskRun:
    """One try of chain subtask ``members`` (head first), everything it needs looked up once (module rule).

    ``impls``/``contexts``: each member's implementation and step context; ``refs``: the head's input refs;
    ``io``: the store view; ``current``: the current manifest of each BLOCKING input, ``versions``: what the
    outputs' manifests record of them; ``code``: the code fingerprint; ``restart``: the applied decision whose
    clear started this try (``None``: none did, so nothing is kept), ``task_id``: this task's id in it;
    ``strategy``: the job's failover strategy; ``opted_out``: the step or the run turned reuse off;
    ``checkpointing``: the job's checkpointing options (a checkpointed chain, :mod:`.checkpointed`); ``sliced``:
    the job slices this chain (its subtasks run the epochs the run's plan fixes, :mod:`.sliced`).
    """

    graph: JobGraph
    members: tuple[SubtaskId, ...]
    impls: tuple[StepImpl, ...]
    contexts: tuple[StepContext, ...]
    refs: Refs
    io: StoreIO
    current: Mapping[PartitionRef, Manifest]
    versions: tuple[InputVersion, ...]
    code: str
    restart: Decision | None = None
    task_id: str = ""
    strategy: FailoverStrategy = FailoverStrategy.REGION
    opted_out: bool = False
    checkpointing: CheckpointConfig = field(default_factory=CheckpointConfig)
    sliced: bool = False

    @property
    def head(self) -> SubtaskId:
        """The member that reads the chain's inputs."""
        return self.members[0]

    @property
    def tail(self) -> SubtaskId:
        """The member whose outputs the task writes and publishes."""
        return self.members[-1]

    @property
    def try_number(self) -> int:
        """This try's number: the attempt its outputs are written under."""
        return self.contexts[-1].try_number

    @property
    def restarted_as(self) -> str | None:
        """Why our clear started this try (its region's reason), or ``None`` when none of our clears did."""
        return self.restart.reasons.get(self.task_id) if self.restart is not None else None

    @property
    def script(self) -> str | None:
        """The script of a lone script step (spark-submitted), else ``None``."""
        return self.impls[0].script if len(self.impls) == 1 else None

    @property
    def functions(self) -> tuple[StepFunction, ...]:
        """Each member's step function (:class:`GraphError` naming a script step among them)."""
        return tuple(_function(impl) for impl in self.impls)

    @property
    def outputs(self) -> tuple[Result, ...]:
        """The results the task writes: the tail's."""
        return output_results(self.graph, self.tail.step)

    def output_ref(self, result: Result) -> PartitionRef:
        """The ref of this try's partition of ``result`` (rows unknown until written)."""
        sctx = self.contexts[-1]
        return PartitionRef(result.id, self.tail.index, result.exchange, sctx.dag_id, sctx.run_id, sctx.try_number)


def start(runtime: JobRuntime, members: Sequence[SubtaskId], context: Mapping[str, Any], io: StoreIO,
          run_log: TryLog | None = None) -> SubtaskRun:
    """The run of chain subtask ``members`` (head first) in the Airflow task whose context is ``context``, reading
    and writing through ``io`` (module rule); ``run_log``: the decision log as the task read it for this try
    (``None``: read it here, once)."""
    ti = context["ti"]
    graph, head = runtime.graph, members[0]
    impls = tuple(runtime.impl(m.step) for m in members)
    if len(impls) > 1:
        for impl in impls:
            _function(impl)
    with phase("xcom"):
        refs = pull_refs(ti, graph, head, runtime.spec.names)
    with phase("manifests"):
        current = current_inputs(io, refs)
    with phase("run_log"):
        restart = restart_of(ti, known=run_log)
    opted_out = not all(i.reuse for i in impls) or (context.get("params") or {}).get(REUSE_PARAM) is False
    return SubtaskRun(graph, tuple(members), impls, chain_contexts(graph, members, refs, context), refs, io, current,
                      input_versions(current, graph, head, refs), chain_fingerprint(impls), restart,
                      str(ti.task_id), runtime.spec.config.failover_strategy, opted_out,
                      runtime.spec.config.checkpointing, head.step in runtime.spec.sliced)


def pull_refs(ti: Any, graph: JobGraph, subtask: SubtaskId, names: TaskNames | None = None,
              edges: Callable[[Edge], bool] = lambda edge: True) -> dict[Edge, tuple[PartitionRef, ...]]:
    """For every input edge (of those ``edges`` selects), the refs its producers' current tries published
    (:class:`InputUnavailable` if one is missing); ``names`` names the producer subtasks' tasks and XCom keys (a
    chain's or a fused region's task; default: every subtask its own task)."""
    refs: dict[Edge, tuple[PartitionRef, ...]] = {}
    for edge, partitions in consumed_partitions(graph, subtask).items():
        if not edges(edge):
            continue
        producers = [SubtaskId(edge.source, p.index) for p in partitions]
        refs[edge] = tuple(
            PartitionRef.from_json(
                ti.xcom_pull(task_ids=names.task_id(producer) if names else task_id_of(producer),
                             key=names.xcom_key(producer, p.result) if names else xcom_key(p.result)),
                partition=p,
            )
            for producer, p in zip(producers, partitions, strict=True)
        )
    return refs


def current_inputs(io: StoreIO, refs: Refs) -> dict[PartitionRef, Manifest]:
    """The current manifest of every BLOCKING partition this try reads, checked to be the published attempt
    (:class:`InputUnavailable` naming a missing or superseded one)."""
    current = {}
    for ref in (r for rs in refs.values() for r in rs if r.exchange is Exchange.BLOCKING):
        try:
            current[ref] = io.current(ref)
        except NotAvailable as exc:
            raise InputUnavailable(ref.partition, str(exc)) from exc
    return current


def input_versions(current: Mapping[PartitionRef, Manifest], graph: JobGraph, subtask: SubtaskId,
                   refs: Refs) -> tuple[InputVersion, ...]:
    """The versions of the inputs in ``current`` as ``subtask``'s manifests record them (sorted by partition):
    over a keyed edge, the checksum of the subpartitions it reads and their key groups."""
    versions = []
    for edge, edge_refs in refs.items():
        groups = read_key_groups(graph, edge, subtask.index)
        for ref in edge_refs:
            if ref in current:
                versions.append(current[ref].version(groups, edge.partition_by, edge.max_parallelism))
    return tuple(sorted(versions, key=lambda v: v.partition))


def step_context(graph: JobGraph, subtask: SubtaskId, refs: Refs, context: Mapping[str, Any]) -> StepContext:
    """The :class:`StepContext` handed to the step function of ``subtask``, which reads ``refs``."""
    ti = context.get("ti")
    step = graph.step(subtask.step)
    params = {k: v for k, v in dict(context.get("params") or {}).items() if k not in (JOB_PARAM, REUSE_PARAM)}
    return StepContext(
        subtask=subtask, parallelism=step.parallelism, deterministic=step.deterministic,
        partitions={input_name(e): tuple(r.partition for r in rs) for e, rs in refs.items()},
        dag_id=getattr(ti, "dag_id", ""), run_id=getattr(ti, "run_id", ""),
        try_number=int(getattr(ti, "try_number", 1) or 1), params=params, airflow=context,
    )


def chain_contexts(graph: JobGraph, members: Sequence[SubtaskId], refs: Refs,
                   context: Mapping[str, Any]) -> tuple[StepContext, ...]:
    """Each member's :class:`StepContext`: the head's from its refs, the others' from their interior input."""
    head = step_context(graph, members[0], refs, context)
    contexts = [head]
    for member in members[1:]:
        step = graph.step(member.step)
        partitions = {input_name(e): ps for e, ps in consumed_partitions(graph, member).items()}
        contexts.append(replace(head, subtask=member, parallelism=step.parallelism,
                                deterministic=step.deterministic, partitions=partitions))
    return tuple(contexts)


def chain_fingerprint(impls: Sequence[StepImpl]) -> str:
    """The code fingerprint of a chain: SHA-256 over its members' fingerprints, in order (a chain of one: its
    step's own)."""
    if len(impls) == 1:
        return impls[0].fingerprint
    return hashlib.sha256("\n".join(impl.fingerprint for impl in impls).encode()).hexdigest()


def restart_of(ti: Any, logs: RunLogs | None = None, known: TryLog | None = None) -> Decision | None:
    """The applied decision whose clear started this try of ``ti``, or ``None`` (a first try, or a log that cannot
    be read: then nothing is kept and the try is reported as not restarted). ``known``: the log as the task already
    read it for this try (then it is not read again; :mod:`~airflow_region_failover.decisions.try_log`)."""
    return (known if known is not None else read_try_log(ti, logs)).restart()


def try_inputs(run: SubtaskRun) -> TryInputs | None:
    """What this try computes from, as a failure records it (:class:`~.failover.error_class.TryInputs`): the
    content checksum of exactly what it reads of each input partition (what the reuse rule compares) and its code
    fingerprint. ``None`` — no evidence — when that is not all it reads: a source step (it reads outside the
    store), a PIPELINED input (scratch, no recorded checksum), a checkpointed chain (it also reads the state it
    resumes), or an input without a recorded checksum."""
    refs = [r for rs in run.refs.values() for r in rs]
    if not refs or any(r.exchange is not Exchange.BLOCKING for r in refs) or len(run.versions) != len(refs) \
            or any(impl.checkpoint is not None for impl in run.impls):
        return None
    return TryInputs.of(((f"{v.partition}@{_groups(v.key_groups)}", v.content_checksum) for v in run.versions),
                        run.code)


def _groups(key_groups: range | None) -> str:
    return "" if key_groups is None else f"{key_groups.start}-{key_groups.stop}"


def _function(impl: StepImpl) -> StepFunction:
    if impl.fn is None:
        raise GraphError(f"step {impl.step_id!r} is a script step and cannot run in a chain; re-render the DAG "
                         "with this provider version (script steps are never chained)")
    return impl.fn

"""The job: a validated graph with its failover/restart options parsed once, and how each step runs.

Rules:

* :class:`JobSpec` is what the run-time loop needs about a rendered job — its graph, its effective options (as
  Flink keys) and the :class:`~.failover.options.FailoverConfig` parsed from them *once*, plus the failover
  topology, built on first use and kept with the spec (a DAG is parsed once per process).
* The spec travels in the DAG param :data:`~.naming.JOB_PARAM` as a versioned JSON document
  (:meth:`JobSpec.to_document`), so the scheduler (serialized DAG) and every worker (parsed DAG) read the same
  job with :func:`job_of`.
* Its graph is concrete: no AUTO edge is left (a plan resolved them, :mod:`~.graph.auto`), so everything that
  runs it sees BLOCKING and PIPELINED edges only. What it declared AUTO travels beside it (``auto``,
  :class:`~.graph.auto.AutoDeclaration`: the results, those no plan may fuse and why, the plan rendered), so a
  planner reading the rendered job (``region-failover advise DAG_ID``, the dry-run tab) costs the declared graph.
* A job rendered ``PER_RUN`` (:data:`~.graph.auto.PER_RUN`) renders every fusable AUTO result FUSED, so its tasks
  never change between runs; a run runs its own plan (:mod:`~.planning.stored`): :meth:`JobSpec.for_run` is the
  job as that run runs it — the graph of the run's plan (its regions, restart sets and the exchanges a fused task
  commits) with the rendered tasks' names (``structure``: the rendered graph the names, chains and fused regions
  follow).
* Its chains (:mod:`~.graph.chains`) follow from the graph and the edges the DAG file refuses to chain
  (``chain_breaks``, e.g. a script step's edges), which the document carries too: the scheduler names the tasks
  of a restart exactly as the DAG file rendered them (:attr:`JobSpec.names`).
* Its steps' own *non-recoverable errors* (``job.step(..., non_recoverable_errors=[...])``) travel in the
  document too, replacing the job's ``restart-strategy.non-recoverable-errors`` for that step
  (:meth:`JobSpec.declared`; a chain task: the names every member declares).
* Its *publications* (:mod:`~.publication`: sink steps whose result is committed to a Delta table after the
  run's sink subtasks) travel in the document too: the scheduler restarts a publishing task with its sink's
  subtasks (:meth:`JobSpec.followers`).
* Its steps checkpointed with ``Checkpoint(epochs="AUTO")`` travel in the document too (``auto_epochs``: step ->
  its ``max_epochs``), so the scheduler, which has no step implementation, chooses their epochs for each run
  (:mod:`~.planning.epochs`, :mod:`~.plugins.next_plan`). So do the planner's knobs the DAG file declared
  (``planner``, only those that differ from the defaults), which every advice and next plan of the job uses, and its
  *sliced* chains (``sliced``: head step -> the most epochs, :mod:`~.graph.slicing`), whose epochs each run's plan
  fixes the same way.
* :class:`StepImpl` says how one step runs (a Python function or a script, on which Spark connection, with which
  extra operator arguments, whether a restarted try may keep its committed result); :class:`JobRuntime` is the
  spec plus every step's implementation — what the step operators of one rendered job share in the worker.
* A step's *code fingerprint* (:attr:`StepImpl.fingerprint`) is the SHA-256 of the file that defines its
  function (the DAG file, or the module it imports the function from) plus the function's name, or of its script
  file: any change to that file changes it, so a result computed by other code is never kept. A change in
  another module the code imports is not seen: clear with reuse turned off (``region_failover_reuse: false``).
"""

from __future__ import annotations

import hashlib
import inspect
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from functools import cached_property
from pathlib import Path
from typing import Any

from airflow_region_failover.exceptions import GraphError
from airflow_region_failover.failover.availability import AvailabilityChecker
from airflow_region_failover.failover.checkpointing import Checkpoint
from airflow_region_failover.failover.error_class import parse_error_names
from airflow_region_failover.failover.handler import Declared
from airflow_region_failover.failover.options import FailoverConfig, parse_options
from airflow_region_failover.failover.planner import plan_restart
from airflow_region_failover.failover.restart_plan import RestartPlan
from airflow_region_failover.failover.topology import FailoverTopology
from airflow_region_failover.graph import jsonformat
from airflow_region_failover.graph.auto import (
    AutoDeclaration,
    ExchangePlan,
    auto_results,
    redeclare,
    resolve,
    run_choices,
)
from airflow_region_failover.graph.chains import Chains, EdgeKey, compute_chains
from airflow_region_failover.graph.fusion import FusedRegion, fused_regions
from airflow_region_failover.graph.ids import PartitionId, SubtaskId
from airflow_region_failover.graph.model import JobGraph
from airflow_region_failover.naming import JOB_PARAM, TaskNames
from airflow_region_failover.planning.policy import PlannerPolicy
from airflow_region_failover.publication.declaration import Publication

JOB_DOCUMENT_FORMAT = 1
REUSE_PARAM = "region_failover_reuse"
"""The DAG param (default true) a run's conf may set to false: no restarted try of that run keeps a result."""

StepFunction = Callable[..., Any]


@dataclass(frozen=True)
class JobSpec:
    """A job graph and its effective failover/restart options (Flink keys), validated; ``chain_breaks``: the
    PIPELINED POINTWISE edges the DAG file refuses to chain, with the reason (module rule); ``publications``:
    the sink steps published to Delta tables; ``non_recoverable``: step id -> its own non-recoverable exception
    class names (module rule); ``auto``: what the DAG file declared AUTO (module rule); ``structure``: the graph
    the tasks were rendered from when ``graph`` is a run's (:meth:`for_run`), else ``None``; ``run_plan``: that
    run's plan (its every AUTO result named); ``auto_epochs``: the steps declaring ``Checkpoint(epochs="AUTO")``, each
    with its ``max_epochs`` (module rule); ``planner``: the planner's knobs the DAG file declared
    (:class:`~.planning.policy.PlannerPolicy`, the defaults otherwise); ``sliced``: the chains (by head step) whose
    subtasks run the epochs each run's plan fixes (:mod:`~.graph.slicing`), each with the most it may take."""

    graph: JobGraph
    options: Mapping[str, str]
    chain_breaks: Mapping[EdgeKey, str] = field(default_factory=dict)
    publications: tuple[Publication, ...] = ()
    non_recoverable: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    auto: AutoDeclaration = field(default_factory=AutoDeclaration)
    structure: JobGraph | None = None
    run_plan: ExchangePlan | None = None
    auto_epochs: Mapping[str, int] = field(default_factory=dict)
    planner: PlannerPolicy = field(default_factory=PlannerPolicy)
    sliced: Mapping[str, int] = field(default_factory=dict)

    def __post_init__(self) -> None:
        pending = auto_results(self.graph)
        if pending:
            raise GraphError(f"result {pending[0]!r} is still AUTO: a job runs a concrete graph; resolve it with an "
                             "exchange plan first (graph.auto.resolve, as RegionJob.render does)")
        steps = {s.id for s in self.graph.steps}
        for what, named in (("non_recoverable_errors", self.non_recoverable), ("auto_epochs", self.auto_epochs),
                            ("sliced", self.sliced)):
            unknown = sorted(set(named) - steps)
            if unknown:
                raise GraphError(f"{what} names unknown step {unknown[0]!r}; declare it on a step of the job")
        redeclare(self.graph, self.auto)  # GraphError if it names a result the graph lacks

    @property
    def declared_graph(self) -> JobGraph:
        """The graph as the DAG file declared it: the ``auto`` results' edges AUTO again (what a planner costs)."""
        return redeclare(self.graph, self.auto)

    def for_run(self, plan: ExchangePlan) -> JobSpec:
        """This job as a run whose plan is ``plan`` runs it (module rule): for a job rendered ``PER_RUN``, the
        graph of :func:`~.graph.auto.run_choices` with the rendered tasks' names; any other job is itself."""
        if not self.auto.per_run:
            return self
        choices = run_choices(self.auto, plan)
        rendered = self.structure or self.graph
        return replace(self, graph=resolve(redeclare(rendered, self.auto), choices), structure=rendered,
                       run_plan=choices)

    def declared(self, task_id: str) -> Declared:
        """The exception class names non-recoverable for task ``task_id`` (module rule)."""
        job = Declared(self.config.non_recoverable_errors)
        members = self.names.subtasks(task_id) or ()
        own = [Declared(self.non_recoverable[m.step], f"step {m.step!r}'s non_recoverable_errors")
               if m.step in self.non_recoverable else job for m in members]
        if not own:
            return job
        if len(own) == 1 or all(d == own[0] for d in own):
            return own[0]
        names = tuple(n for n in own[0].names if all(n in d.names for d in own[1:]))
        return Declared(names, f"every step of chain task {task_id!r}")

    def publication(self, step_id: str) -> Publication | None:
        """The publication of ``step_id``'s sink result, or ``None``."""
        return next((p for p in self.publications if p.step == step_id), None)

    def followers(self, subtask: SubtaskId) -> tuple[str, ...]:
        """Tasks that run after ``subtask`` outside the graph and restart with it: its step's publishing task."""
        found = self.publication(subtask.step)
        return () if found is None else (found.task_id,)

    @cached_property
    def chains(self) -> Chains:
        """The rendered graph's chains (computed on first use, then kept)."""
        return compute_chains(self.structure or self.graph, self.chain_breaks)

    @cached_property
    def names(self) -> TaskNames:
        """The task ids of the job's subtasks, chains and fused regions (the regions the rendered plan fuses,
        :mod:`~airflow_region_failover.graph.fusion`)."""
        return TaskNames(self.chains, self.fused)

    @cached_property
    def fused(self) -> tuple[FusedRegion, ...]:
        """The regions that run as one task under the rendered plan (:func:`~.graph.fusion.fused_regions`)."""
        if self.structure is None:
            return fused_regions(self.graph, self.topology.regions, self.chains, self.auto.plan.fused)
        return fused_regions(self.structure, FailoverTopology.build(self.structure).regions, self.chains,
                             self.auto.plan.fused)

    @cached_property
    def config(self) -> FailoverConfig:
        """The options as one typed value (parsed on first use, then kept)."""
        return parse_options(self.options, strict=False)

    @cached_property
    def topology(self) -> FailoverTopology:
        """The failover topology of the graph (built on first use, then kept)."""
        return FailoverTopology.build(self.graph)

    def plan(self, failed: SubtaskId, checker: AvailabilityChecker,
             unavailable: tuple[PartitionId, ...] = ()) -> RestartPlan:
        """The core's restart plan for ``failed`` under this job's failover strategy."""
        return plan_restart(self.topology, failed, checker, self.config.failover_strategy, unavailable)

    def to_document(self) -> dict[str, Any]:
        """The JSON document stored in the DAG param :data:`~.naming.JOB_PARAM`."""
        document: dict[str, Any] = {"format": JOB_DOCUMENT_FORMAT, "graph": jsonformat.to_dict(self.graph),
                                    "options": dict(sorted(self.options.items()))}
        if self.chain_breaks:
            document["chain_breaks"] = [{"from": s, "to": t, "reason": r}
                                        for (s, t), r in sorted(self.chain_breaks.items())]
        if self.publications:
            document["publications"] = [p.to_dict() for p in self.publications]
        if self.non_recoverable:
            document["non_recoverable_errors"] = {s: list(n) for s, n in sorted(self.non_recoverable.items())}
        if self.auto.results:
            document["auto"] = self.auto.to_json()
        if self.auto_epochs:
            document["auto_epochs"] = dict(sorted(self.auto_epochs.items()))
        if self.planner.to_json():
            document["planner"] = self.planner.to_json()
        if self.sliced:
            document["sliced"] = dict(sorted(self.sliced.items()))
        return document

    @classmethod
    def from_document(cls, document: object) -> JobSpec:
        """Parse a job document; :class:`GraphError` if it is not one."""
        if not isinstance(document, dict) or document.get("format") != JOB_DOCUMENT_FORMAT:
            raise GraphError(f"DAG param {JOB_PARAM!r} is not a region-failover job document (format "
                             f"{JOB_DOCUMENT_FORMAT}); re-render the DAG with this provider version")
        options = document.get("options", {})
        if not isinstance(options, dict):
            raise GraphError(f"DAG param {JOB_PARAM!r}: 'options' must be an object")
        breaks = document.get("chain_breaks", [])
        if not isinstance(breaks, list) or not all(isinstance(b, dict) for b in breaks):
            raise GraphError(f"DAG param {JOB_PARAM!r}: 'chain_breaks' must be a list of objects")
        publications = document.get("publications", [])
        if not isinstance(publications, list):
            raise GraphError(f"DAG param {JOB_PARAM!r}: 'publications' must be a list of objects")
        errors = document.get("non_recoverable_errors", {})
        if not isinstance(errors, dict):
            raise GraphError(f"DAG param {JOB_PARAM!r}: 'non_recoverable_errors' must be an object")
        epochs, sliced = document.get("auto_epochs", {}), document.get("sliced", {})
        for key, named in (("auto_epochs", epochs), ("sliced", sliced)):
            if not isinstance(named, dict) or any(isinstance(n, bool) or not isinstance(n, int) or n < 1
                                                  for n in named.values()):
                raise GraphError(f"DAG param {JOB_PARAM!r}: {key!r} must map step ids to the most epochs (whole "
                                 "numbers >= 1)")
        return cls(jsonformat.from_dict(document.get("graph")), {str(k): str(v) for k, v in options.items()},
                   {(str(b.get("from")), str(b.get("to"))): str(b.get("reason")) for b in breaks},
                   tuple(Publication.from_dict(p) for p in publications),
                   {str(s): parse_error_names(n, f"step {s!r}: non_recoverable_errors", text=False)
                    for s, n in errors.items()},
                   AutoDeclaration.from_json(document["auto"]) if "auto" in document else AutoDeclaration(),
                   auto_epochs={str(s): int(n) for s, n in epochs.items()},
                   planner=PlannerPolicy.from_json(document.get("planner", {})),
                   sliced={str(s): int(n) for s, n in sliced.items()})


def job_of(dag: Any) -> JobSpec | None:
    """The job rendered into ``dag`` — a parsed ``DAG`` (worker) or a ``SerializedDAG`` (scheduler) — or ``None``.

    A parsed DAG keeps the decoded spec on the object (no JSON decoding per call); a serialized DAG is read from
    the DAG-level param :data:`~.naming.JOB_PARAM` (the DAG's own default, never a run's ``conf`` override).
    """
    cached = getattr(dag, "_region_failover_spec", None)
    if isinstance(cached, JobSpec):
        return cached
    params = getattr(dag, "params", None)
    if params is None or JOB_PARAM not in params:
        return None
    return JobSpec.from_document(params[JOB_PARAM])


@dataclass(frozen=True)
class StepImpl:
    """How one step runs: a Python ``fn`` or a ``script`` path, on ``spark_conn_id`` (None: the default), with
    extra keyword arguments for its operators (``retries``, ``pool``, ``executor_config``...); ``checkpoint``: it
    runs in epochs with keyed state (:mod:`~.failover.checkpointing`)."""

    step_id: str
    fn: StepFunction | None = None
    script: str | None = None
    spark_conn_id: str | None = None
    task_kwargs: Mapping[str, Any] = field(default_factory=dict)
    reuse: bool = True
    checkpoint: Checkpoint | None = None

    @cached_property
    def fingerprint(self) -> str:
        """SHA-256 of the code that computes this step (see the module rule)."""
        digest = hashlib.sha256()
        if self.script is not None:
            digest.update(Path(self.script).read_bytes())
            return digest.hexdigest()
        assert self.fn is not None
        try:
            source = inspect.getsourcefile(self.fn)
            digest.update(Path(source).read_bytes() if source else b"")
        except (OSError, TypeError):
            code = getattr(self.fn, "__code__", None)
            digest.update(repr((getattr(code, "co_code", b""), getattr(code, "co_consts", ()))).encode())
        digest.update(getattr(self.fn, "__qualname__", repr(self.fn)).encode())
        return digest.hexdigest()


@dataclass(frozen=True)
class JobRuntime:
    """What every step operator of a rendered job shares in the worker: the job and the step implementations."""

    spec: JobSpec
    impls: Mapping[str, StepImpl]

    @property
    def graph(self) -> JobGraph:
        """The job graph."""
        return self.spec.graph

    @property
    def options(self) -> Mapping[str, str]:
        """The job's effective options."""
        return self.spec.options

    def impl(self, step_id: str) -> StepImpl:
        """The implementation of ``step_id``."""
        return self.impls[step_id]

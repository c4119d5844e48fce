"""The DAG-file API: declare a job graph of PySpark steps and render it into the current Airflow DAG.

Example (a DAG file)::

    from airflow.sdk import DAG
    from airflow_region_failover import RegionJob

    with DAG("etl", schedule=None):
        job = RegionJob(restart_strategy="fixed-delay",
                        options={"restart-strategy.fixed-delay.attempts": "2"})
        job.step("extract", extract, parallelism=4)
        job.step("clean", clean, parallelism=4, deterministic=True)
        job.step("load", script="jobs/load.py")
        job.edge("extract", "clean", exchange="PIPELINED", distribution="POINTWISE")
        job.edge("clean", "load", exchange="BLOCKING")
        job.render()

Rules:

* a step is a Python function ``fn(spark, inputs, context)`` returning a DataFrame (written to every result the
  step produces), a ``dict`` of DataFrames keyed by result name (or consumer step id for default-named results),
  or ``None`` for a step without results — or a PySpark script path (spark-submitted, see
  :mod:`~airflow_region_failover.spark.submit`); ``inputs`` is keyed by producer step id (result name when the
  edge names one);
* everything is checked when :meth:`RegionJob.render` runs, i.e. when the DAG file is parsed: unknown steps,
  cycles, bad parallelism (:class:`GraphError` naming the step/edge), a step without implementation or with a bad
  function signature or missing script (naming the step), bad failover/restart options (:class:`OptionError`
  naming the key);
* steps joined by a PIPELINED POINTWISE edge of equal parallelism, where nobody else reads the producer and the
  consumer reads nothing else, are *chained* (:mod:`~airflow_region_failover.graph.chains`): one task per chain
  subtask runs them in one Spark session. Only function steps on the same Spark connection with the same
  operator arguments chain (:func:`chain_breaks` says why not otherwise); ``RegionJob(chaining=False)`` chains
  nothing (Flink's ``disableOperatorChaining``);
* ``checkpoint=Checkpoint(...)`` makes a step *checkpointed* (Flink's checkpoints for a batch step,
  :mod:`~airflow_region_failover.failover.checkpointing`): ``fn(spark, inputs, state, context)`` is called once per
  epoch of its BLOCKING input with that epoch's slice and its keyed state as of the previous epoch, and returns
  ``(output, new_state)``; a later try resumes from the latest complete checkpoint
  (:mod:`~airflow_region_failover.checkpoint`)::

      def sessionize(spark, inputs, state, context):  # context.epoch: index, count, last
          ...
          return closed_sessions, open_sessions

      job.step("sessions", sessionize, checkpoint=Checkpoint(
          state_key=["user"], state_schema="user string, start long, last long, clicks long", epochs=20))

* ``non_recoverable_errors=[KeyError, "AnalysisException"]`` on a step replaces, for that step, the job's
  ``restart-strategy.non-recoverable-errors``: a failure of one of these classes (or a subclass) ends the run
  instead of a restart (:mod:`~airflow_region_failover.failover.classify`); a bad name raises at once;
* ``publish="<table>"`` on a sink step (no outgoing edges) commits its result, once the run's sink subtasks
  succeeded, to a Delta Lake table (``publish_mode="append"`` or ``"overwrite"``), exactly once per run
  (:mod:`~airflow_region_failover.publication`; task ``<step>.publish``); a bad table name or mode raises at once,
  a non-sink step or a table published twice when the job renders;
* ``exchange="AUTO"`` on an edge (or ``RegionJob(default_exchange="AUTO")`` for every edge that names no
  exchange) leaves BLOCKING-or-fused to the provider (:mod:`~airflow_region_failover.graph.auto`,
  :mod:`~airflow_region_failover.planning`). An AUTO result whose fusing is impossible is BLOCKING in every plan
  (:func:`unfusable` says why): a consumer that is checkpointed (its epochs cut committed objects), a script step
  at either end (it runs in its own Spark application), or ends on different Spark connections. Without a plan a
  job renders every AUTO result BLOCKING; ``job.render(plan=PER_RUN)`` renders every fusable AUTO result FUSED
  and lets each run choose its plan, fixed when the run starts (:meth:`RegionJob.render`, docs/user/auto-plans.md);
* options use Flink's key names; unset keys come from ``[region_failover]`` in airflow.cfg
  (:func:`~airflow_region_failover.conf.restart_defaults`), then the job's own ``options``, then
  ``failover_strategy``/``restart_strategy`` (layered by :func:`~airflow_region_failover.failover.options.resolve`).
"""

from __future__ import annotations

import inspect
import os
from collections.abc import Callable, Mapping
from dataclasses import replace
from pathlib import Path
from typing import Any

from airflow.sdk import DAG
from airflow.sdk.definitions._internal.contextmanager import DagContext

from airflow_region_failover import conf
from airflow_region_failover.checkpoint.declared import chain_checkpoint
from airflow_region_failover.exceptions import GraphError, OptionError, UnsafeKeyError
from airflow_region_failover.failover.backoff import RESTART_STRATEGY_TYPE_KEY
from airflow_region_failover.failover.checkpointing import Checkpoint
from airflow_region_failover.failover.error_class import parse_error_names
from airflow_region_failover.failover.options import FAILOVER_STRATEGY_KEY, resolve
from airflow_region_failover.graph import auto, jsonformat
from airflow_region_failover.graph.auto import AutoDeclaration, Choice, ExchangePlan, PerRun
from airflow_region_failover.graph.builder import JobGraphBuilder
from airflow_region_failover.graph.ids import SubtaskId, check_step_id
from airflow_region_failover.graph.model import Distribution, Exchange, JobGraph
from airflow_region_failover.job import JobRuntime, JobSpec, StepFunction, StepImpl
from airflow_region_failover.operators.step import RegionStepOperator
from airflow_region_failover.planning.policy import PlannerPolicy
from airflow_region_failover.publication.declaration import Publication, check_publications, declare
from airflow_region_failover.publication.operator import RegionPublishOperator
from airflow_region_failover.rendering.deadline import planning_deadline
from airflow_region_failover.rendering.sharing import chain_breaks, refused_fusions, sliced_chains, unfusable
from airflow_region_failover.rendering.task_groups import RenderedJob, render_job
from airflow_region_failover.spark.exchange import check_sinks
from airflow_region_failover.store.key_checks import encode_airflow_id

StepSource = StepFunction | str | Path


class RegionJob:
    """A job graph under construction in a DAG file; :meth:`render` validates it and builds the tasks."""

    def __init__(
        self,
        *,
        failover_strategy: str | None = None,
        restart_strategy: str | None = None,
        options: Mapping[str, object] | None = None,
        spark_conn_id: str | None = None,
        chaining: bool = True,
        default_exchange: Exchange | str = Exchange.BLOCKING,
    ) -> None:
        self._builder = JobGraphBuilder()
        self._default_exchange = Exchange.parse(default_exchange, where="RegionJob(default_exchange=...)")
        self._chaining = chaining
        self._impls: dict[str, StepImpl] = {}
        self._publications: dict[str, Publication] = {}
        self._non_recoverable: dict[str, tuple[str, ...]] = {}
        self._options = {str(k): conf.option_text(k, v) for k, v in (options or {}).items()}
        if failover_strategy is not None:
            self._options[FAILOVER_STRATEGY_KEY] = failover_strategy
        if restart_strategy is not None:
            self._options[RESTART_STRATEGY_TYPE_KEY] = restart_strategy
        self._spark_conn_id = spark_conn_id

    def step(
        self,
        step_id: str,
        fn: StepFunction | None = None,
        *,
        script: str | Path | None = None,
        parallelism: int = 1,
        deterministic: bool = False,
        rescalable: bool = False,
        spark_conn_id: str | None = None,
        reuse: bool = True,
        publish: str | None = None,
        publish_mode: str = "append",
        publish_asset_name: str | None = None,
        checkpoint: Checkpoint | None = None,
        non_recoverable_errors: list[str | type[BaseException]] | tuple[str | type[BaseException], ...] | None = None,
        **task_kwargs: Any,
    ) -> str:
        """Declare step ``step_id`` run by ``fn`` or ``script``; returns the step id (for :meth:`edge`).

        ``rescalable=True``: the step's results, as its consumers use them, are the same at any parallelism (a
        keyed step's rows of a key depend only on that key's rows, or its consumers combine its partial rows), so a
        fused region may call it once on all of its inputs, as one Spark application would.
        ``reuse=False``: a restarted try of this step always recomputes (e.g. a step with side effects outside
        the store, such as a warehouse load), even when its inputs and code are unchanged.
        ``publish="table"``: this sink step's result is committed to Delta table ``table`` once per run
        (``publish_mode`` ``"append"`` or ``"overwrite"``; see the module rules); ``publish_asset_name`` names
        the table's Airflow Asset when no consumer has named it yet (default: the table's URI).
        ``checkpoint=Checkpoint(...)``: the step runs in epochs with keyed state and checkpoints (module rules).
        ``non_recoverable_errors=[KeyError, "AnalysisException"]``: exception classes (or their names) whose failure
        of this step ends the run instead of a restart, replacing the job's
        ``restart-strategy.non-recoverable-errors`` for it (``[]``: none for this step).
        """
        if check_step_id(step_id) in self._impls:
            raise GraphError(f"step {step_id!r} is declared twice; give each step a unique id")
        if not isinstance(reuse, bool):
            raise GraphError(f"step {step_id!r}: reuse={reuse!r} must be True or False")
        if checkpoint is not None and not isinstance(checkpoint, Checkpoint):
            raise GraphError(f"step {step_id!r}: checkpoint={checkpoint!r} must be a Checkpoint(...)")
        if non_recoverable_errors is not None:
            self._non_recoverable[step_id] = parse_error_names(
                non_recoverable_errors, f"step {step_id!r}: non_recoverable_errors", text=False)
        self._builder.step(step_id, parallelism=parallelism, deterministic=deterministic, rescalable=rescalable)
        impl = _impl(step_id, fn, script, spark_conn_id or self._spark_conn_id, task_kwargs, checkpoint is not None)
        self._impls[step_id] = replace(impl, reuse=reuse, checkpoint=checkpoint)
        if publish is not None:
            self._publications[step_id] = declare(step_id, publish, publish_mode, publish_asset_name)
        return step_id

    def task(self, step_id: str | None = None, **step_kwargs: Any) -> Callable[[StepFunction], StepFunction]:
        """Decorator form of :meth:`step`; the step id defaults to the function's name::

            @job.task(parallelism=4, deterministic=True)
            def clean(spark, inputs, context): ...
        """

        def declare(fn: StepFunction) -> StepFunction:
            self.step(step_id or fn.__name__, fn, **step_kwargs)
            return fn

        return declare

    def edge(
        self,
        source: str,
        target: str,
        *,
        exchange: Exchange | str | None = None,
        distribution: Distribution | str | None = None,
        result: str | None = None,
        partition_by: list[str] | tuple[str, ...] = (),
        max_parallelism: int = 0,
        cluster_by: list[str] | tuple[str, ...] = (),
        columns: list[str] | tuple[str, ...] = (),
    ) -> RegionJob:
        """Declare that ``target`` consumes ``source``'s result (checked by :meth:`render`).

        ``exchange``: ``"BLOCKING"``, ``"PIPELINED"`` or ``"AUTO"`` (the provider chooses; module rules); default
        the job's ``default_exchange`` (BLOCKING unless set).

        ``partition_by=["col", ...]`` makes the exchange keyed (``ALL_TO_ALL``): consumer j reads only the rows
        whose key hashes into its key groups (``max_parallelism`` key groups, default 128). Without it the
        distribution defaults to ``BROADCAST`` (every consumer subtask reads every producer partition);
        ``POINTWISE`` pairs consumer and producer subtasks by index. ``cluster_by=["col", ...]`` (BLOCKING only)
        stores the result sorted by those columns in content-defined files: rows unchanged since an earlier run
        land in byte-identical files (more, smaller objects; see docs/user/writing-jobs.md). ``columns=["col", ...]``
        (BLOCKING only) persists only those columns of what the producer returns — the columns its consumers read
        (they must include ``partition_by`` and ``cluster_by``); the others are never encoded, uploaded or read.
        """
        exchange = self._default_exchange if exchange is None else exchange
        self._builder.edge(source, target, exchange=exchange, distribution=distribution, result=result,
                           partition_by=partition_by, max_parallelism=max_parallelism, cluster_by=cluster_by,
                           columns=columns)
        return self

    @classmethod
    def from_json(
        cls,
        source: str | Path | Mapping[str, Any],
        steps: Mapping[str, StepSource],
        **kwargs: Any,
    ) -> RegionJob:
        """A job from the JSON format (a file path, JSON text or decoded document); ``steps`` maps every step id
        to its function or script path. Other keyword arguments go to :class:`RegionJob`."""
        graph = _load_graph(source)
        job = cls(**kwargs)
        unknown = sorted(set(steps) - {s.id for s in graph.steps})
        if unknown:
            raise GraphError(f"steps={{...}} names unknown step {unknown[0]!r}; the JSON graph declares "
                             f"{', '.join(s.id for s in graph.steps)}")
        for step in graph.steps:
            if step.id not in steps:
                raise GraphError(f"step {step.id!r} of the JSON graph has no implementation; add it to steps={{...}}")
            impl = steps[step.id]
            fn, script = (None, impl) if isinstance(impl, (str, Path)) else (impl, None)
            job.step(step.id, fn, script=script, parallelism=step.parallelism, deterministic=step.deterministic,
                     rescalable=step.rescalable)
        for edge in graph.edges:
            job.edge(edge.source, edge.target, exchange=edge.exchange, distribution=edge.distribution,
                     result=edge.result, partition_by=edge.partition_by, max_parallelism=edge.max_parallelism,
                     cluster_by=edge.cluster_by, columns=edge.columns)
        return job

    def graph(self) -> JobGraph:
        """The validated job graph (:class:`GraphError` names the first offending step or edge)."""
        return self._builder.build()

    def options(self) -> dict[str, str]:
        """The effective, validated options: ``[region_failover]`` defaults overridden by this job's."""
        return resolve(conf.restart_defaults(), self._options)

    def render(self, dag: DAG | None = None, plan: ExchangePlan | PerRun | None = None,
               planner: PlannerPolicy | None = None) -> RenderedJob:
        """Validate everything and build the TaskGroups and tasks in ``dag`` (default: the current DAG).

        ``plan`` resolves the AUTO edges (default: every AUTO result BLOCKING; an unfusable result stays BLOCKING
        whatever the plan says). ``plan=PER_RUN`` renders every fusable AUTO result FUSED — the tasks never change
        between runs — and each run runs the plan decided for it before it started (module rules). Call it last in
        the DAG file: tasks created afterwards would copy the (large) job document param. ``planner``: the knobs
        the provider's planner uses for this job's AUTO edges and epochs (default :class:`PlannerPolicy`'s); its
        run budget is the DAG's deadline alert, not a policy field.
        """
        dag = dag or _current_dag()
        _check_dag_id(dag.dag_id)
        if planner is not None and planner.deadline_seconds is not None:
            raise OptionError(f"render(planner=PlannerPolicy(deadline_seconds={planner.deadline_seconds!r})): a job's "
                              "run budget is its DAG's deadline alert (DeadlineAlert from DAGRUN_QUEUED_AT); "
                              "declare it there and drop deadline_seconds")
        declared = self.graph()
        pinned = unfusable(declared, self._impls)
        per_run = isinstance(plan, PerRun)
        chosen = auto.all_of(declared, Choice.FUSED) if isinstance(plan, PerRun) else plan or ExchangePlan()
        rendered = ExchangePlan({r: Choice.BLOCKING if r in pinned else c for r, c in chosen.choices.items()})
        graph = auto.resolve(declared, rendered)

        def unchained() -> frozenset[str]:
            return frozenset(rendered.fused) if per_run else frozenset()

        refusals = refused_fusions(graph, rendered, self._impls, self._chaining, unchained())
        while refusals:  # each pass unfuses at least one result: at most one pass per AUTO result
            pinned.update(refusals)
            rendered = ExchangePlan({r: Choice.BLOCKING if r in pinned else c for r, c in rendered.choices.items()})
            graph = auto.resolve(declared, rendered)
            refusals = refused_fusions(graph, rendered, self._impls, self._chaining, unchained())
        publications = tuple(self._publications.values())
        check_publications(publications, frozenset(s.id for s in graph.steps if not graph.outputs(s.id)))
        spec = JobSpec(graph, self.options(), chain_breaks(graph, self._impls, self._chaining, unchained()),
                       publications, dict(self._non_recoverable),
                       AutoDeclaration(auto.auto_results(declared), pinned, rendered, auto.declared_columns(declared),
                                       per_run, planning_deadline(dag)),
                       auto_epochs={step: impl.checkpoint.max_epochs for step, impl in self._impls.items()
                                    if impl.checkpoint is not None and impl.checkpoint.auto},
                       planner=planner or PlannerPolicy())
        spec = replace(spec, sliced=sliced_chains(spec, self._impls))
        runtime = JobRuntime(spec, dict(self._impls))
        check_sinks(runtime.graph)
        for chain in spec.chains.chains:
            chain_checkpoint(graph, chain.steps, self._impls)

        def make_task(members: tuple[SubtaskId, ...], group: Any) -> RegionStepOperator:
            impl = runtime.impl(members[0].step)  # a chain's members have equal task_kwargs (chain_breaks)
            return RegionStepOperator(task_id=spec.names.task_id(members[0]), subtask=str(members[0]),
                                      chain=[str(m) for m in members], runtime=runtime, dag=dag, task_group=group,
                                      **impl.task_kwargs)

        def make_publisher(publication: Publication) -> RegionPublishOperator:
            return RegionPublishOperator(task_id=publication.task_id, publication=publication, dag=dag,
                                         partitions=graph.step(publication.step).parallelism)

        return render_job(dag, runtime.spec, make_task, make_publisher)


def _current_dag() -> DAG:
    dag = DagContext.get_current()
    if dag is None:
        raise GraphError("RegionJob.render() needs a DAG: call it inside `with DAG(...):` or pass dag=")
    return dag


def _check_dag_id(dag_id: str) -> None:
    """The dag id is a key part of the result store: refuse, at parse time, one the store cannot key."""
    try:
        encode_airflow_id(dag_id, what="dag id")
    except UnsafeKeyError as exc:
        raise GraphError(f"{exc}; region-failover DAGs need an id the S3 result store can use as a key part "
                         "(rename the DAG)") from None


def _load_graph(source: str | Path | Mapping[str, Any]) -> JobGraph:
    if isinstance(source, Mapping):
        return jsonformat.from_dict(dict(source))
    text = str(source)
    if text.lstrip().startswith("{"):
        return jsonformat.loads(text)
    return jsonformat.load(text)


def _impl(step_id: str, fn: StepFunction | None, script: str | Path | None, conn: str | None,
          task_kwargs: Mapping[str, Any], stateful: bool = False) -> StepImpl:
    where = f"step {step_id!r}"
    reserved = sorted(set(task_kwargs) & {"task_id", "dag", "task_group", "subtask", "runtime"})
    if reserved:
        raise GraphError(f"{where}: {reserved[0]!r} is set by the renderer; remove it")
    if (fn is None) == (script is None):
        raise GraphError(f"{where}: give exactly one of a Python function (fn) or script='path/to/job.py'")
    if fn is not None:
        _check_signature(where, fn, stateful)
        return StepImpl(step_id, fn=fn, spark_conn_id=conn, task_kwargs=dict(task_kwargs))
    path = os.fspath(script)  # type: ignore[arg-type]
    if not path.endswith(".py") or not os.path.isfile(path):
        raise GraphError(f"{where}: script {path!r} is not an existing .py file; give its path (absolute, or "
                         "relative to the DAG file with os.path.join(os.path.dirname(__file__), ...))")
    return StepImpl(step_id, script=os.path.abspath(path), spark_conn_id=conn, task_kwargs=dict(task_kwargs))


def _check_signature(where: str, fn: StepFunction, stateful: bool = False) -> None:
    shape = "spark, inputs, state, context" if stateful else "spark, inputs, context"
    if not callable(fn):
        raise GraphError(f"{where}: fn {fn!r} is not callable; pass a function fn({shape})")
    try:
        inspect.signature(fn).bind(*([None] * (4 if stateful else 3)))
    except TypeError:
        raise GraphError(f"{where}: function {getattr(fn, '__name__', fn)!r} must accept ({shape})") from None
    except ValueError:  # builtins without a signature: accept
        return

"""The step operator: one Airflow task runs one subtask of a job graph on Spark — or one subtask of a chain of
steps (:mod:`~airflow_region_failover.graph.chains`), or every subtask of a fused region
(:mod:`~airflow_region_failover.spark.fused`), all in one Spark session.

Rule: ``execute`` first honours a restart backoff delay (a task restarted by region failover starts no earlier
than its decision's restart time: it is rescheduled to it, ``up_for_reschedule``, so no worker slot is held), then
runs the subtask (:func:`~airflow_region_failover.spark.chain.run_chain`): inputs at the versions its producers'
current tries published, the step function or script (a chain: each step function in turn, passing DataFrames in
memory), outputs committed under this try's attempt and published as XComs. The run's decision log is read once,
and only on a try after the first (:mod:`~airflow_region_failover.decisions.try_log`): the delay and the reuse rule
(:mod:`~airflow_region_failover.spark.reuse`) both answer from that one read. A try that cannot read it waits the
restart strategy's first backoff in place (never rescheduled: a log that stays unreadable must not hold the task
back for ever) and recomputes.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Sequence
from datetime import datetime, timedelta, timezone
from typing import TYPE_CHECKING, Any

from airflow.sdk import BaseOperator
from airflow.sdk.exceptions import AirflowRescheduleException

from airflow_region_failover import conf, timeline
from airflow_region_failover.current_task import current_ti
from airflow_region_failover.decisions.storage import RunLogs
from airflow_region_failover.decisions.try_log import LogState, TryLog, read_try_log
from airflow_region_failover.failover.error_class import TryInputs
from airflow_region_failover.failover.options import FailoverConfig
from airflow_region_failover.graph.ids import SubtaskId
from airflow_region_failover.job import JobRuntime, JobSpec
from airflow_region_failover.observability import metrics
from airflow_region_failover.observability.lineage import TryFacts
from airflow_region_failover.spark.chain import run_chain
from airflow_region_failover.spark.fused import run_fused
from airflow_region_failover.spark.ledger import RestartEntry
from airflow_region_failover.spark.run import restart_of

if TYPE_CHECKING:
    from airflow.sdk import Context

    from airflow_region_failover.spark.ledger import TaskLedger

log = logging.getLogger(__name__)

SLEEP_BELOW_S = 2.0
"""A remaining restart delay shorter than this is slept off in place rather than rescheduled."""


def delay_left(read: TryLog, config: FailoverConfig) -> float:
    """Seconds this try of a restarted step task must still wait before it runs (:meth:`TryLog.wait`: only the
    first try after our clear waits, or any try facing an unreadable log), bounded by ``[region_failover]
    max_start_delay``."""
    return min(read.wait(config, time.time()), conf.max_start_delay())


def restart_delay_left(ti: Any, config: FailoverConfig, logs: RunLogs | None = None) -> float:
    """:func:`delay_left` of the log :func:`~airflow_region_failover.decisions.try_log.read_try_log` reads."""
    return delay_left(read_try_log(ti, logs), config)


def doc_of(runtime: JobRuntime, members: Sequence[SubtaskId]) -> str:
    """The task's ``doc_md``: its subtask, or its chain's steps and why they run in one task."""
    first = members[0]
    parallelism = runtime.graph.step(first.step).parallelism
    if runtime.spec.names.is_fused(runtime.spec.names.task_id(first)):
        steps = ", ".join(f"`{s}`" for s in dict.fromkeys(m.step for m in members))
        return (f"Fused failover region: runs all {len(members)} subtasks of {steps} in one Spark session, passing "
                "the PIPELINED exchanges between them in memory (the job's plan fuses them); BLOCKING results are "
                "committed as always.")
    deterministic = [m.step for m in members if runtime.graph.step(m.step).deterministic]
    if len(members) == 1:
        return (f"Subtask `{first}` ({first.index + 1} of {parallelism}) of step `{first.step}`"
                f"{' (deterministic)' if deterministic else ''}.")
    steps = " -> ".join(f"`{m.step}`" for m in members)
    return (f"Chain subtask {first.index + 1} of {parallelism} of the chained steps {steps}: runs "
            f"{', '.join(f'`{m}`' for m in members)} one after another in one Spark session, passing DataFrames in "
            f"memory (PIPELINED POINTWISE exchanges of equal parallelism); only `{members[-1].step}`'s results are "
            f"written." + (f" Deterministic: {', '.join(f'`{d}`' for d in deterministic)}." if deterministic else ""))


class RegionStepOperator(BaseOperator):  # type: ignore[misc]
    """Run subtask ``subtask`` (``"step#i"``) of ``runtime``'s job graph (built by ``RegionJob.render``), or the
    chain subtask ``chain`` (``["a#i", "b#i", ...]``, head first; ``subtask`` is then its head).

    Its class name is :data:`~airflow_region_failover.naming.OPERATOR_NAME`: the watcher finds step tasks by it.
    """

    template_fields: Sequence[str] = ("subtask",)
    ui_color = "#f4a460"
    ui_fgcolor = "#000000"

    def __init__(self, *, subtask: str, runtime: JobRuntime, chain: Sequence[str] = (), **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.subtask = subtask
        self.chain = list(chain) or [subtask]
        self.runtime = runtime
        members = [SubtaskId.parse(s) for s in self.chain]
        if members[0] != SubtaskId.parse(subtask):
            raise ValueError(f"chain {self.chain} must start with subtask {subtask!r}")
        self.doc_md = doc_of(runtime, members)
        self._parsed_at = time.time()  # in a task process: when the DAG file's parse created this task

    def execute(self, context: Context) -> Any:
        """Run the subtask; returns its summary (rows written per result, the task's ledger:
        :class:`~airflow_region_failover.spark.ledger.TaskSummary`, in its JSON form, with the task's timeline from
        here on, :mod:`~airflow_region_failover.timeline`) that Airflow stores as return value, and sends the task's
        restart metrics and, for a checkpointed chain, its checkpoint metrics as they happen
        (:mod:`~airflow_region_failover.observability.metrics`)."""
        self.try_inputs: TryInputs | None = None  # what a failure of this try records (the listener reads it)
        with timeline.measured() as clock:
            clock.record_since("airflow_start", getattr(self, "_parsed_at", clock.started))
            with timeline.phase("restart_wait"):
                read = self._try_log(context["ti"])
                self._wait_for_restart_time(context, read)
            members = tuple(SubtaskId.parse(s) for s in self.chain)
            if self.runtime.spec.names.is_fused(self.task_id):
                summary = run_fused(self.runtime, members, context, read, self._looked_up)
            else:
                listener = metrics.checkpoint_listener(context["ti"].dag_id, members[-1].step)
                summary = run_chain(self.runtime, members, context, read, listener, self._looked_up)
        self._ledger = summary.ledger
        metrics.emit_task(context["ti"].dag_id, summary.subtask.step, summary.ledger)
        return summary.to_json()

    def _looked_up(self, inputs: TryInputs | None) -> None:
        """Keep what this try computes from, for the failure listener (:mod:`~airflow_region_failover.plugins
        .listener`), which runs in this process after ``execute`` raised."""
        self.try_inputs = inputs

    # -- OpenLineage (the openlineage provider calls these when it is installed; see observability/lineage.py) ------
    def get_openlineage_facets_on_start(self) -> Any:
        """The try's run facet (nothing read or written yet), for the running task instance."""
        return self._lineage(current_ti(), None)

    def get_openlineage_facets_on_complete(self, task_instance: Any) -> Any:
        """Every BLOCKING partition the task read and committed or kept, and its run facet."""
        return self._lineage(task_instance, getattr(self, "_ledger", None))

    def get_openlineage_facets_on_failure(self, task_instance: Any) -> Any:
        """The run facet of the failed try (the same try facts as its START)."""
        return self._lineage(task_instance, None)

    def _try_log(self, ti: Any) -> TryLog:
        """The decision log as this try reads it, read once per try: by START's lineage (the listener runs in
        this process before ``execute``) or by ``execute``, whichever asks first."""
        cached: TryLog | None = getattr(self, "_read", None)
        if cached is not None and (cached.task_id, cached.try_number) == (str(ti.task_id), int(ti.try_number or 1)):
            return cached
        self._read = read_try_log(ti)
        return self._read

    def _try_facts(self, ti: Any) -> Any:
        """The try's region, try number and restart (module rule of :mod:`~..observability.lineage`): the same
        for START, COMPLETE and FAIL, read once per try."""
        attempt = int(getattr(ti, "try_number", 0) or 0)
        cached = getattr(self, "_facts", None)
        if cached is not None and cached.attempt == attempt:
            return cached
        head = SubtaskId.parse(self.chain[0])
        decision = restart_of(ti, known=self._try_log(ti)) if ti is not None else None
        self._facts = TryFacts(self._run_spec(ti).topology.regions.region_of(head).id, attempt,
                               RestartEntry.of(decision, ti.task_id) if decision is not None else None)
        return self._facts

    def _run_spec(self, ti: Any) -> JobSpec:
        """The job as this try's run runs it, whose failover regions its decisions and Failover tab name: for a job
        rendered ``PER_RUN``, under the run's plan (fixed here when this is the run's first task: the same
        conditional create the task makes, :meth:`~..decisions.plans.Plans.fix`); any other job as rendered."""
        spec = self.runtime.spec
        if not spec.auto.per_run or ti is None:
            return spec
        from airflow_region_failover.decisions.plans import Plans  # deferred: the store, when lineage asks
        from airflow_region_failover.store.result_store import default_store  # deferred: as above

        return spec.for_run(Plans(default_store().objects).fix(str(ti.dag_id), str(ti.run_id)).plan)

    def _lineage(self, ti: Any, ledger: TaskLedger | None) -> Any:
        """The task's ``OperatorLineage``, or ``None`` when OpenLineage is not installed or lineage cannot be
        built (never raises into the task)."""
        try:
            from airflow_region_failover.observability import lineage  # deferred: imports OpenLineage when called

            if not lineage.available():
                return None
            dag_id = getattr(ti, "dag_id", None) or self.dag_id
            run_id = getattr(ti, "run_id", "")
            return lineage.task_lineage(lineage.configured_layout(), dag_id, run_id, self._try_facts(ti),
                                        ledger=ledger)
        except Exception:
            self.log.warning("region failover: no OpenLineage facets for %s", self.task_id, exc_info=True)
            return None

    def _wait_for_restart_time(self, context: Context, read: TryLog) -> None:
        wait = delay_left(read, self.runtime.spec.config)
        if wait <= 0:
            return
        self.log.info("region failover: %s waits %.1f s (restart backoff delay%s)", self.task_id, wait,
                      "; the decision log is unreadable" if read.state is LogState.UNREADABLE else "")
        if wait < SLEEP_BELOW_S or read.state is LogState.UNREADABLE:
            time.sleep(wait)
            return
        raise AirflowRescheduleException(reschedule_date=datetime.now(timezone.utc) + timedelta(seconds=wait))

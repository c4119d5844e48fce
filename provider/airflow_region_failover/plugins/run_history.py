"""The run history the planner reads for a DAG: its earlier runs' task summaries, manifests and failed tries
(:class:`~airflow_region_failover.planning.history.HistorySource` over the store and Airflow's metadata DB).

Rules — how one run becomes a :class:`~airflow_region_failover.planning.history.RunRecord`:

* **Runs**: the DAG's newest :data:`WINDOW` runs that ended (``success`` or ``failed``), oldest first; a run
  none of whose step tasks left a task summary (no measured try) is left out.
* **Persisting** a task's outputs (its ``write_seconds``, split over its outputs by bytes) is what its timeline
  (:mod:`airflow_region_failover.timeline`) measured of the store's writers: with the provider's writers, the
  executor seconds of ``encode``, ``hash`` and ``upload`` over the writers that ran at once (``writers``, at most
  :data:`EXECUTOR_CORES`), never more than the ``job`` spans; with Spark's own Parquet writer (``spark_writer``),
  whose job reads, computes and encodes inseparably, the driver's ``hash`` and ``upload`` wall seconds, or the
  output bytes at the default write throughput
  (:data:`~airflow_region_failover.planning.estimates.DEFAULT_WRITE_BYTES_PER_SECOND`, which includes encoding)
  where that is more — the *estimate of compute* is the job less that, never less than zero.
* **Reading back** a task's inputs (its ``read_seconds``, split over its inputs by bytes) is its ``read`` spans
  (the driver's checks, probe, resolve and restore of each input) plus the bytes it fetched at the default read
  throughput (:data:`~airflow_region_failover.planning.estimates.DEFAULT_READ_BYTES_PER_SECOND`): Spark fetches
  the objects inside the job, where the timeline cannot separate them from computing.
* **Compute** of a task is its clock (``started`` to ``ended``) less its persisting, reading back and
  checkpointing; a chain task's compute is split evenly over its members (one clock measured them together).
* **Checkpointing** (a checkpointed try, the summary's ``checkpoint`` entry): its timeline's ``checkpoint`` spans
  (:data:`~airflow_region_failover.checkpoint.runner.CHECKPOINT_PHASE`); one checkpoint's seconds — those spans
  over the checkpoints it completed — are every member's ``checkpoint_seconds`` (the mean over its subtasks). A
  try that resumed a checkpoint ran only the epochs after it: its compute is scaled by ``epochs / (epochs -
  skipped)`` to the whole step's work. A **sliced** try's epochs (``checkpoint.sliced``) each read the subtask's
  inputs again: its inputs' read seconds are one read of them, its reading over the epochs it ran; the rest is what
  slicing cost (the epochs' ``C``, :mod:`~airflow_region_failover.planning.epochs`), in neither. A step enters a run's
  record only when every one of its subtasks was measured by a try that computed it (a try that kept its committed
  outputs measured no compute; a fused task's try that kept some regions measured the members it ran — its
  compute split over those; one from before ``resumed`` was recorded measured none).
* **Failed tries** of a fused task measured the members up to their last commit
  (:mod:`~airflow_region_failover.decisions.failed_tries`): each such member is measured by the newest try that
  computed it — the successful one, else the failed try that committed what a later try kept — so a job whose
  every run fails late is measured too.
* **Bytes** of a result: its partitions' committed bytes (the summary's ``outputs[*].bytes``, or the committed
  manifest's total in the store where the summary has none), summed over its producer subtasks; kept outputs
  count their bytes but no write seconds. A result with a partition of unknown bytes (its manifest released or
  swept since) is left out of the run's record: not measured, rather than measured small.
* Reading back counts only what the summary lists as BLOCKING inputs; a try reading only PIPELINED scratch
  partitions keeps its ``read`` spans in its compute (fusing does not remove them).
* **Failures**: a step task's failed tries (``task_instance`` and ``task_instance_history`` rows in state
  ``failed``), each counted for the member whose function raised where the run's decision log names it (a fused
  task's members may sit in different regions of the run's plan, and a failure restarts the region it hits), else
  for the task's first step (a chain's head, in the same region as its members); each failed try is also
  recorded for that step (``failed_tries``): its duration, and how far into the task's attempt it failed — its
  duration over that of the task's try that succeeded in the run, at most 1, Airflow's clock for both — unless
  no try of the task succeeded in the run (an attempt's length is then unknown) or the task ran in epochs (a try
  of it reported its epochs: a failure there loses what followed the last checkpoint, not its try's time);
  **task seconds**: the durations of all its step tasks' tries.
* **Plan**: the plan the run ran, as the store keeps it (:meth:`~airflow_region_failover.decisions.plans.Plans
  .of_run`: a job rendered ``PER_RUN`` fixes one per run); a run without one (rendered with a fixed plan, or
  from before plans were stored, or whose record cannot be read) ran the job's rendered plan (``rendered``).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

from airflow_region_failover.checkpoint.runner import CHECKPOINT_PHASE
from airflow_region_failover.exceptions import RegionFailoverError
from airflow_region_failover.graph.auto import ExchangePlan
from airflow_region_failover.graph.ids import PartitionId, SubtaskId
from airflow_region_failover.naming import OPERATOR_NAME, subtasks_of
from airflow_region_failover.planning.estimates import DEFAULT_READ_BYTES_PER_SECOND, DEFAULT_WRITE_BYTES_PER_SECOND
from airflow_region_failover.planning.history import FailedTry, History, ResultBytes, RunRecord, StepTimes
from airflow_region_failover.planning.policy import PlannerPolicy
from airflow_region_failover.spark.ledger import TaskSummary

if TYPE_CHECKING:
    from airflow_region_failover.store.result_store import ResultStore

log = logging.getLogger(__name__)
WINDOW = PlannerPolicy().window
"""How many of a DAG's newest ended runs are read by default: the planner's default window
(:class:`~.planning.policy.PlannerPolicy`, 20; a job's own policy may say otherwise)."""
EXECUTOR_CORES = 2
"""At most this many store writers run at once in one task (a 2-core executor, ``local[2]``: the figures'
machine); their summed executor seconds over this are wall seconds."""
ENDED = ("success", "failed")
Sizes = Callable[[PartitionId], int | None]


@dataclass(frozen=True)
class TaskCost:
    """What one try of a task measured: ``members`` the members it ran, ``compute`` seconds per member,
    ``writes`` (result -> (bytes, seconds)) and ``reads`` (result -> seconds); ``computed``: it computed (did not
    keep its outputs); ``unsized``: results of which a partition's bytes are unknown (no bytes in the summary, no
    manifest left); ``checkpoint``: the seconds of one of its checkpoints (``None``: it completed none, or was not
    measured); ``written``: the write seconds of each partition it wrote (not kept)."""

    members: tuple[SubtaskId, ...]
    compute: float
    writes: Mapping[str, tuple[int, float]]
    reads: Mapping[str, float]
    computed: bool
    unsized: frozenset[str] = frozenset()
    checkpoint: float | None = None
    written: Mapping[PartitionId, float] = field(default_factory=dict)


@dataclass(frozen=True)
class TaskTries:
    """One step task of a run: its failed tries, the seconds of all its tries, its summary (``None``: no
    measured try) and ``partials``, what its failed tries measured (oldest first); ``durations``: each failed
    try's seconds, oldest first, and ``succeeded``: the seconds of the try that succeeded (``None``: none did)."""

    task_id: str
    failed: int
    seconds: float
    summary: TaskSummary | None
    partials: tuple[TaskSummary, ...] = ()
    durations: tuple[float, ...] = ()
    succeeded: float | None = None

    def failed_tries(self) -> tuple[FailedTry, ...]:
        """Each failed try, oldest first, with how far into the task's attempt it failed (module rule)."""
        whole = self.succeeded or 0.0
        epochs = any(s.checkpoint is not None for s in (*self.partials, self.summary) if s is not None)
        return tuple(FailedTry(round(d, 3), None if epochs or whole <= 0 else round(min(1.0, d / whole), 4))
                     for d in self.durations)


def task_cost(summary: TaskSummary, sizes: Sizes, cores: int = EXECUTOR_CORES) -> TaskCost:
    """Persisting, reading back and compute of one try (module rules)."""
    line = summary.timeline
    outputs = {PartitionId.parse(k): o for k, o in summary.ledger.outputs.items()}
    known = {p: o.bytes if o.bytes is not None else sizes(p) for p, o in outputs.items()}
    sized = {p: size or 0 for p, size in known.items()}
    kept = bool(summary.kept) or summary.ledger.kept
    written = sum(b for p, b in sized.items() if not outputs[p].kept)
    persist = 0.0 if line is None or kept else _persisting(line.work, line.total("job"), written, cores)
    inputs = {PartitionId.parse(k): i for k, i in summary.ledger.inputs.items()}
    fetched = summary.read.bytes
    read = 0.0 if line is None else line.total("read") + fetched / DEFAULT_READ_BYTES_PER_SECOND
    clock = 0.0 if line is None else line.ended - line.started
    writes: dict[str, tuple[int, float]] = {}
    shares: dict[PartitionId, float] = {}
    for partition, size in sized.items():
        share = persist * size / written if written and not outputs[partition].kept else 0.0
        if not outputs[partition].kept:
            shares[partition] = share
        before = writes.get(partition.result, (0, 0.0))
        writes[partition.result] = (before[0] + size, before[1] + share)
    epochs = summary.checkpoint
    passes = epochs.epochs - epochs.skipped if epochs is not None and epochs.sliced else 1
    total_in = sum(i.bytes for i in inputs.values())
    reads: dict[str, float] = {}
    for partition, entry in inputs.items():  # one read of them: a sliced try's epochs read them again (module rule)
        share = read / max(1, passes) * (entry.bytes / total_in if total_in else 1 / len(inputs))
        reads[partition.result] = reads.get(partition.result, 0.0) + share
    checkpointing = 0.0 if line is None or epochs is None else line.total(CHECKPOINT_PHASE)
    ran = tuple(m for m in summary.members if m not in summary.resumed)
    compute = max(0.0, clock - persist - (read if inputs else 0.0) - checkpointing) / max(1, len(ran))
    if epochs is not None and 0 < epochs.skipped < epochs.epochs:
        compute *= epochs.epochs / (epochs.epochs - epochs.skipped)
    one = checkpointing / epochs.checkpoints if epochs is not None and epochs.checkpoints and line is not None else None
    legacy = any(o.kept for o in outputs.values()) and not summary.resumed  # kept some, but not saying which
    return TaskCost(ran, compute, writes, reads, line is not None and not kept and not legacy and bool(ran),
                    frozenset(p.result for p, size in known.items() if size is None), one, shares)


def _persisting(work: Mapping[str, float], job: float, written: int, cores: int) -> float:
    """A try's persisting seconds from its writers' work (module rule)."""
    if work.get("spark_writer"):
        measured = work.get("hash", 0.0) + work.get("upload", 0.0)
        return min(job, max(measured, written / DEFAULT_WRITE_BYTES_PER_SECOND)) if job else measured
    at_once = max(1.0, min(float(cores), work.get("writers", 1.0)))
    seconds = sum(work.get(k, 0.0) for k in ("encode", "hash", "upload")) / at_once
    return min(job, seconds) if job else seconds


def run_record(run_id: str, tasks: Sequence[TaskTries], sizes: Sizes, parallelism: Mapping[str, int],
               raised: Mapping[str, Sequence[str]] | None = None) -> RunRecord:
    """One run's record from its step tasks (module rules); ``parallelism``: step id -> subtasks."""
    per_task = [[task_cost(s, sizes) for s in (*t.partials, t.summary) if s is not None] for t in tasks]
    costs = [cost for tries in per_task for cost in tries]  # oldest try first: the newest that computed wins
    seconds: dict[str, dict[int, float]] = {}
    checkpoints: dict[str, list[float]] = {}
    for cost in costs:
        for member in cost.members:
            if cost.computed:
                seconds.setdefault(member.step, {})[member.index] = cost.compute
                if cost.checkpoint is not None:
                    checkpoints.setdefault(member.step, []).append(cost.checkpoint)
    steps = tuple(StepTimes(step, tuple(by_index[i] for i in range(parallelism[step])),
                            _mean(checkpoints.get(step, [])))
                  for step, by_index in seconds.items()
                  if step in parallelism and all(i in by_index for i in range(parallelism[step])))
    sizes_of: dict[str, int] = {}
    writes: dict[str, float] = {}
    reads: dict[str, float] = {}
    newest = [tries[-1] for tries in per_task if tries]  # bytes and reads: the try that ended the task
    spent: dict[PartitionId, float] = {}  # write seconds: the newest try that wrote each partition
    for cost in costs:
        spent.update(cost.written)
    for cost in newest:
        for result, (size, _) in cost.writes.items():
            sizes_of[result] = sizes_of.get(result, 0) + size
        for result, read in cost.reads.items():
            reads[result] = reads.get(result, 0.0) + read
    for partition, write in spent.items():
        writes[partition.result] = writes.get(partition.result, 0.0) + write
    unsized = {r for cost in newest for r in cost.unsized}
    results = tuple(ResultBytes(r, size, writes.get(r) or None, reads.get(r) or None) for r, size in sizes_of.items()
                    if r not in unsized)
    failures: dict[str, int] = {}
    failed: dict[str, list[FailedTry]] = {}
    for task in tasks:
        members = subtasks_of(task.task_id)
        if task.failed and members:
            own = {m.step for m in members}
            named = [SubtaskId.parse(s).step for s in (raised or {}).get(task.task_id, ())]
            counted = [step for step in named if step in own][:task.failed]
            charged = (*counted, *[members[0].step] * (task.failed - len(counted)))
            for step in charged:
                failures[step] = failures.get(step, 0) + 1
            for step, tried in zip(charged, task.failed_tries(), strict=False):
                failed.setdefault(step, []).append(tried)
    return RunRecord(run_id, steps, results, failures, sum(t.seconds for t in tasks),
                     failed_tries={k: tuple(v) for k, v in failed.items()})


def _mean(values: Sequence[float]) -> float | None:
    return sum(values) / len(values) if values else None


@dataclass(frozen=True)
class AirflowHistory:
    """The runs of a DAG as its task summaries, the store's manifests and Airflow's tries record them (module
    rules); ``parallelism``: step id -> subtasks, of the job the history is read for; ``rendered``: the plan of a
    run that stored none."""

    store: ResultStore
    parallelism: Mapping[str, int]
    window: int = WINDOW
    rendered: ExchangePlan = field(default_factory=ExchangePlan)

    def history(self, dag_id: str) -> History:
        """The newest ``window`` ended runs of ``dag_id``, oldest first (scheduler / CLI: reads the metadata DB)."""
        records = []
        for run_id in ended_runs(dag_id, self.window):
            tasks = self.with_failed_tries(dag_id, run_id, step_tries(dag_id, run_id))
            if not any(t.summary is not None or t.partials for t in tasks):
                continue

            def sizes(partition: PartitionId, run: str = run_id) -> int | None:
                try:
                    return self.store.manifest(dag_id, run, partition).total_bytes
                except RegionFailoverError:  # released or swept since: its bytes are unknown
                    return None

            records.append(replace(run_record(run_id, tasks, sizes, self.parallelism, self.raised(dag_id, run_id)),
                                   plan=self.plan_of(dag_id, run_id)))
        return History(tuple(records))

    def with_failed_tries(self, dag_id: str, run_id: str, tasks: Sequence[TaskTries]) -> list[TaskTries]:
        """``tasks`` with what their failed tries measured (module rule), oldest try first."""
        from airflow_region_failover.decisions.failed_tries import FailedTries  # deferred: the store's records

        try:
            kept = FailedTries(self.store.objects).of_run(dag_id, run_id)
        except RegionFailoverError:
            log.warning("region failover: the failed tries of %s/%s cannot be listed", dag_id, run_id, exc_info=True)
            return list(tasks)
        found = []
        for task in tasks:
            partials = []
            for body in kept.get(task.task_id, ()):
                try:
                    partials.append(TaskSummary.from_json(body))
                except (KeyError, TypeError, ValueError):
                    log.warning("region failover: a failed try of %s/%s/%s kept an unreadable summary; skipped",
                                dag_id, run_id, task.task_id, exc_info=True)
            found.append(replace(task, partials=tuple(sorted(partials, key=lambda p: p.attempt))))
        return found

    def raised(self, dag_id: str, run_id: str) -> dict[str, list[str]]:
        """Task id -> the members whose functions raised, one per failed try the run's decision log names (module
        rule); none when the log cannot be read."""
        from airflow_region_failover.decisions.storage import RunLogs  # deferred: the store's decision log

        try:
            decisions = RunLogs(self.store.objects).read(dag_id, run_id).decisions
        except (RegionFailoverError, ValueError):
            log.warning("region failover: the decision log of %s/%s cannot be read; its failures count for their "
                        "tasks' first steps", dag_id, run_id, exc_info=True)
            return {}
        tries = {(f.task_id, f.try_number): f.subtask for d in decisions for f in d.failures if f.subtask}
        found: dict[str, list[str]] = {}
        for (task_id, _), subtask in sorted(tries.items()):
            found.setdefault(task_id, []).append(subtask)
        return found

    def plan_of(self, dag_id: str, run_id: str) -> ExchangePlan:
        """The plan run ``run_id`` ran (module rule)."""
        from airflow_region_failover.decisions.plans import Plans  # deferred: the store's plans, on request

        try:
            stored = Plans(self.store.objects).of_run(dag_id, run_id)
        except RegionFailoverError:
            log.warning("region failover: the plan of %s/%s cannot be read; taken as the rendered one", dag_id,
                        run_id, exc_info=True)
            return self.rendered
        return self.rendered if stored is None else stored.plan


def ended_runs(dag_id: str, count: int) -> list[str]:
    """The newest ``count`` runs of ``dag_id`` that ended, oldest first."""
    from airflow.models.dagrun import DagRun  # deferred: the plugin module loads in every Airflow component
    from airflow.utils.session import create_session  # deferred: as above

    with create_session() as session:
        rows = (session.query(DagRun.run_id).filter(DagRun.dag_id == dag_id, DagRun.state.in_(ENDED))
                .order_by(DagRun.end_date.desc()).limit(count).all())
    return [str(r[0]) for r in reversed(rows)]


def step_tries(dag_id: str, run_id: str) -> list[TaskTries]:
    """The run's step tasks: failed tries and seconds over ``task_instance`` and ``task_instance_history``, and
    the current try's task summary (its XCom ``return_value``)."""
    from airflow.models.taskinstance import TaskInstance  # deferred: as above
    from airflow.models.taskinstancehistory import TaskInstanceHistory  # deferred: as above
    from airflow.models.xcom import XComModel  # deferred: as above
    from airflow.utils.session import create_session  # deferred: as above

    tries: dict[str, list[tuple[int, str, float]]] = {}
    with create_session() as session:
        for model in (TaskInstance, TaskInstanceHistory):
            rows = (session.query(model.task_id, model.try_number, model.state, model.duration)
                    .filter(model.dag_id == dag_id, model.run_id == run_id, model.operator == OPERATOR_NAME).all())
            for task_id, number, state, duration in rows:
                tries.setdefault(str(task_id), []).append((int(number or 0), str(getattr(state, "value", state)),
                                                           float(duration or 0)))
        rows = (session.query(XComModel)
                .filter(XComModel.dag_id == dag_id, XComModel.run_id == run_id, XComModel.key == "return_value",
                        XComModel.task_id.in_(list(tries))).all())
        summaries = {str(row.task_id): XComModel.deserialize_value(row) for row in rows}
    return [tries_of(task_id, found, _summary(summaries.get(task_id))) for task_id, found in sorted(tries.items())]


def tries_of(task_id: str, found: Sequence[tuple[int, str, float]], summary: TaskSummary | None) -> TaskTries:
    """A step task's tries (``(try_number, state, duration)``) as a :class:`TaskTries`."""
    ordered = sorted(found)
    failed = tuple(d for _, s, d in ordered if s == "failed")
    succeeded = next((d for _, s, d in reversed(ordered) if s == "success"), None)
    return TaskTries(task_id, len(failed), sum(d for _, _, d in ordered), summary, (), failed, succeeded)


def _summary(value: object) -> TaskSummary | None:
    """A task summary, or ``None`` for a try that returned none (or not one of ours)."""
    if not isinstance(value, dict) or "subtask" not in value:
        return None
    return TaskSummary.from_json(value)


def parallelism_of(steps: Iterable[Any]) -> dict[str, int]:
    """Step id -> parallelism of a graph's steps."""
    return {s.id: s.parallelism for s in steps}

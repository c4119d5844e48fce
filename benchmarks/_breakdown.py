"""Where a run's wall time goes: a DAG run's critical path, cut into the categories of ``bench_breakdown.py``.

Rules:

* **Critical path.** From the task that ended last, step back to the upstream task that ended last, until a task
  with no upstream. The path's segments — each task's wait for its upstream (or for the run's start), its time
  queued, its run — add up exactly to the run's start to the last task's end; the run's end follows.
* **A task's run** is cut by its timeline (the task summary's ``timeline``, :mod:`airflow_region_failover.timeline`):
  Airflow's start of the task to the parse of its DAG file is *process start, imports, DAG parse*, from there to
  the clock's start *Airflow's task start*; each ``job`` span (the Spark job of a write) is cut into *Parquet
  encoding*, *hashing* and *upload* — the writers' executor seconds of each kind divided by how many ran at once
  (``writers``, at most the executor cores) — and the rest of the job, *reading inputs and computing* (the stages
  before the writers and the writers' wait for their rows). A write through Spark's own Parquet writer
  (``spark_writer`` in the work, ``store/dataplane/local_write.py``) is one Spark job that reads, computes and encodes,
  inseparably: the job less the driver's hashing and upload is *Spark's writer job*; ``begin``, ``commit``,
  ``discard``, ``publish``, ``ledger`` are *commit and bookkeeping*; everything else of the clock (store checks,
  XCom, manifests, the Spark session, the plan, a write's schema) is *task set-up*; the clock's end to Airflow's
  end of the task is *task end*.
  A task without a timeline is one *task (unmeasured)*.
* **(a)**, the one application, is cut the same way: its process start to the clock's start, ``session`` and
  ``define`` (set-up), its one write's job, commit.
* **Step task overhead** (the issue's target): Airflow's start of the task to the first Spark job, plus the end of
  the last write to Airflow's end of the task.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from airflow_region_failover.timeline import Timeline

SCHEDULING, QUEUED, STARTUP, SETUP = ("Airflow scheduling (upstream done -> queued)",
                                      "queued -> started (a free slot, the task process)",
                                      "process start, imports, DAG parse", "task set-up (store, XCom, session, plan)")
AIRFLOW_START = "Airflow's task start (DAG parsed -> execute)"
READ_COMPUTE, ENCODE, HASH, UPLOAD = ("Spark job: reading inputs and computing", "Spark job: Parquet encoding",
                                      "Spark job: hashing", "Spark job: upload")
SPARK_WRITER = "Spark job: reading, computing and encoding (Spark's own writer)"
COMMIT, END, UNMEASURED, RUN_END = ("commit and bookkeeping", "task end (return value, exit, Airflow's finish)",
                                    "task (unmeasured)", "run end (last task -> run success)")
CATEGORIES = (SCHEDULING, QUEUED, STARTUP, AIRFLOW_START, SETUP, READ_COMPUTE, ENCODE, SPARK_WRITER, HASH, UPLOAD,
              COMMIT, END, UNMEASURED, RUN_END)
WORK_CATEGORY = {"encode": ENCODE, "hash": HASH, "upload": UPLOAD}
CORES = 2
"""Executor cores of the benchmarks' Spark (``local[2]``): at most this many writers run at once."""
BOOKKEEPING = ("begin", "commit", "discard", "publish", "ledger")


@dataclass(frozen=True)
class TaskTry:
    """One task instance's last try: Airflow's ``queued``/``started``/``ended`` (epoch seconds), its upstream task
    ids, and its timeline (``None``: not a step task, or not measured)."""

    task_id: str
    queued: float | None
    started: float
    ended: float
    upstream: tuple[str, ...] = ()
    timeline: Timeline | None = None


def critical_path(tasks: Mapping[str, TaskTry]) -> list[TaskTry]:
    """The run's critical path, first task first (module rule)."""
    path: list[TaskTry] = []
    current: TaskTry | None = max(tasks.values(), key=lambda t: t.ended, default=None)
    while current is not None:
        path.append(current)
        ups = [tasks[u] for u in current.upstream if u in tasks]
        current = max(ups, key=lambda t: t.ended) if ups else None
    return path[::-1]


def _add(out: dict[str, float], category: str, seconds: float) -> None:
    out[category] = out.get(category, 0.0) + seconds


def job_parts(timeline: Timeline, cores: int) -> dict[str, float]:
    """The Spark jobs' wall time cut as the module rule says (the writers' parts never more than the jobs)."""
    job = timeline.total("job")
    if timeline.work.get("spark_writer"):  # the driver's hashing and upload are wall seconds already
        driver = {HASH: timeline.work.get("hash", 0.0), UPLOAD: timeline.work.get("upload", 0.0)}
        scale = min(1.0, job / sum(driver.values())) if sum(driver.values()) else 1.0
        driver = {k: v * scale for k, v in driver.items()}
        return {SPARK_WRITER: job - sum(driver.values()), **driver}
    at_once = max(1.0, min(float(cores), timeline.work.get("writers", 1.0)))
    parts = {WORK_CATEGORY[k]: timeline.work.get(k, 0.0) / at_once for k in ("encode", "hash", "upload")}
    scale = min(1.0, job / sum(parts.values())) if sum(parts.values()) else 1.0
    parts = {k: v * scale for k, v in parts.items()}
    return {READ_COMPUTE: job - sum(parts.values()), **parts}


def measured(timeline: Timeline, cores: int = CORES) -> dict[str, float]:
    """The clock's span cut into categories (module rule): set-up, the jobs' parts, commit and bookkeeping."""
    out: dict[str, float] = {}
    for name in BOOKKEEPING:
        _add(out, COMMIT, timeline.total(name))
    for category, seconds in job_parts(timeline, cores).items():
        _add(out, category, seconds)
    _add(out, SETUP, max(0.0, (timeline.ended - timeline.started) - sum(out.values())))  # airflow_start lies before
    return out


def task_segments(task: TaskTry, ready: float) -> dict[str, float]:
    """One task on the path: its wait since ``ready`` (its upstream's end), queue, and run by category."""
    out: dict[str, float] = {}
    queued = task.queued if task.queued is not None else task.started
    _add(out, SCHEDULING, max(0.0, queued - ready))
    _add(out, QUEUED, max(0.0, task.started - max(queued, ready)))
    if task.timeline is None:
        _add(out, UNMEASURED, task.ended - task.started)
        return out
    line = task.timeline
    parse = line.first("airflow_start")
    since_parse = -parse.start if parse is not None else 0.0
    _add(out, STARTUP, line.started - task.started - since_parse)
    _add(out, AIRFLOW_START, since_parse)
    for category, seconds in measured(line).items():
        _add(out, category, seconds)
    _add(out, END, task.ended - line.ended)
    return out


def run_breakdown(tasks: Mapping[str, TaskTry], run_started: float, run_ended: float) -> dict[str, float]:
    """The run's wall time (``run_started`` to ``run_ended``) by category along its critical path."""
    out: dict[str, float] = {}
    ready = run_started
    for task in critical_path(tasks):
        for category, seconds in task_segments(task, ready).items():
            _add(out, category, seconds)
        ready = task.ended
    _add(out, RUN_END, run_ended - ready)
    return out


def app_breakdown(timeline: Timeline, ended: float) -> dict[str, float]:
    """(a)'s wall time (its process's start to ``ended``) by category (module rule)."""
    out = {STARTUP: timeline.started - timeline.process_started}
    for category, seconds in measured(timeline).items():
        _add(out, category, seconds)
    _add(out, END, ended - timeline.ended)
    return out


def overhead(task: TaskTry) -> float | None:
    """The step task overhead (module rule), or ``None`` for a task that ran no Spark job."""
    line = task.timeline
    first, last = (line.first("job"), line.last("write")) if line is not None else (None, None)
    if line is None or first is None or last is None:
        return None
    return (line.started + first.start - task.started) + (task.ended - (line.started + last.end))


def compare(ours: Mapping[str, float], app: Mapping[str, float]) -> list[tuple[str, float, float, float]]:
    """``(category, ours, (a), ours - (a))`` for every category either has, in :data:`CATEGORIES` order."""
    return [(c, ours.get(c, 0.0), app.get(c, 0.0), ours.get(c, 0.0) - app.get(c, 0.0))
            for c in CATEGORIES if c in ours or c in app]


def markdown(rows: Sequence[tuple[str, float, float, float]], ours_wall: float, app_wall: float) -> str:
    """The comparison as a Markdown table, with the share of the difference each category explains."""
    gap = ours_wall - app_wall
    lines = ["| where the time goes (critical path) | ours s | (a) s | ours - (a) s | share of the gap |",
             "|---|---:|---:|---:|---:|"]
    for category, mine, theirs, delta in rows:
        share = f"{100 * delta / gap:.1f} %" if gap else "-"
        lines.append(f"| {category} | {mine:.1f} | {theirs:.1f} | {delta:+.1f} | {share} |")
    explained = sum(d for _, _, _, d in rows)
    lines.append(f"| **wall time** | **{ours_wall:.1f}** | **{app_wall:.1f}** | **{gap:+.1f}** | "
                 f"{100 * explained / gap if gap else 100:.1f} % explained |")
    return "\n".join(lines)

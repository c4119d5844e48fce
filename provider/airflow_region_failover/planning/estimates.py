"""The figures a plan is costed with, from a run history: per step its subtasks' compute seconds, per result its
bytes and the seconds persisting and reading it back take — each with the runs it came from.

Rules:

* a step's seconds are, per subtask index, the median over the runs that measured the step (skew between its
  subtasks is kept: the slowest subtask sets a region's wall time, all of them its exposure to failures); a
  subtask index no run measured (the parallelism grew) takes the median of the others;
* a result's bytes are the median over the runs that persisted it; its write (read) seconds the median of the
  measured ones, or, when no run measured them, its bytes divided by the *write (read) throughput*: total bytes
  over total seconds of every result of the history whose write (read) was measured, or — with none —
  :data:`DEFAULT_WRITE_BYTES_PER_SECOND` (:data:`DEFAULT_READ_BYTES_PER_SECOND`): 25 and 40 MB/s, the example ETL's
  figures on a 2-core machine (0.56 GB committed and read back cost ≈ 37 s);
* **a plan that ran is costed from its own runs**: for a given plan, a step's seconds come from the runs of the
  window that ran that plan (the same choice for every AUTO result) when any of them measured the step, else from
  every run that measured it. What fusing saves besides the persisted bytes' write and read — Parquet decoding
  inside a consumer's job, a keyed result's cut into subpartitions, a Spark job per commit — lands in the compute
  that runs measure; the model cannot derive it from a persisting run, but a run of the plan measured it;
* a step no run measured is an error naming it; a result no run persisted has no figures (it cannot be costed
  as persisted, so the planner keeps it BLOCKING until a run measures it, :mod:`.choice`).
"""

from __future__ import annotations

import statistics
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from airflow_region_failover.graph.auto import ExchangePlan, auto_results
from airflow_region_failover.graph.model import Exchange, JobGraph
from airflow_region_failover.planning.history import History, HistoryError

DEFAULT_WRITE_BYTES_PER_SECOND = 25e6
"""Persisting throughput with no measured write (module rule)."""
DEFAULT_READ_BYTES_PER_SECOND = 40e6
"""Read-back throughput with no measured read (module rule)."""


@dataclass(frozen=True)
class Figure:
    """A value and the runs it came from; ``estimated``: derived (from bytes and a throughput), not measured."""

    value: float
    runs: tuple[str, ...]
    estimated: bool = False

    def to_json(self) -> dict[str, Any]:
        """``{"value": ..., "runs": [...], "estimated": ...}``."""
        return {"value": round(self.value, 3), "runs": list(self.runs), "estimated": self.estimated}


@dataclass(frozen=True)
class StepEstimate:
    """The compute seconds of each subtask of ``step`` (module rule), from ``runs``."""

    step: str
    subtask_seconds: tuple[float, ...]
    runs: tuple[str, ...]

    def seconds(self, index: int) -> float:
        """Subtask ``index``'s seconds."""
        return self.subtask_seconds[index]

    def to_json(self) -> dict[str, Any]:
        """The JSON form."""
        return {"step": self.step, "subtask_seconds": [round(s, 3) for s in self.subtask_seconds],
                "runs": list(self.runs)}


@dataclass(frozen=True)
class ResultEstimate:
    """The persisted ``bytes`` of ``result`` and the seconds writing and reading it take, summed over subtasks."""

    result: str
    bytes: Figure
    write_seconds: Figure
    read_seconds: Figure

    def to_json(self) -> dict[str, Any]:
        """The JSON form."""
        return {"result": self.result, "bytes": self.bytes.to_json(), "write_seconds": self.write_seconds.to_json(),
                "read_seconds": self.read_seconds.to_json()}


@dataclass(frozen=True)
class Estimates:
    """Every step's and every measured result's figures, and the throughputs used where times were unknown."""

    steps: Mapping[str, StepEstimate]
    results: Mapping[str, ResultEstimate]
    write_throughput: Figure
    read_throughput: Figure

    def to_json(self) -> dict[str, Any]:
        """The JSON form."""
        return {"steps": [s.to_json() for s in self.steps.values()],
                "results": [r.to_json() for r in self.results.values()],
                "write_bytes_per_second": self.write_throughput.to_json(),
                "read_bytes_per_second": self.read_throughput.to_json()}


def estimate(graph: JobGraph, history: History, plan: ExchangePlan | None = None) -> Estimates:
    """The figures of ``graph``'s steps and results from ``history`` (module rules); ``plan``: the plan they cost
    (its own runs' compute first)."""
    write = _throughput(history, "write_seconds", DEFAULT_WRITE_BYTES_PER_SECOND)
    read = _throughput(history, "read_seconds", DEFAULT_READ_BYTES_PER_SECOND)
    auto = auto_results(graph)
    own = History(tuple(r for r in history.runs if plan is not None and all(
        r.plan.choice(a) is plan.choice(a) for a in auto))) if auto else History(())
    steps = {s.id: _step(s.id, s.parallelism, own) if any(r.step(s.id) for r in own.runs)
             else _step(s.id, s.parallelism, history) for s in graph.steps}
    return Estimates(steps, _results(graph, history, write, read), write, read)


def result_estimates(graph: JobGraph, history: History) -> dict[str, ResultEstimate]:
    """The figures of every result of ``graph`` some run of ``history`` persisted (module rule), without the
    steps'."""
    return _results(graph, history, _throughput(history, "write_seconds", DEFAULT_WRITE_BYTES_PER_SECOND),
                    _throughput(history, "read_seconds", DEFAULT_READ_BYTES_PER_SECOND))


def read_share(graph: JobGraph, results: Mapping[str, ResultEstimate], step: str) -> float:
    """One subtask of ``step``'s seconds reading back its BLOCKING inputs: each input's read seconds over the step's
    parallelism and the result's consumers (a result without figures: none)."""
    parallelism, total = graph.step(step).parallelism, 0.0
    for edge in graph.inputs(step):
        found = results.get(edge.result)
        if edge.exchange is Exchange.BLOCKING and found is not None:
            total += found.read_seconds.value / parallelism / len(graph.result(edge.result).consumers)
    return total


def _results(graph: JobGraph, history: History, write: Figure, read: Figure) -> dict[str, ResultEstimate]:
    results: dict[str, ResultEstimate] = {}
    for result in graph.results:
        found = _result(result.id, history, write, read)
        if found is not None:
            results[result.id] = found
    return results


def _step(step_id: str, parallelism: int, history: History) -> StepEstimate:
    measured = [(r.run_id, t) for r in history.runs if (t := r.step(step_id)) is not None]
    if not measured:
        raise HistoryError(f"step {step_id!r}: no run of the history measured it; run the DAG (with every AUTO "
                           "edge BLOCKING, the default) before planning it")
    per_index: list[float] = []
    for index in range(parallelism):
        values = [t.subtask_seconds[index] for _, t in measured if index < len(t.subtask_seconds)]
        per_index.append(statistics.median(values) if values else -1.0)
    known = [v for v in per_index if v >= 0] or [statistics.median(s for _, t in measured for s in t.subtask_seconds)]
    fill = statistics.median(known)
    return StepEstimate(step_id, tuple(v if v >= 0 else fill for v in per_index), tuple(r for r, _ in measured))


def _result(result_id: str, history: History, write: Figure, read: Figure) -> ResultEstimate | None:
    measured = [(r.run_id, b) for r in history.runs if (b := r.result(result_id)) is not None]
    if not measured:
        return None
    runs = tuple(r for r, _ in measured)
    size = Figure(float(statistics.median(b.bytes for _, b in measured)), runs)

    def seconds(attribute: str, throughput: Figure) -> Figure:
        known = [(r, getattr(b, attribute)) for r, b in measured if getattr(b, attribute) is not None]
        if known:
            return Figure(statistics.median(v for _, v in known), tuple(r for r, _ in known))
        return Figure(size.value / throughput.value, runs + throughput.runs, estimated=True)

    return ResultEstimate(result_id, size, seconds("write_seconds", write), seconds("read_seconds", read))


def _throughput(history: History, attribute: str, default: float) -> Figure:
    total_bytes, total_seconds, runs = 0, 0.0, []
    for run in history.runs:
        for result in run.results:
            seconds = getattr(result, attribute)
            if seconds:
                total_bytes += result.bytes
                total_seconds += seconds
                runs.append(run.run_id)
    if total_seconds <= 0 or total_bytes <= 0:
        return Figure(default, (), estimated=True)
    return Figure(total_bytes / total_seconds, tuple(dict.fromkeys(runs)))

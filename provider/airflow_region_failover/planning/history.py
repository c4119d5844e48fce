"""What earlier runs measured, as the planner reads it: one :class:`RunRecord` per run, oldest first.

Rules:

* a run records, per step, the compute seconds of each subtask's successful try (:class:`StepTimes`; index i is
  subtask i) and, for a checkpointed step, the mean seconds of one checkpoint; per persisted result its
  committed bytes and the seconds its producers spent writing it and its consumers reading it back, summed over
  subtasks (:class:`ResultBytes`; either time may be unknown, then it is estimated from the bytes and a measured
  throughput, :mod:`.estimates`); the failed task tries of the run per step and the task seconds of all its tries
  (the exposure a failure rate divides by), and per step each of its failed tries (:class:`FailedTry`: its
  seconds, and how far into its task's attempt it failed — where failures come in a try decides what each one
  loses, :mod:`.model`); and the exchange plan it ran;
* the records are JSON (``{"runs": [<RunRecord.to_json()>, ...]}``, :meth:`History.to_json`): bad input is a
  :class:`HistoryError` naming the run and the key;
* where the records come from is a :class:`HistorySource`: earlier runs' task summaries and manifests in the
  store with the failures in Airflow's DB, or a file (``region-failover advise --history FILE``).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

from airflow_region_failover.graph.auto import ExchangePlan
from airflow_region_failover.graph.errors import GraphError, RegionFailoverError


class HistoryError(RegionFailoverError):
    """A run history is malformed: the message names the run, the key and what it must be."""


@dataclass(frozen=True)
class StepTimes:
    """One run's compute seconds of each subtask of ``step`` (the try that succeeded), by subtask index;
    ``checkpoint_seconds``: the mean seconds one of its checkpoints took (a checkpointed step; ``None``: none
    measured), not in the compute seconds."""

    step: str
    subtask_seconds: tuple[float, ...]
    checkpoint_seconds: float | None = None

    def to_json(self) -> dict[str, Any]:
        """``{"step": ..., "subtask_seconds": [...]}``, with ``"checkpoint_seconds"`` when measured."""
        body: dict[str, Any] = {"step": self.step, "subtask_seconds": list(self.subtask_seconds)}
        if self.checkpoint_seconds is not None:
            body["checkpoint_seconds"] = self.checkpoint_seconds
        return body


@dataclass(frozen=True)
class ResultBytes:
    """One run's committed ``bytes`` of ``result``, with the write seconds (summed over its producer subtasks)
    and read-back seconds (summed over its consumer subtasks) when measured."""

    result: str
    bytes: int
    write_seconds: float | None = None
    read_seconds: float | None = None

    def to_json(self) -> dict[str, Any]:
        """The JSON form; unknown times are left out."""
        body: dict[str, Any] = {"result": self.result, "bytes": self.bytes}
        if self.write_seconds is not None:
            body["write_seconds"] = self.write_seconds
        if self.read_seconds is not None:
            body["read_seconds"] = self.read_seconds
        return body


@dataclass(frozen=True)
class FailedTry:
    """One failed task try counted for a step: the ``seconds`` it ran and ``fraction``, how far into its task's
    attempt it failed (its seconds over those of the task's try that succeeded, at most 1; ``None``: not known —
    no try of the task succeeded, or it ran in epochs, where a failure loses only what followed its last
    checkpoint)."""

    seconds: float
    fraction: float | None = None

    def __post_init__(self) -> None:
        if self.seconds < 0 or (self.fraction is not None and not 0 <= self.fraction <= 1):
            raise ValueError(f"FailedTry({self.seconds}, {self.fraction}): seconds >= 0, a fraction in [0, 1]")

    def to_json(self) -> dict[str, Any]:
        """``{"seconds": ...}``, with ``"fraction"`` when known."""
        body: dict[str, Any] = {"seconds": self.seconds}
        if self.fraction is not None:
            body["fraction"] = self.fraction
        return body


@dataclass(frozen=True)
class RunRecord:
    """What one run measured (module rules)."""

    run_id: str
    steps: tuple[StepTimes, ...]
    results: tuple[ResultBytes, ...]
    failures: Mapping[str, int]
    task_seconds: float
    plan: ExchangePlan = field(default_factory=ExchangePlan)
    failed_tries: Mapping[str, tuple[FailedTry, ...]] = field(default_factory=dict)

    def step(self, step_id: str) -> StepTimes | None:
        """This run's times of ``step_id``, or ``None``."""
        return next((s for s in self.steps if s.step == step_id), None)

    def result(self, result_id: str) -> ResultBytes | None:
        """This run's bytes of ``result_id``, or ``None`` (not persisted in this run)."""
        return next((r for r in self.results if r.result == result_id), None)

    def to_json(self) -> dict[str, Any]:
        """The JSON form; ``"failed_tries"`` only when a failed try was measured."""
        body = {"run_id": self.run_id, "steps": [s.to_json() for s in self.steps],
                "results": [r.to_json() for r in self.results], "failures": dict(sorted(self.failures.items())),
                "task_seconds": self.task_seconds, "plan": self.plan.to_json()}
        if self.failed_tries:
            body["failed_tries"] = {k: [t.to_json() for t in v] for k, v in sorted(self.failed_tries.items())}
        return body

    @classmethod
    def from_json(cls, raw: object, where: str) -> RunRecord:
        """Parse :meth:`to_json`'s form; ``where`` names the record in errors."""
        doc = _object(raw, where, {"run_id", "steps", "results", "failures", "task_seconds"},
                      {"plan", "failed_tries"})
        run_id = doc["run_id"]
        if not isinstance(run_id, str) or not run_id:
            raise HistoryError(f"{where}: 'run_id' {run_id!r} must be a non-empty string")
        where = f"run {run_id!r}"
        steps = tuple(_step(s, f"{where} steps[{i}]") for i, s in enumerate(_list(doc["steps"], where, "steps")))
        results = tuple(_result(r, f"{where} results[{i}]")
                        for i, r in enumerate(_list(doc["results"], where, "results")))
        failures = doc["failures"]
        if not isinstance(failures, dict) or any(isinstance(n, bool) or not isinstance(n, int) or n < 0
                                                 for n in failures.values()):
            raise HistoryError(f"{where}: 'failures' {failures!r} must map step ids to failed task tries (integers "
                               ">= 0), e.g. {{\"report\": 1}}")
        try:
            plan = ExchangePlan.from_json(doc.get("plan", {"choices": {}}))
        except GraphError as exc:
            raise HistoryError(f"{where}: {exc}") from None
        return cls(run_id, steps, results, {str(k): v for k, v in failures.items()},
                   _seconds(doc["task_seconds"], where, "task_seconds"), plan,
                   _failed_tries(doc.get("failed_tries", {}), where))


@dataclass(frozen=True)
class History:
    """Earlier runs of one DAG, oldest first."""

    runs: tuple[RunRecord, ...] = ()

    def last(self, count: int) -> History:
        """The newest ``count`` runs."""
        return History(self.runs[-count:] if count > 0 else ())

    def to_json(self) -> dict[str, Any]:
        """``{"runs": [...]}``."""
        return {"runs": [r.to_json() for r in self.runs]}

    @classmethod
    def from_json(cls, raw: object) -> History:
        """Parse :meth:`to_json`'s form; :class:`HistoryError` naming the offending run and key."""
        doc = _object(raw, "history", {"runs"}, set())
        runs = tuple(RunRecord.from_json(r, f"runs[{i}]") for i, r in enumerate(_list(doc["runs"], "history",
                                                                                        "runs")))
        seen: set[str] = set()
        for run in runs:
            if run.run_id in seen:
                raise HistoryError(f"history: run {run.run_id!r} appears twice; keep one record per run")
            seen.add(run.run_id)
        return cls(runs)


class HistorySource(Protocol):
    """Where a DAG's run history comes from (module rules)."""

    def history(self, dag_id: str) -> History:
        """The runs of ``dag_id``, oldest first."""
        ...


def _object(raw: object, where: str, required: set[str], optional: set[str]) -> Mapping[str, Any]:
    if not isinstance(raw, dict):
        raise HistoryError(f"{where}: expected a JSON object, got {type(raw).__name__}")
    missing = sorted(required - set(raw))
    if missing:
        raise HistoryError(f"{where}: missing {missing[0]!r}")
    unknown = sorted(set(raw) - required - optional)
    if unknown:
        raise HistoryError(f"{where}: unknown key {unknown[0]!r}; allowed keys: "
                           f"{', '.join(sorted(required | optional))}")
    return raw


def _list(raw: object, where: str, key: str) -> list[object]:
    if not isinstance(raw, list):
        raise HistoryError(f"{where}: {key!r} must be a JSON list")
    return raw


def _seconds(raw: object, where: str, key: str) -> float:
    if isinstance(raw, bool) or not isinstance(raw, (int, float)) or raw < 0:
        raise HistoryError(f"{where}: {key!r} {raw!r} must be a number of seconds >= 0")
    return float(raw)


def _failed_tries(raw: object, where: str) -> dict[str, tuple[FailedTry, ...]]:
    example = '{"join": [{"seconds": 61.5, "fraction": 0.4}]}'
    if not isinstance(raw, dict) or not all(isinstance(v, list) for v in raw.values()):
        raise HistoryError(f"{where}: 'failed_tries' {raw!r} must map step ids to lists of tries, e.g. {example}")
    found: dict[str, tuple[FailedTry, ...]] = {}
    for step, tries in raw.items():
        parsed = []
        for number, body in enumerate(tries):
            at = f"{where} failed_tries[{step!r}][{number}]"
            doc = _object(body, at, {"seconds"}, {"fraction"})
            fraction = doc.get("fraction")
            if fraction is not None and (isinstance(fraction, bool) or not isinstance(fraction, (int, float))
                                         or not 0 <= fraction <= 1):
                raise HistoryError(f"{at}: 'fraction' {fraction!r} must be a number in [0, 1], e.g. {example}")
            parsed.append(FailedTry(_seconds(doc["seconds"], at, "seconds"),
                                    None if fraction is None else float(fraction)))
        found[str(step)] = tuple(parsed)
    return found


def _step(raw: object, where: str) -> StepTimes:
    doc = _object(raw, where, {"step", "subtask_seconds"}, {"checkpoint_seconds"})
    seconds = _list(doc["subtask_seconds"], where, "subtask_seconds")
    if not isinstance(doc["step"], str) or not seconds:
        raise HistoryError(f"{where}: needs a step id and at least one subtask's seconds")
    checkpoint = doc.get("checkpoint_seconds")
    return StepTimes(doc["step"], tuple(_seconds(s, where, "subtask_seconds") for s in seconds),
                     None if checkpoint is None else _seconds(checkpoint, where, "checkpoint_seconds"))


def _result(raw: object, where: str) -> ResultBytes:
    doc = _object(raw, where, {"result", "bytes"}, {"write_seconds", "read_seconds"})
    size = doc["bytes"]
    if not isinstance(doc["result"], str) or isinstance(size, bool) or not isinstance(size, int) or size < 0:
        raise HistoryError(f"{where}: needs a result id and 'bytes' as an integer >= 0, got {size!r}")
    times = [None if doc.get(k) is None else _seconds(doc[k], where, k) for k in ("write_seconds", "read_seconds")]
    return ResultBytes(doc["result"], size, times[0], times[1])

"""Replay the model's predictions of a benchmark's runs on the histories they came from, with the model checked
out now: each prediction the run recorded (``predicted``, the plugin's advice just before the run, with its
``history`` window — ``_etl_auto.AutoRuns.predicted``) against the same advice computed again, and both against
what the run measured.

Usage: ``python benchmarks/replay_predictions.py --json F [--job JOB]`` — ``F`` the ``--json`` file of
``bench_chaos.py`` or ``bench_etl_compare.py``; each prediction's job is the one kept beside it
(``predicted["job"]``), else ``JOB``, the DAG's job document (its ``region_failover_job`` param, as
``JobSpec.to_document()`` writes it). A run whose prediction kept no history (a record from before histories
were kept) is listed as such.
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import _repo_path  # noqa: F401 - puts the repository root on sys.path
from airflow_region_failover.job import JobSpec
from airflow_region_failover.planning.history import History
from airflow_region_failover.plugins.advice import Advice, advise


@dataclass(frozen=True)
class Saved:
    """A history kept beside a prediction (the :class:`~.planning.history.HistorySource` protocol)."""

    kept: History

    def history(self, dag_id: str) -> History:
        """The kept runs, whatever the DAG."""
        return self.kept


def runs_of(document: Any) -> Iterator[tuple[str, dict[str, Any]]]:
    """Every measured or history run in a bench ``--json`` file with a prediction, labelled."""
    if isinstance(document, dict):
        if "predicted" in document and "wall_s" in document:
            yield document.get("run_id", "?"), document
            return
        for key, value in document.items():
            for label, run in runs_of(value):
                yield f"{key}/{label}" if label != "?" else key, run
    elif isinstance(document, list):
        for number, value in enumerate(document):
            for label, run in runs_of(value):
                yield f"{number}/{label}", run


def expected_of(advice: Advice) -> float | None:
    """The advice's expected seconds: the chosen plan's, or the declared plan's for a job without AUTO edges."""
    if advice.decision is not None and advice.decision.chosen is not None:
        return advice.decision.chosen.expected
    return None if advice.expected is None else advice.expected.expected


def replay(runs: Any, spec: JobSpec | None, dag_id: str = "replayed") -> list[dict[str, Any]]:
    """One row per run with a prediction: measured, predicted then, replayed now (on the job kept beside it, else
    ``spec``)."""
    rows = []
    for label, run in runs_of(runs):
        predicted = run.get("predicted") or {}
        then = (predicted.get("chosen") or {}).get("expected_s")
        kept, job = predicted.get("history"), predicted.get("job")
        used = JobSpec.from_document(job) if job is not None else spec
        if kept is not None and used is None:
            raise SystemExit(f"run {label}: no job document kept beside its prediction; pass --job FILE")
        now = None if kept is None or used is None else expected_of(
            advise(run.get("dag_id", dag_id), used, Saved(History.from_json(kept))))
        rows.append({"run": label, "measured_s": run.get("wall_s"), "predicted_then_s": then,
                     "replayed_s": None if now is None else round(now, 1), "history_runs": None if kept is None
                     else len(kept["runs"])})
    return rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", type=Path, required=True, help="a bench --json file")
    parser.add_argument("--job", type=Path, help="the DAG's job document (JSON), for predictions kept without one")
    args = parser.parse_args(argv)
    spec = None if args.job is None else JobSpec.from_document(json.loads(args.job.read_text()))
    print(f"{'run':<44} {'measured s':>10} {'then s':>8} {'now s':>8} {'now/measured':>12}")
    for row in replay(json.loads(args.json.read_text()), spec):
        measured, now = row["measured_s"], row["replayed_s"]
        ratio = f"{now / measured:.2f}" if measured and now else "-"
        shown = [f"{v:.1f}" if isinstance(v, float) else "-" for v in (measured, row["predicted_then_s"], now)]
        print(f"{row['run']:<44} {shown[0]:>10} {shown[1]:>8} {shown[2]:>8} {ratio:>12}"
              f"{'' if row['history_runs'] is not None else '  (no history kept)'}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

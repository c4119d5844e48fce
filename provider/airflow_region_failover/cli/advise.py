"""``region-failover advise DAG_ID [-o table|json]`` and ``advise GRAPH --history FILE``: what the planner would
choose for a job's AUTO edges.

Rules:

* ``DAG_ID``: the job of the DAG's latest serialized version and its real history — earlier runs' task
  summaries, manifests and Airflow's failed tries (:func:`~.plugins.advice.advise`, the computation the DAG's
  dry-run tab shows too; it imports the Airflow / S3 side only then). Offline, ``GRAPH --history FILE``: the job
  graph (the JSON format of docs/reference/json-format.md, with its AUTO edges) and a history file
  (:class:`FileHistory`, the JSON of :meth:`~.planning.history.History.to_json`);
* it prints, per AUTO result, the expected completion time with it persisted and with it fused (the other results
  as chosen), the choice, and the figures used with the runs they came from; then the expected completion time and
  spread at the measured failure rates of every AUTO result BLOCKING, every one fused (one Spark application, less
  what cannot be fused) and the chosen plan (``-o table``, the default); ``-o json`` (or ``--json``) prints the
  whole decision instead (:meth:`~.planning.choice.Decision.to_json`; by DAG id,
  :meth:`~.plugins.advice.Advice.to_json`);
* ``--deadline SECONDS`` plans against that run budget (:mod:`~.planning.deadline`; by DAG id it replaces the one
  the DAG's deadline alert declares), and the plans' lines add their probability of missing it;
* a DAG without AUTO edges, or a history the planner cannot cost, prints why (exit 0), then by DAG id its steps'
  next epochs (sliced chains, AUTO epochs) and, when the history costs it, the expected completion time of its
  plan as declared (:func:`format_undecided`); an unknown DAG exits 2;
* with ``--history`` it is pure: it imports no Airflow, boto3 or pyspark.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from dataclasses import dataclass
from typing import TYPE_CHECKING

from airflow_region_failover.cli import preflight
from airflow_region_failover.cli.output import FORMATS, results_only
from airflow_region_failover.graph import jsonformat
from airflow_region_failover.planning.choice import Decision, decide
from airflow_region_failover.planning.deadline import miss_probability
from airflow_region_failover.planning.estimates import Figure
from airflow_region_failover.planning.history import History, HistoryError
from airflow_region_failover.planning.model import PlanCost
from airflow_region_failover.planning.policy import PlannerPolicy

if TYPE_CHECKING:
    from airflow_region_failover.plugins.advice import Advice


@dataclass(frozen=True)
class FileHistory:
    """A history read from a JSON file (whatever DAG id is asked for)."""

    path: str

    def history(self, dag_id: str) -> History:
        """The file's runs; :class:`HistoryError` naming the file if it cannot be read or parsed."""
        try:
            with open(self.path, encoding="utf-8") as handle:
                document = json.load(handle)
        except OSError as exc:
            raise HistoryError(f"cannot read history file {self.path!r}: {exc.strerror}") from None
        except json.JSONDecodeError as exc:
            raise HistoryError(f"history file {self.path!r} is not valid JSON: {exc}") from None
        try:
            return History.from_json(document)
        except HistoryError as exc:
            raise HistoryError(f"history file {self.path!r}: {exc}") from None


def add_parser(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    """Declare ``advise`` on the CLI's sub-parsers."""
    p = sub.add_parser("advise", help="print the plan the provider would choose for a DAG's AUTO edges, and why")
    p.add_argument("target", metavar="DAG_ID|GRAPH",
                   help="a DAG id (its job and run history from Airflow and the store), or with --history a job "
                        "graph JSON file (with AUTO edges)")
    p.add_argument("--history", metavar="FILE",
                   help='plan offline from these runs: JSON {"runs": [...]} (docs/user/auto-plans.md)')
    p.add_argument("--deadline", metavar="SECONDS", type=_budget,
                   help="plan for the least probability of a run missing this budget, not the least mean (by DAG "
                        "id: instead of its deadline alert's)")
    p.add_argument("-o", "--output", choices=FORMATS, default="table", help="output format (default: table)")
    p.add_argument("--json", dest="output", action="store_const", const="json", help="the same as -o json")
    p.set_defaults(run=advise_command)


def _budget(text: str) -> float:
    """A positive number of seconds; argparse's one-line error naming the value otherwise."""
    try:
        value = float(text)
    except ValueError:
        value = -1.0
    if not value > 0 or value == float("inf"):
        raise argparse.ArgumentTypeError(f"{text!r} is not a positive number of seconds (e.g. --deadline 1800)")
    return value


def advise_command(args: argparse.Namespace) -> int:
    """Print the decision for the DAG or the graph after its history (module rules); exit 0."""
    as_json = args.output == "json"
    if args.history is None:
        preflight.require_store()  # a missing bucket is one line before Airflow is imported
        os.environ.setdefault("_AIRFLOW_PROCESS_CONTEXT", "server")  # read the DB as Airflow's own CLI does
        with results_only() as out:  # Airflow's log lines go to stderr, the advice alone to stdout
            from airflow_region_failover.plugins import advice  # deferred: Airflow and the store, only by DAG id

            found = advice.advise(args.target, advice.dag_job(args.target), deadline_seconds=args.deadline)
            if as_json:
                out.write(json.dumps(found.to_json(), indent=2) + "\n")
            else:
                out.write(format_undecided(found) if found.decision is None else format_decision(found.decision))
        return 0
    graph = jsonformat.load(args.target)
    decision = decide(graph, FileHistory(args.history).history(args.target), _policy(args))
    sys.stdout.write(json.dumps(decision.to_json(), indent=2) + "\n" if as_json else format_decision(decision))
    return 0


def _policy(args: argparse.Namespace) -> PlannerPolicy:
    """The planner's policy for a graph file: the defaults, with ``--deadline``'s budget when given (by DAG id the
    job's own policy, :func:`~.plugins.advice.advise`)."""
    return PlannerPolicy(deadline_seconds=args.deadline)


def format_decision(decision: Decision) -> str:
    """The decision as text (module rules)."""
    rate = decision.rate
    span = f"{rate.runs[0]} .. {rate.runs[-1]}" if rate.runs else "none"
    lines = [f"history: {len(rate.runs)} run(s), {span}", f"planner: {decision.policy.describe()}",
             f"failure rate: {rate.per_task_hour:.3g} per task-hour (± {rate.spread_per_task_hour:.2g}; "
             f"{rate.failures} failed tries in {rate.task_hours:.3g} task-hours over {len(rate.runs)} run(s), "
             f"prior {rate.prior_per_task_hour:g} per task-hour weighing {rate.prior_task_hours:g} task-hours)"]
    failing = {s: r for s, r in decision.step_rates.items() if r.failures}
    for step, step_rate in failing.items():
        lost = step_rate.lost_fraction
        where = "" if lost is None else f", {lost:.0%} of an attempt lost per failure"
        lines.append(f"  step {step}: {step_rate.per_task_hour:.3g} per task-hour ({step_rate.failures} failed "
                     f"tries in {step_rate.task_hours * 3600:.0f} task-seconds{where})")
    lines.append(f"decision: {decision.reason}")
    lines.append("")
    lines.append(f"{'AUTO result':<28} {'choice':<9} {'if persisted':>13} {'if fused':>10}  figures")
    figures = decision.estimates
    for edge in decision.edges:
        persist = "-" if edge.persist is None else f"{edge.persist:.1f} s"
        fuse = "-" if edge.fuse is None else f"{edge.fuse:.1f} s"
        found = None if figures is None else figures.results.get(edge.result)
        used = ("not measured" if found is None else
                f"{found.bytes.value / 1e6:.1f} MB {_runs(found.bytes)}, write {_seconds(found.write_seconds)}, "
                f"read {_seconds(found.read_seconds)}")
        if edge.pinned:
            used += f"; stays BLOCKING: {edge.pinned}"
        lines.append(f"{edge.result:<28} {edge.choice.value:<9} {persist:>13} {fuse:>10}  {used}")
    if figures is not None:
        lines.append("")
        lines.append("steps (seconds per subtask, median over runs):")
        for measured in figures.steps.values():
            seconds = ", ".join(f"{s:.1f}" for s in measured.subtask_seconds)
            lines.append(f"  {measured.step}: {seconds} {_runs(Figure(0.0, measured.runs))}")
    lines.append("")
    lines.append(f"{'plan':<28} {'expected':>10} {'spread':>8}")
    for name, cost in (("all BLOCKING", decision.all_blocking), ("all fused", decision.all_fused),
                       ("chosen", decision.chosen)):
        lines.append(_plan_line(name, cost, decision.deadline_seconds))
    return "\n".join(lines) + "\n"


def format_undecided(found: Advice) -> str:
    """A job without a decision (:class:`~..plugins.advice.Advice`): why, its steps' next epochs, and its declared
    plan's expected completion time when the history costs it."""
    lines = [found.note]
    lines += [f"  {step}: {choice.epochs} epoch(s): {choice.reason}" for step, choice in sorted(found.epochs.items())]
    if found.expected is not None:
        lines.append(_plan_line("as declared", found.expected))
    return "\n".join(lines) + "\n"


def _plan_line(name: str, cost: PlanCost | None, deadline: float | None = None) -> str:
    if cost is None:
        return f"{name:<28} {'-':>10} {'-':>8}  (not costed: too little history)"
    fused = ", ".join(cost.plan.fused) or "none"
    late = "" if deadline is None else f"  misses {deadline:.0f} s: {miss_probability(cost, deadline):.0%}"
    return f"{name:<28} {cost.expected:>8.1f} s {cost.spread:>6.1f} s  fused: {fused}{late}"


def _seconds(figure: Figure) -> str:
    return f"{figure.value:.1f} s {'(estimated from bytes)' if figure.estimated else _runs(figure)}"


def _runs(figure: Figure) -> str:
    """Which runs a figure came from: their count, and their ids when they are few (``--json`` lists them all)."""
    runs = figure.runs
    if not runs:
        return "(default)"
    return f"({len(runs)} runs)" if len(runs) > 2 else f"(run {', '.join(runs)})"

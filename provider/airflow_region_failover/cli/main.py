"""``region-failover`` (also ``python -m airflow_region_failover`` and ``airflow region-failover``): look at
regions and preview decisions.

``regions``, ``plan``, ``backoff`` and ``dot`` need only the pure core: they import no Airflow, boto3 or
pyspark. ``history`` and ``gc`` (:mod:`.history`, :mod:`.gc`) import the Airflow / S3 side when they run, after
the configuration they need is checked (:mod:`.preflight`), and write only their results to stdout
(:func:`.output.results_only`). ``-o json|table`` picks the form of a document. Bad input exits 2 with one line
on stderr naming the offending step, edge, option or file. Help texts are plain text (:data:`DESCRIPTION`).
"""

from __future__ import annotations

import argparse
import importlib
import json
import os
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from airflow_region_failover.cli import advise, preflight
from airflow_region_failover.cli.output import FORMATS, results_only, table
from airflow_region_failover.exceptions import RegionFailoverError
from airflow_region_failover.failover.availability import KnownAvailability
from airflow_region_failover.failover.options import FailoverStrategy
from airflow_region_failover.failover.planner import plan_restart
from airflow_region_failover.failover.preview import preview
from airflow_region_failover.failover.reuse_hint import reuse_hints
from airflow_region_failover.failover.topology import FailoverTopology
from airflow_region_failover.graph import jsonformat
from airflow_region_failover.graph.dot import to_dot
from airflow_region_failover.graph.ids import PartitionId, SubtaskId
from airflow_region_failover.graph.regions import compute_regions

DESCRIPTION = ("Flink-style region failover for PySpark pipelines: look at a job graph's failover regions, preview "
               "restart decisions and backoffs, read a run's failover history, collect the result store's garbage.")
"""The command's help text (plain text: argparse shows it as it is)."""


def _regions(args: argparse.Namespace) -> int:
    regions = [[str(s) for s in r.subtasks] for r in compute_regions(jsonformat.load(args.graph)).regions]
    if args.output == "table":
        print(table(("region", "subtasks"), [(i, " ".join(r)) for i, r in enumerate(regions)]))
    else:
        _print_json({"regions": regions})
    return 0


def _plan(args: argparse.Namespace) -> int:
    graph = jsonformat.load(args.graph)
    failed = SubtaskId.parse(args.failed)
    graph.step(failed.step)
    unavailable = [PartitionId.parse(p) for p in args.unavailable]
    for partition in unavailable:
        graph.result(partition.result)
    decision = plan_restart(
        FailoverTopology.build(graph), failed, KnownAvailability.except_(unavailable), args.strategy
    )
    document = {**decision.to_dict(), "reuse": reuse_hints(graph, decision)}
    if args.output == "table":
        print(table(("region", "reason", "subtasks"),
                    [(r["region"], r["reason"], " ".join(r["subtasks"])) for r in document["regions"]]))
    else:
        _print_json(document)
    return 0


def _backoff(args: argparse.Namespace) -> int:
    options = dict(_key_value(item) for item in args.set)
    events = _read_json(args.events, "events")
    for row in preview(options, events, seed=args.seed):
        print(json.dumps(row))
    return 0


def _dot(args: argparse.Namespace) -> int:
    sys.stdout.write(to_dot(compute_regions(jsonformat.load(args.graph))))
    return 0


def _delegate(module: str, function: str) -> Callable[[argparse.Namespace], int]:
    """A sub-command implemented on the Airflow / S3 side, imported only when it runs (the core commands must work
    without Airflow, boto3 or pyspark) and only once the store's required options are set somewhere. Like Airflow's
    own CLI, it reads connections as a server process does (secrets backends and the metadata DB). Its results go
    to ``args.out``; anything else written to stdout meanwhile goes to stderr."""

    def run(args: argparse.Namespace) -> int:
        preflight.require_store()
        os.environ.setdefault("_AIRFLOW_PROCESS_CONTEXT", "server")
        with results_only() as out:
            args.out = out
            handler: Callable[[argparse.Namespace], int] = getattr(importlib.import_module(module), function)
            return handler(args)

    return run


def _key_value(item: str) -> tuple[str, str]:
    key, sep, value = item.partition("=")
    if not sep or not key.strip():
        raise RegionFailoverError(f"--set {item!r}: expected KEY=VALUE, e.g. restart-strategy.type=fixed-delay")
    return key.strip(), value.strip()


def _read_json(path: str, what: str) -> Any:
    try:
        with open(path, encoding="utf-8") as handle:
            return json.load(handle)
    except OSError as exc:
        raise RegionFailoverError(f"cannot read {what} file {path!r}: {exc.strerror}") from None
    except json.JSONDecodeError as exc:
        raise RegionFailoverError(f"{what} file {path!r} is not valid JSON: {exc}") from None


def _print_json(document: object) -> None:
    print(json.dumps(document, indent=2))


def _output(p: argparse.ArgumentParser, default: str) -> None:
    p.add_argument("-o", "--output", choices=FORMATS, default=default, help=f"output format (default: {default})")


def build_parser(prog: str = "region-failover") -> argparse.ArgumentParser:
    """The argument parser of ``region-failover`` (``prog``: the name its usage lines show)."""
    parser = argparse.ArgumentParser(prog=prog, description=DESCRIPTION)
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("regions", help="print the failover regions of a job graph")
    p.add_argument("graph", help="job graph JSON file")
    _output(p, "json")
    p.set_defaults(run=_regions)
    p = sub.add_parser("plan", help="print which subtasks restart after a failure, and why")
    p.add_argument("graph", help="job graph JSON file")
    _output(p, "json")
    p.add_argument("--failed", required=True, help="the failed subtask, e.g. join#3")
    p.add_argument("--unavailable", nargs="+", action="extend", default=[], metavar="PARTITION",
                   help="a partition that is gone, e.g. clean->join#0 (repeat the flag or list several)")
    p.add_argument("--strategy", choices=[s.value for s in FailoverStrategy], default=FailoverStrategy.REGION.value)
    p.set_defaults(run=_plan)
    p = sub.add_parser("backoff", help="preview a restart strategy on a list of events (JSON lines)")
    p.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", help="a Flink restart option")
    p.add_argument("--events", required=True, help='JSON file: [{"t": ms, "op": "failure"|"check"}, ...]')
    p.add_argument("--seed", type=int, default=0, help="seed of the jitter's randomness")
    p.set_defaults(run=_backoff)
    p = sub.add_parser("dot", help="print Graphviz DOT of the steps coloured by region")
    p.add_argument("graph", help="job graph JSON file")
    p.set_defaults(run=_dot)
    advise.add_parser(sub)
    _add_lazy_commands(sub)
    return parser


def _add_lazy_commands(sub: Any) -> None:
    p = sub.add_parser("history", help="print the failover decisions of a DAG run")
    p.add_argument("dag_id")
    p.add_argument("run_id")
    _output(p, "table")
    p.add_argument("--json", dest="output", action="store_const", const="json", help="the same as -o json")
    p.set_defaults(run=_delegate("airflow_region_failover.cli.history", "history_command"))
    p = sub.add_parser("gc", help="sweep uncommitted attempts and orphaned prefixes, release expired results")
    p.add_argument("--dry-run", action="store_true", help="only print what would be deleted")
    p.add_argument("--grace", default="1 h", help="minimum age of what is swept (Flink duration), default 1 h")
    _output(p, "json")
    p.set_defaults(run=_delegate("airflow_region_failover.cli.gc", "gc_command"))
    p = sub.add_parser("standalone", help="run SeaweedFS, Spark Connect and Airflow on your DAGs folder until stopped")
    p.add_argument("--dags", type=Path, default=Path("dags"), help="your DAGs folder (default: ./dags)")
    p.add_argument("--port", type=int, default=8080, help="port of the Airflow UI/API (default 8080; 0: a free one)")
    p.add_argument("--home", type=Path, default=Path(".region-failover"),
                   help="state kept across restarts (default ./.region-failover)")
    p.set_defaults(run=_standalone)


def _standalone(args: argparse.Namespace) -> int:
    """``standalone`` runs servers, not a client: no server process context (its Airflow task processes must use
    the Task SDK's API, not the DB), and it needs the ``standalone`` extra (SeaweedFS)."""
    try:
        command = importlib.import_module("airflow_region_failover.standalone.command")
    except ModuleNotFoundError as exc:
        raise RegionFailoverError(f"standalone needs {exc.name!r}, of the provider's 'standalone' extra: pip install "
                                  "'airflow-provider-region-failover[standalone]' (from the wheel: pip install "
                                  "'<wheel>.whl[standalone]', docs/operator/installing.md)") from exc
    code: int = command.standalone_command(args)
    return code


def main(argv: Sequence[str] | None = None, prog: str = "region-failover") -> int:
    """Entry point; returns the exit code (2 for bad input, with one line on stderr; 1 when the reader of stdout
    closed it early, e.g. ``| head``, quietly: Python's advice for SIGPIPE)."""
    args = build_parser(prog).parse_args(argv)
    try:
        code: int = args.run(args)
        sys.stdout.flush()
    except RegionFailoverError as exc:
        print(f"{prog}: error: {exc}", file=sys.stderr)
        return 2
    except BrokenPipeError:
        # the interpreter flushes stdout again at exit: point it at /dev/null so that flush cannot fail too
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 1
    return code


if __name__ == "__main__":
    raise SystemExit(main())

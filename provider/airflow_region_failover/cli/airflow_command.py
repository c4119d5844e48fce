"""``airflow region-failover COMMAND ...``: the same commands as ``region-failover``, as a subcommand of Airflow's
own CLI (the provider info's ``cli`` entry names :func:`get_cli_commands`, which Airflow 3 calls when it builds its
parser).

Rule: everything after ``region-failover`` goes to :func:`~.main.main` unchanged (``-o``, ``--help`` and bad
input behave as in ``region-failover``), and a non-zero exit code ends the ``airflow`` process with it.
"""

from __future__ import annotations

import argparse
from typing import Any

from airflow_region_failover.cli.main import DESCRIPTION, main

NAME = "region-failover"


def get_cli_commands() -> list[Any]:
    """Airflow's ``CLICommand`` list: one ``ActionCommand`` taking the rest of the command line."""
    from airflow.cli.cli_config import ActionCommand, Arg  # deferred: only Airflow's CLI calls this

    rest = Arg(("argv",), metavar="COMMAND ...", nargs=argparse.REMAINDER,
               help="a region-failover command and its arguments, e.g. regions graph.json -o table")
    return [ActionCommand(name=NAME, help="region failover: regions, plan, backoff, dot, history, gc, standalone",
                          func=run, args=(rest,), description=DESCRIPTION)]


def run(args: argparse.Namespace) -> None:
    """Airflow's handler: ``region-failover`` on ``args.argv``; ``SystemExit`` with its code when not 0."""
    code = main(list(args.argv), prog=f"airflow {NAME}")
    if code:
        raise SystemExit(code)

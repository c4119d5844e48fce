"""``region-failover history DAG_ID RUN_ID [--json]``: print a run's failover decisions."""

from __future__ import annotations

import argparse
import json
import sys

from airflow_region_failover.plugins.history import format_history, load_history


def history_command(args: argparse.Namespace) -> int:
    """Print the run's decision log as text (or raw JSON with ``--json``); exit 0."""
    doc = load_history(args.dag_id, args.run_id)
    sys.stdout.write((json.dumps(doc.to_json(), indent=2, sort_keys=True) if args.json else format_history(doc))
                     + "\n")
    return 0

"""``region-failover history DAG_ID RUN_ID [-o table|json]``: print a run's failover decisions."""

from __future__ import annotations

import argparse
import json

from airflow_region_failover.plugins.history import format_history, load_history


def history_command(args: argparse.Namespace) -> int:
    """Print the run's decision log (to ``args.out``) as text, or as the raw JSON log with ``-o json``; exit 0."""
    doc = load_history(args.dag_id, args.run_id)
    as_json = args.output == "json"
    args.out.write((json.dumps(doc.to_json(), indent=2, sort_keys=True) if as_json else format_history(doc)) + "\n")
    return 0

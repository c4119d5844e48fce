"""``region-failover gc``: sweep uncommitted attempts and orphans, and apply retention (maintenance DAG too).

Rules: retention runs first (it releases runs, i.e. their manifests), then the sweep, which only removes what no
remaining manifest references and what is older than ``--grace`` (a writer's age is its newest object or upload
part; a shared content-addressed object's age is its last-modified time, :mod:`..store.registry`); ``--grace``
below 15 min is refused before anything is read (a live writer could be swept); held runs, results with a
manifest this version cannot read and other deployments' prefixes nested in ours are kept. Retention runs only
when ``[region_failover] store_keep_last_runs`` and/or ``store_keep_days`` are set, and releases a run only if
Airflow's REST API (connection ``[region_failover] api_conn_id``) says it is ``success`` or ``failed`` — a run
whose state cannot be read counts as unfinished and is kept.
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Callable
from typing import Any

from airflow_region_failover.failover.values import parse_duration_ms
from airflow_region_failover.plugins.rest import default_api
from airflow_region_failover.store.config import retention_from_airflow
from airflow_region_failover.store.facade import ResultStore, default_store
from airflow_region_failover.store.lifecycle import MIN_GRACE_SECONDS, Retention, check_grace

FINISHED = frozenset({"success", "failed"})


def run_finished_via_rest(dag_id: str) -> Callable[[str], bool]:
    """``run_id -> finished?`` asked through Airflow's REST API; any error answers ``False`` (keep the run)."""
    client = default_api()

    def finished(run_id: str) -> bool:
        try:
            return str(client.dag_run(dag_id, run_id).get("state")) in FINISHED
        except Exception:
            return False

    return finished


def run_gc(store: ResultStore, grace_seconds: float, retention: Retention | None,
           run_finished: Callable[[str], Callable[[str], bool]], dry_run: bool = False,
           min_grace_seconds: float = MIN_GRACE_SECONDS) -> dict[str, Any]:
    """Apply retention per DAG (releasing manifests), then sweep (what no retained manifest lists); returns a
    summary (what was or would be removed, and what was kept)."""
    released: dict[str, list[str]] = {}
    if retention is not None:
        for dag_id in store.dags():
            runs = store.apply_retention(dag_id, retention, run_finished(dag_id), dry_run=dry_run)
            if runs:
                released[dag_id] = list(runs)
    report = store.sweep(grace_seconds, dry_run=dry_run, min_grace_seconds=min_grace_seconds)
    shared = report.shared
    return {"shared_objects_swept": shared.deleted, "shared_objects_referenced": shared.referenced,
            "shared_objects_deferred": shared.deferred, "manifests_read": shared.manifests,
            "shared_sweep_skipped_unreadable": shared.skipped_incomplete,
            "dry_run": dry_run, "swept_objects": report.deleted_objects, "aborted_uploads": report.aborted_uploads,
            "held_runs_skipped": len(report.skipped_runs), "released_runs": released,
            "live_uploads_kept": report.live_writers, "unreadable_manifests_kept": list(report.unreadable_manifests),
            "nested_deployments_skipped": list(report.nested_deployments)}


def gc_command(args: argparse.Namespace) -> int:
    """CLI handler: ``--grace`` (Flink duration, default 1 h, at least 15 min) and ``--dry-run``."""
    grace = parse_duration_ms(getattr(args, "grace", "1 h"), "--grace") / 1000
    check_grace(grace, MIN_GRACE_SECONDS, "--grace")
    summary = run_gc(default_store(), grace, retention_from_airflow(), run_finished_via_rest,
                     dry_run=bool(getattr(args, "dry_run", False)))
    print(json.dumps(summary, indent=2, sort_keys=True))
    return 0

"""``region-failover gc``: sweep uncommitted attempts and orphans, and apply retention (maintenance DAG too).

Rules: retention runs first (it releases runs, i.e. their manifests), then the sweep, which only removes what no
remaining manifest references and what is older than ``--grace`` (a writer's age is its newest object or upload
part; a shared content-addressed object's age is its last-modified time, :mod:`..store.gc.registry`); ``--grace``
below the grace floor every writer relies on (``[region_failover] store_min_grace_seconds``, 15 min by default) is
refused before anything is read (a live writer could be swept); held runs, results with a
manifest this version cannot read and other deployments' prefixes nested in ours are kept. Retention runs only
when ``[region_failover] store_keep_last_runs`` and/or ``store_keep_days`` are set, and releases a run only if
Airflow's REST API (connection ``[region_failover] api_conn_id``) says it is ``success`` or ``failed`` — a run
whose state cannot be read counts as unfinished and is kept. The committed partitions of every
released run are reported to OpenLineage as dropped (when the openlineage provider is installed and configured;
docs/operator/observability.md). gc refuses to run while ``[region_failover] publish_root`` lies inside the store's
own trees (it would delete published tables); it exits with status 1 when the shared sweep's window closed before
it could delete (deriving the registry took a quarter of the grace or more: raise ``--grace``, the warning says to
what).
"""

from __future__ import annotations

import argparse
import re
from collections.abc import Callable, Iterable
from typing import Any

from airflow_region_failover import conf
from airflow_region_failover.cli.output import render
from airflow_region_failover.failover.values import parse_duration_ms
from airflow_region_failover.observability import lineage
from airflow_region_failover.plugins.rest import default_api
from airflow_region_failover.publication.operator import publish_root
from airflow_region_failover.store.config import Retention, retention_from_airflow
from airflow_region_failover.store.gc.lifecycle import check_grace
from airflow_region_failover.store.keys import Layout
from airflow_region_failover.store.result_store import ResultStore, default_store

FINISHED = frozenset({"success", "failed"})
_MANIFEST = re.compile(r"/manifests/p\d{5,6}/a\d{6}\.json\Z")


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
           min_grace_seconds: float | None = None,
           report_dropped: Callable[[Layout, list[str]], bool] = lineage.emit_dropped) -> dict[str, Any]:
    """Apply retention per DAG (releasing manifests), then sweep (what no retained manifest lists); returns a
    summary (what was or would be removed, and what was kept). ``min_grace_seconds``: the floor of the grace
    (default the store's, which its writers rely on).

    The committed partitions of the runs retention released are reported dropped (``report_dropped``: OpenLineage,
    :func:`~airflow_region_failover.observability.lineage.emit_dropped`); a dry run reports nothing."""
    released: dict[str, list[str]] = {}
    dropped: list[str] = []
    if retention is not None:
        for dag_id in store.dags():
            finished = run_finished(dag_id)
            doomed = {} if dry_run else committed_partitions(
                store, dag_id, store.apply_retention(dag_id, retention, finished, dry_run=True))
            runs = store.apply_retention(dag_id, retention, finished, dry_run=dry_run)
            if runs:
                released[dag_id] = list(runs)
            dropped.extend(name for run_id in runs for name in doomed.get(run_id, ()))
    report = store.sweep(grace_seconds, dry_run=dry_run, min_grace_seconds=min_grace_seconds)
    shared = report.shared
    return {"shared_objects_swept": shared.deleted, "shared_objects_referenced": shared.referenced,
            "shared_objects_deferred": shared.deferred, "manifests_read": shared.manifests,
            "shared_sweep_skipped_unreadable": shared.skipped_incomplete,
            "registry_derivation_seconds": round(shared.derivation_seconds, 1),
            "shared_sweep_window_closed": shared.window_closed, "quarantined_objects_swept": shared.quarantine_deleted,
            "dry_run": dry_run, "swept_objects": report.deleted_objects, "aborted_uploads": report.aborted_uploads,
            "held_runs_skipped": len(report.skipped_runs), "released_runs": released,
            "live_uploads_kept": report.live_writers, "unreadable_manifests_kept": list(report.unreadable_manifests),
            "nested_deployments_skipped": list(report.nested_deployments),
            "dropped_partitions": len(dropped),
            "dropped_reported": bool(dropped) and report_dropped(store.layout, dropped)}


def committed_partitions(store: ResultStore, dag_id: str, run_ids: Iterable[str]) -> dict[str, list[str]]:
    """``run_id -> `` the key prefixes of its committed partitions (those holding a manifest; the names their
    lineage datasets have, :func:`~airflow_region_failover.observability.lineage.dataset_name`)."""
    found: dict[str, list[str]] = {}
    for run_id in run_ids:
        keys = (item.key for item in store.objects.listing(store.run_keys(dag_id, run_id).run_prefix))
        found[run_id] = sorted({key.rsplit("/", 1)[0] for key in keys if _MANIFEST.search(key)})
    return found


def gc_command(args: argparse.Namespace) -> int:
    """CLI handler: ``--grace`` (Flink duration, default 1 h, at least the grace floor ``store_min_grace_seconds``),
    ``--dry-run`` and ``-o json|table`` (the summary, to ``args.out``); exit status 1 when the shared sweep's window
    closed (module rule)."""
    grace = parse_duration_ms(getattr(args, "grace", "1 h"), "--grace") / 1000
    check_grace(grace, conf.store_min_grace_seconds(), "--grace")
    store = default_store()
    publish_root(store.config)  # OptionError if published tables lie where this sweep would delete them
    summary = run_gc(store, grace, retention_from_airflow(), run_finished_via_rest,
                     dry_run=bool(getattr(args, "dry_run", False)))
    args.out.write(render(summary, args.output) + "\n")
    return 1 if summary["shared_sweep_window_closed"] else 0

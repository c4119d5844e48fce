"""Life-cycle: release committed results nobody can need any more, and sweep what was never committed.

Rules (Flink's partition life-cycle): a run's results are released only when its consumers are done *and* the
run has finished, and never while a *hold* exists (``_holds/<name>.json``: whoever may still need the run's
results takes one and drops it when done). Retention keeps the newest ``keep_last_runs``
runs and every run younger than ``keep_days``; older finished, unheld runs are released. The sweeper deletes
only data no committed manifest references (uncommitted attempts, losers of a commit race, orphans) and aborts
incomplete multipart uploads — and only when their newest object is older than the grace period, so a writer
still at work is never swept. Runs with a hold are skipped. Nothing outside the store's root is touched.
"""

from __future__ import annotations

import contextlib
import json
import re
import time
from collections.abc import Callable
from dataclasses import dataclass

from airflow_region_failover.exceptions import AlreadyCommitted, ManifestError, ReleaseRefused
from airflow_region_failover.store.commit import now_iso
from airflow_region_failover.store.keys import Layout, RunKeys, decode_airflow_id
from airflow_region_failover.store.manifest import Manifest
from airflow_region_failover.store.objects import Listed, Objects

_MANIFEST = re.compile(r"[^/]+/manifests/p\d{5}/a\d{6}\.json\Z")
_RETIRED = re.compile(r"[^/]+/retired/p\d{5}/a\d{6}\.json\Z")
_DATA = re.compile(r"([^/]+/data/p\d{5}/a\d{6}-[0-9a-f]+)/[^/]+\Z")
_META = re.compile(r"(_run\.json|_holds/[^/]+\.json)\Z")


@dataclass(frozen=True)
class Retention:
    """Keep the newest ``keep_last_runs`` runs and runs younger than ``keep_days`` (``None``: no such rule)."""

    keep_last_runs: int | None = None
    keep_days: float | None = None

    def __post_init__(self) -> None:
        if self.keep_last_runs is not None and self.keep_last_runs < 0:
            raise ValueError(f"keep_last_runs {self.keep_last_runs} must be >= 0")
        if self.keep_days is not None and self.keep_days < 0:
            raise ValueError(f"keep_days {self.keep_days} must be >= 0")


@dataclass(frozen=True)
class RunInfo:
    """One stored run: its ids and creation time (epoch seconds)."""

    dag_id: str
    run_id: str
    created: float


@dataclass(frozen=True)
class SweepReport:
    """What a sweep removed."""

    deleted_objects: int
    aborted_uploads: int
    skipped_runs: tuple[str, ...]


def record_run(objects: Objects, keys: RunKeys) -> None:
    """Create the run record once (the first writer wins, later ones are no-ops)."""
    body = json.dumps({"dag_id": keys.dag_id, "run_id": keys.run_id, "created": time.time()}).encode()
    with contextlib.suppress(AlreadyCommitted):
        objects.put_if_absent(keys.run_record(), body)


def hold(objects: Objects, keys: RunKeys, name: str, reason: str) -> None:
    """Hold the run's results (a pending restart may read them); idempotent."""
    body = json.dumps({"name": name, "reason": reason, "since": now_iso()}).encode()
    with contextlib.suppress(AlreadyCommitted):
        objects.put_if_absent(keys.hold(name), body)


def unhold(objects: Objects, keys: RunKeys, name: str) -> None:
    """Drop one hold."""
    objects.delete([keys.hold(name)])


def holds(objects: Objects, keys: RunKeys) -> tuple[str, ...]:
    """The names of the run's holds."""
    prefix = keys.holds_prefix()
    return tuple(decode_airflow_id(i.key[len(prefix):-len(".json")]) for i in objects.listing(prefix))


def release_run(objects: Objects, keys: RunKeys, *, run_finished: bool, consumers_done: bool,
                result: str | None = None) -> int:
    """Delete the run's results (or one result); :class:`ReleaseRefused` naming why if any may still be needed."""
    what = f"{keys.dag_id}/{keys.run_id}" + (f" result {result!r}" if result else "")
    if not run_finished:
        raise ReleaseRefused(f"{what}: the run has not finished; a restart may still read its results")
    if not consumers_done:
        raise ReleaseRefused(f"{what}: consumers are not done")
    current = holds(objects, keys)
    if current:
        raise ReleaseRefused(f"{what}: held by {', '.join(current)} (a pending restart may read it)")
    prefix = keys.result_prefix(result) if result else keys.run_prefix
    return objects.delete([item.key for item in objects.listing(prefix)])


def list_runs(objects: Objects, layout: Layout, dag_id: str) -> list[RunInfo]:
    """Every stored run of ``dag_id``, newest first (creation time from the run record)."""
    runs = []
    for run_prefix in objects.list_dirs(layout.dag_prefix(dag_id)):
        run_id = decode_airflow_id(run_prefix.rstrip("/").rsplit("/", 1)[1])
        record = objects.get(run_prefix + "_run.json")
        created = float(json.loads(record)["created"]) if record else time.time()
        runs.append(RunInfo(dag_id, run_id, created))
    return sorted(runs, key=lambda r: r.created, reverse=True)


def apply_retention(objects: Objects, layout: Layout, dag_id: str, retention: Retention,
                    run_finished: Callable[[str], bool], now: float | None = None,
                    dry_run: bool = False) -> tuple[str, ...]:
    """Release the runs of ``dag_id`` that retention no longer keeps; returns their run ids.

    ``run_finished(run_id)`` asks the orchestrator; unfinished or held runs are kept whatever their age.
    With ``dry_run`` nothing is deleted and the runs that would be released are returned.
    """
    now = time.time() if now is None else now
    released = []
    for position, run in enumerate(list_runs(objects, layout, dag_id)):
        if retention.keep_last_runs is not None and position < retention.keep_last_runs:
            continue
        if retention.keep_days is not None and now - run.created < retention.keep_days * 86400:
            continue
        keys = layout.run(dag_id, run.run_id)
        if run_finished(run.run_id) and not holds(objects, keys):
            if not dry_run:
                release_run(objects, keys, run_finished=True, consumers_done=True)
            released.append(run.run_id)
    return tuple(released)


def list_dags(objects: Objects, layout: Layout) -> list[str]:
    """The dag ids that have stored runs."""
    return [decode_airflow_id(p.rstrip("/").rsplit("/", 1)[1]) for p in objects.list_dirs(layout.root + "/")]


def sweep(objects: Objects, layout: Layout, grace_seconds: float, now: float | None = None,
          dry_run: bool = False) -> SweepReport:
    """Delete unreferenced data/orphans older than the grace period; abort stale multipart uploads.

    With ``dry_run`` nothing is deleted or aborted; the report counts what would be.
    """
    now = time.time() if now is None else now
    cutoff = now - grace_seconds
    deleted, skipped = 0, []
    for dag_prefix in objects.list_dirs(layout.root + "/"):
        for run_prefix in objects.list_dirs(dag_prefix):
            items = list(objects.listing(run_prefix))
            if any(i.key[len(run_prefix):].startswith("_holds/") for i in items):
                skipped.append(run_prefix)
                continue
            doomed = _sweepable(objects, run_prefix, items, cutoff)
            deleted += len(doomed) if dry_run else objects.delete(doomed)
    aborted = objects.stale_uploads(layout.root + "/", cutoff)
    for key, upload_id in [] if dry_run else aborted:
        objects.abort_upload(key, upload_id)
    return SweepReport(deleted, len(aborted), tuple(skipped))


def _sweepable(objects: Objects, run_prefix: str, items: list[Listed], cutoff: float) -> list[str]:
    referenced = _referenced(objects, run_prefix, items)
    groups: dict[str, list[Listed]] = {}
    for item in items:
        rel = item.key[len(run_prefix):]
        if _MANIFEST.match(rel) or _RETIRED.match(rel) or _META.match(rel) or rel in referenced:
            continue
        match = _DATA.match(rel)
        groups.setdefault(match.group(1) if match else rel, []).append(item)
    return [i.key for group in groups.values() if max(i.modified for i in group) < cutoff for i in group]


def _referenced(objects: Objects, run_prefix: str, items: list[Listed]) -> set[str]:
    referenced: set[str] = set()
    for item in items:
        if _MANIFEST.match(item.key[len(run_prefix):]):
            body = objects.get(item.key)
            if body is None:
                continue
            try:
                referenced.update(o.key for o in Manifest.from_json(body, where=item.key).objects)
            except ManifestError:
                continue
    return referenced

"""Life-cycle: release committed results nobody can need any more, and sweep what was never committed.

Rules (Flink's partition life-cycle): a run's results are released only when its consumers are done *and* the
run has finished, and never while a *hold* exists (``_holds/<name>.json``: whoever may still need the run's
results takes one and drops it when done). Retention keeps the newest ``keep_last_runs``
runs and every run younger than ``keep_days``; older finished, unheld runs are released. The sweeper deletes
only data no committed manifest references (uncommitted attempts, losers of a commit race, orphans), and only
when the writer's newest activity is older than the grace period: its newest completed object, its heartbeat
*and* the newest part of any of its multipart uploads still in progress (a writer prefix with an upload active
within the grace is never swept). It aborts an incomplete upload only when its last part (else its initiation)
is older than the grace. Ages are the server's clock minus last-modified times (:meth:`..s3.objects.Objects.clock`).

Why a live writer is never swept: a writer's Spark tasks announce and upload its objects as they finish, but its
driver commits only after the *last* task — a straggler, or executors queued for an hour, can leave the writer's
keys untouched for longer than any grace. So while the driver is at work (writing, then committing) it renews the
writer's heartbeat ``data/P/A-<writer>/alive`` every ``HEARTBEAT_SHARE * G0`` (:class:`Heartbeat`; ``G0`` the
grace floor, the store's ``min_grace_seconds``: ``[region_failover] store_min_grace_seconds``, by default
:data:`MIN_GRACE_SECONDS`), so a floor lowered beats faster; and the sweeper, whose grace ``G >= G0``, finds the
writer's newest activity at most ``G0/4 < G`` old: it keeps the writer's prefix, so its announcements keep
referencing its shared objects (:mod:`.registry`). A writer whose driver died stops renewing and is swept ``G``
after its last sign of life; a commit it might still attempt is guarded by the committer's own confirmation
(:mod:`..content`), never by the heartbeat. The grace is at least ``G0`` (:func:`check_grace`).
Checkpoint manifests, try records and completion notes (``_checkpoints.v1/``) are a run's records like its
manifests: the sweeper never deletes them (their retention is the checkpointing step's
``state.checkpoints.num-retained``, and the run's release removes the rest).
A result holding a manifest this version cannot read (e.g. a newer format written during an upgrade) is kept
whole and named in the :class:`SweepReport`. After the runs, the shared area of content-addressed objects is swept
by its own rule (:mod:`.registry`: an object no retained manifest lists, older than the grace; nothing there
while any manifest is unreadable), and idle uploads under it are aborted like any other. Runs with a hold are
skipped, another deployment's prefix nested in this one (:mod:`..deployment`) is never entered, and nothing
outside the store's root and shared area is touched.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import logging
import re
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from types import TracebackType

from airflow_region_failover.exceptions import AlreadyCommitted, GraceTooShort, ManifestError, ReleaseRefused
from airflow_region_failover.store.commit import now_iso
from airflow_region_failover.store.config import Retention
from airflow_region_failover.store.content import MIN_GRACE_SECONDS as MIN_GRACE_SECONDS
from airflow_region_failover.store.deployment import nested_prefixes, outside_nested
from airflow_region_failover.store.gc.registry import SharedSweep, sweep_shared
from airflow_region_failover.store.key_checks import decode_airflow_id
from airflow_region_failover.store.keys import CHECKPOINTS, DEPLOYMENT_MARKER, PARTITION_PART, Layout, RunKeys
from airflow_region_failover.store.manifest import Manifest
from airflow_region_failover.store.s3.objects import Listed, Objects, Upload

log = logging.getLogger(__name__)

HEARTBEAT_SHARE = 0.25
"""A live writer's driver renews its heartbeat every ``HEARTBEAT_SHARE * G0`` (module rule)."""

_MANIFEST = re.compile(rf"([^/]+)/manifests/{PARTITION_PART}/a\d{{6}}\.json\Z")
_RETIRED = re.compile(rf"[^/]+/retired/{PARTITION_PART}/a\d{{6}}\.json\Z")
_DATA = re.compile(rf"([^/]+/data/{PARTITION_PART}/a\d{{6}}-[0-9a-f]+)/[^/]+\Z")
_CHECKPOINT = rf"{re.escape(CHECKPOINTS)}/[^/]+/{PARTITION_PART}/[ctn]\d{{6}}\.json"
_META = re.compile(rf"(_run\.json|_holds/[^/]+\.json|{_CHECKPOINT})\Z")


@dataclass(frozen=True)
class RunInfo:
    """One stored run: its ids and creation time (epoch seconds)."""

    dag_id: str
    run_id: str
    created: float


@dataclass(frozen=True)
class SweepReport:
    """What a sweep removed, and what it kept on purpose: held runs, results holding a manifest it cannot read
    (their keys), writers with an upload active within the grace, other deployments' prefixes nested here."""

    deleted_objects: int
    aborted_uploads: int
    skipped_runs: tuple[str, ...]
    unreadable_manifests: tuple[str, ...] = ()
    live_writers: int = 0
    nested_deployments: tuple[str, ...] = ()
    shared: SharedSweep = field(default_factory=SharedSweep)


class Heartbeat:
    """While open, renews the writer's heartbeat ``key`` every ``HEARTBEAT_SHARE * min_grace_seconds`` from a
    thread of this process (the writer's driver; module rule). The first renewal comes after one interval: a write
    shorter than that costs nothing. A failed renewal is logged and tried again at the next interval."""

    def __init__(self, objects: Objects, key: str, min_grace_seconds: float) -> None:
        self._objects, self._key = objects, key
        self.interval = HEARTBEAT_SHARE * min_grace_seconds
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def __enter__(self) -> Heartbeat:
        self._thread = threading.Thread(target=self._run, daemon=True, name="region-failover-writer-heartbeat")
        self._thread.start()
        return self

    def __exit__(self, kind: type[BaseException] | None, value: BaseException | None,
                 traceback: TracebackType | None) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()

    def _run(self) -> None:
        while not self._stop.wait(self.interval):
            try:
                self._objects.put(self._key, b"")
            except Exception:
                log.warning("could not renew the writer's heartbeat %s; retrying in %.0f s (its commit still checks "
                            "every object it lists)", self._key, self.interval, exc_info=True)


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
    """Delete the run's results (or one result); :class:`ReleaseRefused` naming why if any may still be needed.

    The run record goes last: a release killed part-way leaves the run listed with its creation time, so the next
    retention releases the rest (the manifests left meanwhile keep their shared objects referenced)."""
    what = f"{keys.dag_id}/{keys.run_id}" + (f" result {result!r}" if result else "")
    if not run_finished:
        raise ReleaseRefused(f"{what}: the run has not finished; a restart may still read its results")
    if not consumers_done:
        raise ReleaseRefused(f"{what}: consumers are not done")
    current = holds(objects, keys)
    if current:
        raise ReleaseRefused(f"{what}: held by {', '.join(current)} (a pending restart may read it)")
    prefix = keys.result_prefix(result) if result else keys.run_prefix
    items = list(objects.listing(prefix))
    doomed = [item.key for item in outside_nested(items, nested_prefixes(prefix, items))]
    record = [key for key in doomed if key == keys.run_record()]
    # a separate, last request: S3 does not promise the order of the keys within one DeleteObjects request
    return objects.delete([key for key in doomed if key not in record]) + objects.delete(record)


def list_runs(objects: Objects, layout: Layout, dag_id: str) -> list[RunInfo]:
    """Every stored run of ``dag_id``, newest first (creation time from the run record)."""
    runs = []
    dirs, files = objects.level(layout.dag_prefix(dag_id))
    if nested_prefixes(layout.dag_prefix(dag_id), files):
        return []  # another deployment's prefix, not a DAG of ours
    for run_prefix in dirs:
        run_id = decode_airflow_id(run_prefix.rstrip("/").rsplit("/", 1)[1])
        record = objects.get(run_prefix + "_run.json")
        if record is None and objects.head_size(run_prefix + DEPLOYMENT_MARKER) is not None:
            continue  # another deployment's prefix, not a run of ours
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


def check_grace(grace_seconds: float, minimum: float, what: str = "grace_seconds") -> None:
    """Raise :class:`GraceTooShort` naming ``what`` if ``grace_seconds`` is below ``minimum`` (the grace floor)."""
    if grace_seconds < minimum:
        least = f"{minimum / 60:g} min" if minimum >= 60 else f"{minimum:g} s"
        raise GraceTooShort(f"{what} of {grace_seconds:g} s is below the minimum of {least}: a writer still "
                            f"uploading could be swept; use {what} of at least {least} (the grace floor every "
                            "writer relies on: [region_failover] store_min_grace_seconds)")


def sweep(objects: Objects, layout: Layout, grace_seconds: float, now: float | None = None,
          dry_run: bool = False, min_grace_seconds: float = MIN_GRACE_SECONDS) -> SweepReport:
    """Delete unreferenced data/orphans of writers idle for longer than the grace period; abort idle uploads.

    :class:`GraceTooShort` if ``grace_seconds < min_grace_seconds`` (lower ``min_grace_seconds`` only in tests
    that control every writer). With ``dry_run`` nothing is deleted or aborted; the report counts what would be.
    ``now``: pretend the clock is ``now - time.time()`` ahead of the server's (tests).
    """
    check_grace(grace_seconds, min_grace_seconds)
    cutoff = objects.clock() + (0.0 if now is None else now - time.time()) - grace_seconds
    tally = _Tally()
    root = layout.root + "/"
    dags, files = objects.level(root)
    tally.nested.extend(nested_prefixes(root, files))
    if tally.nested:  # this whole root is another deployment's prefix: nothing here is ours to sweep
        return tally.report()
    visited: list[str] = []
    for dag_prefix in dags:
        runs, files = objects.level(dag_prefix)
        if nested_prefixes(dag_prefix, files):
            tally.nested.extend(nested_prefixes(dag_prefix, files))
            continue
        for run_prefix in runs:
            visited.append(run_prefix)
            _sweep_run(objects, run_prefix, cutoff, dry_run, tally)
    leftovers = [u for u in objects.uploads(root) if not u.key.startswith((*visited, *tally.nested))]
    _abort_idle(objects, root, leftovers, cutoff, dry_run, tally)  # runs without objects left (released, killed early)
    shared = sweep_shared(objects, layout, grace_seconds, now, dry_run)
    area = layout.cas_root + "/"
    uploads = [u for u in objects.uploads(area) if not u.key.startswith(shared.nested_deployments or ("\0",))]
    _abort_idle(objects, area, uploads, cutoff, dry_run, tally)
    return dataclasses.replace(tally.report(), shared=shared)


@dataclass
class _Tally:
    """What one sweep did so far (mutable, private to :func:`sweep`)."""

    deleted: int = 0
    aborted: int = 0
    live: int = 0
    skipped: list[str] = field(default_factory=list)
    unreadable: list[str] = field(default_factory=list)
    nested: list[str] = field(default_factory=list)

    def report(self) -> SweepReport:
        return SweepReport(self.deleted, self.aborted, tuple(self.skipped), tuple(self.unreadable), self.live,
                           tuple(self.nested))


def _sweep_run(objects: Objects, run_prefix: str, cutoff: float, dry_run: bool, tally: _Tally) -> None:
    uploads = objects.uploads(run_prefix)  # before the objects: an upload completing in between shows as an object
    items = list(objects.listing(run_prefix))
    nested = nested_prefixes(run_prefix, items)
    tally.nested.extend(nested)
    items = outside_nested(items, nested)
    uploads = [u for u in uploads if not u.key.startswith(tuple(nested))] if nested else uploads
    referenced, unreadable = _referenced(objects, run_prefix, items)
    tally.unreadable.extend(unreadable)
    kept = tuple(run_prefix + key[len(run_prefix):].split("/", 1)[0] + "/" for key in unreadable)  # whole results
    uploads = [u for u in uploads if not u.key.startswith(kept)]
    live = _abort_idle(objects, run_prefix, uploads, cutoff, dry_run, tally)
    if any(i.key[len(run_prefix):].startswith("_holds/") for i in items):
        tally.skipped.append(run_prefix)
        return
    doomed = _sweepable(run_prefix, [i for i in items if not i.key.startswith(kept)], referenced, live, cutoff)
    tally.deleted += len(doomed) if dry_run else objects.delete(doomed)


def _abort_idle(objects: Objects, base: str, uploads: list[Upload], cutoff: float, dry_run: bool,
                tally: _Tally) -> set[str]:
    """Abort the uploads last active before ``cutoff``; return the writer groups (relative to ``base``) of the
    others, which are live."""
    live: set[str] = set()
    for upload in uploads:
        if upload.initiated >= cutoff or objects.last_activity(upload) >= cutoff:
            rel = upload.key[len(base):]
            match = _DATA.match(rel)
            live.add(match.group(1) if match else rel)
            tally.live += 1
            continue
        if not dry_run:
            objects.abort_upload(upload.key, upload.upload_id)
        tally.aborted += 1
    return live


def _sweepable(run_prefix: str, items: list[Listed], referenced: set[str], live: set[str],
               cutoff: float) -> list[str]:
    groups: dict[str, list[Listed]] = {}
    for item in items:
        rel = item.key[len(run_prefix):]
        if _MANIFEST.match(rel) or _RETIRED.match(rel) or _META.match(rel) or rel in referenced:
            continue
        match = _DATA.match(rel)
        groups.setdefault(match.group(1) if match else rel, []).append(item)
    return [i.key for name, group in groups.items()
            if name not in live and max(i.modified for i in group) < cutoff for i in group]


def _referenced(objects: Objects, run_prefix: str, items: list[Listed]) -> tuple[set[str], list[str]]:
    """The object keys (relative) the run's manifests reference, and the keys of manifests that cannot be read."""
    referenced: set[str] = set()
    unreadable: list[str] = []
    for item in items:
        if _MANIFEST.match(item.key[len(run_prefix):]):
            body = objects.get(item.key)
            if body is None:
                continue
            try:
                referenced.update(o.key for o in Manifest.from_json(body, where=item.key).objects)
            except ManifestError:
                unreadable.append(item.key)
    return referenced, unreadable

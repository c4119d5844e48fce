"""The shared result registry (Flink's SharedStateRegistry), *derived*: which shared objects the retained
manifests reference, how many manifests reference each, and the sweep of the shared objects nobody references.

Rules:

* **Derivation** (:func:`derive_registry`): the registry is never stored — it is the union of the shared objects
  listed by every manifest under ``<prefix>/v1/`` (every DAG, run, result, partition and attempt), each manifest
  holding one reference to each object it lists; so does every *announcement* a writer creates before it puts an
  object (``data/P/A-<writer>/uses-<h>.ref``, found by the same LIST), until the run-scoped sweep removes the
  writer's prefix — after its commit (the manifest then holds the references) or once the writer has been idle
  for longer than the grace, like any uncommitted attempt. A long Spark job's early objects are thus never
  taken for garbage before its manifest lists them. A completed *checkpoint* manifest
  (``_checkpoints.v1/<step>/P/c<seq>.json``, :mod:`..checkpoint_manifest`) holds one reference to each object it lists,
  exactly like a result manifest (Flink: "the shared state registry tracks the number of checkpoints that
  reference a shared file"; dropping a checkpoint deletes its manifest).
  Retention (:func:`.lifecycle.apply_retention`, the settings
  ``store_keep_last_runs`` / ``store_keep_days``) decides which manifests are retained by releasing the others, so
  there is no second source of truth to corrupt, and the registry's recovery after any crash is the derivation
  itself. Superseded and retired attempts' manifests hold their references too, until their run is released: the
  failover loop compares re-produced results with retired *checksums* and never reads retired data, but keeping
  them costs nothing extra in the common case (a restart re-producing the same bytes lists the same objects) and
  spares a special case whose mistakes would lose data. A manifest this version cannot read makes the registry
  incomplete (:attr:`Registry.complete`): then no shared object is deleted. Another deployment's prefix nested in
  ours is never entered.
* **Sweep** (:func:`sweep_shared`), after retention has released manifests: a shared object is deleted only when
  the registry derived in this sweep does not list it, a HEAD right before its DELETE shows it older than the grace
  ``G`` by the server's clock (the HEAD's ``Date`` minus its last-modified time), the derivation began less than
  ``G/4`` before that HEAD and the DELETE follows the HEAD within :data:`HEAD_TO_DELETE_SECONDS` on this process's
  monotonic clock (:mod:`..content` shows why this cannot delete an object a committing writer is about to list, and
  what remains); otherwise it is left for the next sweep. Deletions happen one object at a time, only after the
  manifests that dropped them are gone: a sweeper killed at any point loses nothing referenced and leaves at
  worst garbage, which the next sweep removes. Objects moved to the quarantine (:func:`..content.quarantine`) are
  deleted once older than the grace.
* **A window too short says so**: when deriving the registry takes ``G/4`` or more (about 180,000 manifests at
  ``G`` = 15 min), no unreferenced object can be deleted at all; the sweep then logs a warning naming the time the
  derivation took and the grace that would let it delete (``SharedSweep.window_closed``), and ``region-failover
  gc`` exits non-zero, instead of keeping every garbage object silently, sweep after sweep.
"""

from __future__ import annotations

import logging
import re
import time
from collections import Counter
from collections.abc import Iterable, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

from airflow_region_failover.exceptions import ManifestError
from airflow_region_failover.store.checkpoint_manifest import CheckpointManifest
from airflow_region_failover.store.deployment import nested_prefixes, outside_nested
from airflow_region_failover.store.keys import CHECKPOINTS, PARTITION_PART, Layout
from airflow_region_failover.store.manifest import Manifest
from airflow_region_failover.store.s3.objects import Listed, Objects

log = logging.getLogger(__name__)

WINDOW_SHARE = 0.25
"""A shared object is deleted only within ``WINDOW_SHARE * grace`` of the start of the derivation that judged it."""
HEAD_TO_DELETE_SECONDS = 1.0
"""A DELETE is sent only this soon after the HEAD that judged the object (else it is judged again next sweep)."""

_MANIFEST_KEY = re.compile(rf"[^/]+/[^/]+/[^/]+/manifests/{PARTITION_PART}/a\d{{6}}\.json\Z")
_CHECKPOINT_KEY = re.compile(rf"[^/]+/[^/]+/{re.escape(CHECKPOINTS)}/[^/]+/{PARTITION_PART}/c\d{{6}}\.json\Z")
_SHARED_KEY = re.compile(r"([0-9a-f]{2})/(\1[0-9a-f]{62})\.parquet\Z")
_ANNOUNCEMENT = re.compile(rf"[^/]+/[^/]+/[^/]+/data/{PARTITION_PART}/a\d{{6}}-[0-9a-f]+/uses-([0-9a-f]{{64}})\.ref\Z")


@dataclass(frozen=True)
class Registry:
    """The derived registry: ``references`` (SHA-256 of a shared object -> how many manifests list it), how many
    manifests were read, the keys of those that could not be read, and when the derivation started."""

    references: Mapping[str, int]
    manifests: int
    unreadable: tuple[str, ...] = ()
    started: float = 0.0
    announced: frozenset[str] = frozenset()

    @property
    def complete(self) -> bool:
        """Whether every manifest could be read (only then may an unlisted object be deleted)."""
        return not self.unreadable

    def referenced(self, sha256: str) -> bool:
        """Whether some retained manifest lists the shared object ``sha256``, or a writer announced it."""
        return self.references.get(sha256, 0) > 0 or sha256 in self.announced


def count_references(manifests: Iterable[Manifest | CheckpointManifest]) -> Counter[str]:
    """The reference count of each shared object: the number of ``manifests`` listing it (once per manifest)."""
    counts: Counter[str] = Counter()
    for manifest in manifests:
        listed = manifest.objects() if isinstance(manifest, CheckpointManifest) else manifest.objects
        counts.update({entry.sha256 for entry in listed if entry.shared})
    return counts


def scan_root(root: str, items: Iterable[Listed]) -> tuple[list[str], frozenset[str]]:
    """The manifest keys (result and checkpoint manifests) and the announced hashes among ``items`` listed under
    ``root``, outside nested deployments."""
    listed = list(items)
    kept = outside_nested(listed, nested_prefixes(root, listed))
    manifests = [item.key for item in kept if _MANIFEST_KEY.match(item.key[len(root):])
                 or _CHECKPOINT_KEY.match(item.key[len(root):])]
    announced = {m.group(1) for item in kept if (m := _ANNOUNCEMENT.match(item.key[len(root):]))}
    return manifests, frozenset(announced)


def derive_registry(objects: Objects, layout: Layout, threads: int = 16) -> Registry:
    """Derive the registry (module rule): one LIST of the results' root, then every manifest GET in parallel."""
    started = time.time()
    root = layout.root + "/"
    keys, announced = scan_root(root, objects.listing(root))

    def load(key: str) -> Manifest | CheckpointManifest | str | None:
        body = objects.get(key)
        if body is None:
            return None  # released meanwhile: it holds nothing any more
        try:
            if _CHECKPOINT_KEY.match(key[len(root):]):
                return CheckpointManifest.from_json(body, where=key)
            return Manifest.from_json(body, where=key)
        except ManifestError:
            return key

    with ThreadPoolExecutor(max_workers=max(1, threads)) as pool:
        loaded = list(pool.map(load, keys))
    manifests = [m for m in loaded if isinstance(m, (Manifest, CheckpointManifest))]
    unreadable = tuple(m for m in loaded if isinstance(m, str))
    return Registry(dict(count_references(manifests)), len(manifests), unreadable, started, announced)


@dataclass(frozen=True)
class SharedSweep:
    """What a sweep of the shared area did: objects deleted, kept because referenced, left for a later sweep
    (younger than the grace, or the window ran out), whether it was skipped (registry incomplete), how long the
    derivation took and whether the window closed before every candidate was judged (module rule), and how many
    quarantined objects it deleted."""

    deleted: int = 0
    referenced: int = 0
    deferred: int = 0
    manifests: int = 0
    skipped_incomplete: bool = False
    nested_deployments: tuple[str, ...] = ()
    derivation_seconds: float = 0.0
    window_closed: bool = False
    quarantine_deleted: int = 0


def shared_objects(objects: Objects, layout: Layout) -> tuple[list[tuple[str, Listed]], tuple[str, ...],
                                                              list[Listed]]:
    """Every shared object as ``(sha256, listed)``, other deployments' prefixes found nested in the area, and the
    objects in quarantine."""
    area = layout.cas_root + "/"
    listed = list(objects.listing(area))
    nested = nested_prefixes(area, listed)
    found, quarantined = [], []
    for item in outside_nested(listed, nested):
        match = _SHARED_KEY.match(item.key[len(area):])
        if match:
            found.append((match.group(2), item))
        elif item.key.startswith(layout.quarantine_root + "/"):
            quarantined.append(item)
    return found, nested, quarantined


def sweep_shared(objects: Objects, layout: Layout, grace_seconds: float, now: float | None = None,
                 dry_run: bool = False) -> SharedSweep:
    """Delete the shared objects no retained manifest lists and older than ``grace_seconds`` (module rule), and
    the quarantined ones older than it.

    ``now``: pretend the clock is ``now - time.time()`` ahead of the server's (tests); windows are measured on the
    monotonic clock.
    """
    offset = 0.0 if now is None else now - time.time()
    began = time.monotonic()
    registry = derive_registry(objects, layout)
    derived = time.monotonic() - began
    found, nested, quarantined = shared_objects(objects, layout)
    skew = objects.clock() - time.time()  # the server's clock, as seen from here
    old = [i.key for i in quarantined if i.modified < time.time() + skew + offset - grace_seconds]
    cleared = len(old) if dry_run else objects.delete(old)
    if not registry.complete:
        return SharedSweep(manifests=registry.manifests, skipped_incomplete=True, nested_deployments=nested,
                           derivation_seconds=derived, quarantine_deleted=cleared)
    window = Window(began, WINDOW_SHARE * grace_seconds)
    deleted = deferred = referenced = 0
    for sha, item in found:
        if registry.referenced(sha):
            referenced += 1
        elif item.modified >= time.time() + skew + offset - grace_seconds:
            deferred += 1
        elif _delete_if_idle(objects, item.key, grace_seconds, offset, window, dry_run):
            deleted += 1
        else:
            deferred += 1
    if window.missed:
        _warn_window(layout, registry.manifests, derived, grace_seconds, window.missed)
    return SharedSweep(deleted, referenced, deferred, registry.manifests, False, nested, derived,
                       bool(window.missed), cleared)


@dataclass
class Window:
    """The time, from the derivation's start ``began`` (monotonic), within which objects may be deleted; counts the
    candidates it was closed for."""

    began: float
    seconds: float
    missed: int = 0

    def open(self) -> bool:
        """Whether a deletion may still happen (else one more candidate missed it)."""
        if time.monotonic() - self.began < self.seconds:
            return True
        self.missed += 1
        return False


def _delete_if_idle(objects: Objects, key: str, grace_seconds: float, offset: float, window: Window,
                    dry_run: bool) -> bool:
    """HEAD ``key`` and DELETE it right away if it is still older than the grace by the server's clock, the window
    is open and the HEAD was at most :data:`HEAD_TO_DELETE_SECONDS` ago (module rule)."""
    if not window.open():
        return False
    sent = time.monotonic()
    current = objects.stat(key)
    if current is None or current.modified >= current.now + offset - grace_seconds:
        return False
    if time.monotonic() - sent > HEAD_TO_DELETE_SECONDS or not window.open():
        return False
    if not dry_run:
        objects.delete([key])
    return True


def _warn_window(layout: Layout, manifests: int, derived: float, grace_seconds: float, missed: int) -> None:
    needed = max(grace_seconds, derived / WINDOW_SHARE * 1.5)
    log.warning("shared sweep of s3://%s/%s: deriving the registry from %d manifests took %.0f s of the %.0f s "
                "(grace/4) within which an unreferenced object may be deleted, so %d of them were kept; sweep with "
                "a grace of at least %d min (region-failover gc --grace '%d min') or retain fewer manifests "
                "(store_keep_last_runs / store_keep_days)", layout.bucket, layout.cas_root, manifests, derived,
                WINDOW_SHARE * grace_seconds, missed, -(-needed // 60), -(-needed // 60))

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
  (``_checkpoints.v1/<step>/P/c<seq>.json``, :mod:`.checkpoints`) holds one reference to each object it lists,
  exactly like a result manifest (seed 003: "the shared state registry tracks the number of checkpoints that
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
  ``G``, and the derivation began less than ``G/4`` before that HEAD (:mod:`.content` shows why this cannot delete
  an object a committing writer is about to list); otherwise it is left for the next sweep. Deletions happen one
  object at a time, only after the manifests that dropped them are gone: a sweeper killed at any point loses
  nothing referenced and leaves at worst garbage, which the next sweep removes.
"""

from __future__ import annotations

import re
import time
from collections import Counter
from collections.abc import Iterable, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

from airflow_region_failover.exceptions import ManifestError
from airflow_region_failover.store.checkpoints import CheckpointManifest
from airflow_region_failover.store.deployment import nested_prefixes, outside_nested
from airflow_region_failover.store.keys import CHECKPOINTS, PARTITION_PART, Layout
from airflow_region_failover.store.manifest import Manifest
from airflow_region_failover.store.objects import Listed, Objects

WINDOW_SHARE = 0.25
"""A shared object is deleted only within ``WINDOW_SHARE * grace`` of the start of the derivation that judged it."""

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
    (younger than the grace, or the window ran out), and whether it was skipped (registry incomplete)."""

    deleted: int = 0
    referenced: int = 0
    deferred: int = 0
    manifests: int = 0
    skipped_incomplete: bool = False
    nested_deployments: tuple[str, ...] = ()


def shared_objects(objects: Objects, layout: Layout) -> tuple[list[tuple[str, Listed]], tuple[str, ...]]:
    """Every shared object as ``(sha256, listed)``, and other deployments' prefixes found nested in the area."""
    area = layout.cas_root + "/"
    listed = list(objects.listing(area))
    nested = nested_prefixes(area, listed)
    found = []
    for item in outside_nested(listed, nested):
        match = _SHARED_KEY.match(item.key[len(area):])
        if match:
            found.append((match.group(2), item))
    return found, nested


def sweep_shared(objects: Objects, layout: Layout, grace_seconds: float, now: float | None = None,
                 dry_run: bool = False) -> SharedSweep:
    """Delete the shared objects no retained manifest lists and older than ``grace_seconds`` (module rule).

    ``now``: pretend the clock reads this at the start (tests); the window is measured on the real clock.
    """
    offset = 0.0 if now is None else now - time.time()
    registry = derive_registry(objects, layout)
    found, nested = shared_objects(objects, layout)
    if not registry.complete:
        return SharedSweep(manifests=registry.manifests, skipped_incomplete=True, nested_deployments=nested)
    deadline = registry.started + WINDOW_SHARE * grace_seconds
    deleted = deferred = referenced = 0
    for sha, item in found:
        if registry.referenced(sha):
            referenced += 1
        elif item.modified >= time.time() + offset - grace_seconds:
            deferred += 1
        elif _delete_if_idle(objects, item.key, grace_seconds, offset, deadline, dry_run):
            deleted += 1
        else:
            deferred += 1
    return SharedSweep(deleted, referenced, deferred, registry.manifests, False, nested)


def _delete_if_idle(objects: Objects, key: str, grace_seconds: float, offset: float, deadline: float,
                    dry_run: bool) -> bool:
    """HEAD ``key`` and DELETE it right away if it is still older than the grace and the window is open."""
    if time.time() >= deadline:
        return False
    current = objects.head(key)
    if current is None or current.modified >= time.time() + offset - grace_seconds:
        return False
    if not dry_run:
        objects.delete([key])
    return True

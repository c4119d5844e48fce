"""Availability: is a result partition's current committed version there to be read again?

Rules: *fast* mode trusts the manifest alone — the partition has a current version by the reader rule of
:mod:`.commit` (a committed manifest above the fence). *deep* mode also loads that manifest and requires every
object it lists to be present with the recorded size (by one LIST of the data prefix, or one HEAD per object —
``probe``; a shared, content-addressed object always by a HEAD), and with ``verify_checksums`` re-reads every
object and compares its SHA-256. Partitions the failure names as unavailable are unavailable whatever S3 says;
that naming lives in one checker and does not persist.
"""

from __future__ import annotations

from collections.abc import Iterable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from enum import Enum

from airflow_region_failover.exceptions import ManifestError, NotAvailable
from airflow_region_failover.graph.ids import PartitionId
from airflow_region_failover.store.commit import PartitionState, load_manifest, scan_result
from airflow_region_failover.store.keys import RunKeys, check_partition
from airflow_region_failover.store.manifest import Manifest
from airflow_region_failover.store.objects import Objects


class Mode(str, Enum):
    """``fast``: committed manifest only; ``deep``: manifest plus every object's presence and size."""

    FAST = "fast"
    DEEP = "deep"


class Probe(str, Enum):
    """How deep mode finds object sizes: ``list`` (one LIST per result, cached) or ``head`` (HEAD per object)."""

    LIST = "list"
    HEAD = "head"


def object_problems(objects: Objects, keys: RunKeys, manifest: Manifest, sizes: dict[str, int] | None,
                    verify_checksums: bool) -> list[str]:
    """What is wrong with the manifest's objects (empty list: all present with recorded size/checksum)."""
    problems = []
    for entry in manifest.objects:
        key = keys.object_key(entry.key, entry.shared)
        size = sizes.get(key) if sizes is not None and not entry.shared else objects.head_size(key)
        if size is None:
            problems.append(f"{key} is missing")
        elif size != entry.size:
            problems.append(f"{key} has {size} bytes, manifest says {entry.size}")
        elif verify_checksums and objects.sha256(key) != entry.sha256:  # streamed: never the whole object at once
            problems.append(f"{key} does not match its SHA-256")
    return problems


@dataclass
class _ResultCache:
    states: dict[int, PartitionState]
    sizes: dict[str, int] | None = None
    manifests: dict[int, Manifest | str] = field(default_factory=dict)  # str: why it could not be loaded


class StoreAvailabilityChecker:
    """The core's availability checker for one DAG run: ``is_available(PartitionId) -> bool``.

    A snapshot: the first question about a result lists it once (two LISTs) and caches the answer, so one
    restart decision sees one consistent view and costs O(results) LISTs in fast mode. In deep mode with
    ``batch`` (default) the first question about a result also fetches all its current manifests in parallel and
    (``probe=list``) lists its whole data prefix once; without ``batch`` each partition costs one manifest GET
    plus one LIST of its version's prefix (or HEADs) — cheaper when asking about one partition of a big result.
    """

    def __init__(self, objects: Objects, keys: RunKeys, mode: Mode | str = Mode.FAST, *,
                 verify_checksums: bool = False, probe: Probe | str = Probe.LIST,
                 unavailable: Iterable[PartitionId] = (), batch: bool = True, threads: int = 8) -> None:
        self._objects, self._keys = objects, keys
        self.mode, self.probe = Mode(mode), Probe(probe)
        self.verify_checksums, self.batch, self.threads = verify_checksums, batch, threads
        self.unavailable = frozenset(check_partition(p) for p in unavailable)
        self._cache: dict[str, _ResultCache] = {}

    def is_available(self, partition: PartitionId) -> bool:
        """True iff ``partition`` has a current committed version passing this checker's mode."""
        return not self.why_unavailable(partition)

    def why_unavailable(self, partition: PartitionId) -> str:
        """Empty if available, else the reason (for the failover history)."""
        check_partition(partition)
        if partition in self.unavailable:
            return f"{partition} is named unavailable by the failure"
        cache = self._result(partition.result)
        state = cache.states.get(partition.index)
        if state is None or state.current is None:
            return f"{partition} has no current committed version"
        if self.mode is Mode.FAST:
            return ""
        return self._deep_problem(cache, partition, state.current)

    def _result(self, result: str) -> _ResultCache:
        cache = self._cache.get(result)
        if cache is None:
            cache = _ResultCache(scan_result(self._objects, self._keys, result))
            self._cache[result] = cache
        return cache

    def _deep_problem(self, cache: _ResultCache, partition: PartitionId, attempt: int) -> str:
        if self.batch and not cache.manifests:
            self._prefetch(cache)
        if partition.index not in cache.manifests:
            cache.manifests[partition.index] = self._load(partition, attempt)
        manifest = cache.manifests[partition.index]
        if isinstance(manifest, str):
            return manifest
        problems = object_problems(self._objects, self._keys, manifest, self._sizes(cache, manifest),
                                   self.verify_checksums)
        return f"{partition}: " + "; ".join(problems) if problems else ""

    def _load(self, partition: PartitionId, attempt: int) -> Manifest | str:
        try:
            manifest = load_manifest(self._objects, self._keys, partition, attempt)
        except (ManifestError, NotAvailable) as exc:
            return str(exc)
        return manifest if manifest is not None else f"{partition}: manifest of attempt {attempt} vanished"

    def _prefetch(self, cache: _ResultCache) -> None:
        current = [(s.partition, s.current) for s in cache.states.values() if s.current is not None]
        with ThreadPoolExecutor(max_workers=self.threads) as pool:
            loaded = pool.map(lambda pa: self._load(pa[0], pa[1]), current)
            cache.manifests.update({p.index: m for (p, _), m in zip(current, loaded, strict=True)})

    def _sizes(self, cache: _ResultCache, manifest: Manifest) -> dict[str, int] | None:
        if self.probe is Probe.HEAD:
            return None
        if not self.batch:
            prefix = self._keys.attempt_data(manifest.partition, manifest.attempt, manifest.writer)
            return {item.key: item.size for item in self._objects.listing(prefix)}
        if cache.sizes is None:
            prefix = self._keys.data_prefix(manifest.partition.result)
            cache.sizes = {item.key: item.size for item in self._objects.listing(prefix)}
        return cache.sizes

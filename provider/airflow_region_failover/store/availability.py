"""Availability: is a result partition's current committed version there to be read again?

Rules: *fast* mode trusts the manifest alone — the partition has a current version by the reader rule of
:mod:`.commit` (a committed manifest above the fence). *deep* mode also loads that manifest and requires every
object it lists to be intact: a shared, content-addressed object by a HEAD that compares its size and the SHA-256
the server keeps with it (:func:`.content.check_stored`; where the server keeps none, the size), and not marked
suspect by a reader whose GET of it failed (:func:`.content.suspects`, one LIST per checker); a run-scoped
object of an older manifest by its size (one LIST of the data prefix, or one HEAD per object — ``probe``); with
``verify_checksums`` every object is also re-read and hashed. Each object is checked once per checker, however
many partitions list it, at most ``threads`` at a time. A check only reports: the producer's restart it leads to
finds the object wrong where it would reuse it, moves it aside and writes it again (:mod:`.content`).
``reads``: what the failed subtask read (:class:`Read`, :func:`reads_of`) — those partitions are judged by exactly
the objects it read (over a keyed edge its subpartitions), all of them verified in one parallel batch at the first
deep question. Partitions the failure names as unavailable are unavailable whatever S3 says; that naming lives in
one checker and does not persist.
"""

from __future__ import annotations

from collections.abc import Iterable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from enum import Enum

from airflow_region_failover.exceptions import ManifestError, NotAvailable
from airflow_region_failover.graph.ids import PartitionId, SubtaskId
from airflow_region_failover.graph.model import Exchange, JobGraph
from airflow_region_failover.graph.subtasks import consumed_partitions, read_key_groups
from airflow_region_failover.store.commit import PartitionState, load_manifest, scan_result
from airflow_region_failover.store.content import check_stored, suspects
from airflow_region_failover.store.key_checks import check_partition
from airflow_region_failover.store.keys import RunKeys
from airflow_region_failover.store.manifest import Manifest, ObjectEntry
from airflow_region_failover.store.s3.objects import Objects


class Mode(str, Enum):
    """``fast``: committed manifest only; ``deep``: manifest plus every object's presence, size and checksum."""

    FAST = "fast"
    DEEP = "deep"


class Probe(str, Enum):
    """How deep mode finds the sizes of run-scoped objects: ``list`` (one LIST per result, cached) or ``head``."""

    LIST = "list"
    HEAD = "head"


@dataclass(frozen=True)
class Read:
    """What a subtask reads of one partition: every object, or (``key_groups``) those of its subpartitions over a
    keyed edge (``partition_by``, ``max_parallelism``; :meth:`.manifest.Manifest.select`)."""

    partition: PartitionId
    key_groups: range | None = None
    partition_by: tuple[str, ...] = ()
    max_parallelism: int = 0

    def objects(self, manifest: Manifest) -> tuple[ObjectEntry, ...]:
        """The objects of ``manifest`` this read fetches."""
        return manifest.select(self.key_groups, self.partition_by, self.max_parallelism).objects


def reads_of(graph: JobGraph, subtask: SubtaskId) -> tuple[Read, ...]:
    """Every BLOCKING partition ``subtask`` reads, with the key groups it reads of each."""
    reads: list[Read] = []
    for edge, partitions in consumed_partitions(graph, subtask).items():
        if edge.exchange is Exchange.BLOCKING:
            groups = read_key_groups(graph, edge, subtask.index)
            reads.extend(Read(p, groups, edge.partition_by, edge.max_parallelism) for p in partitions)
    return tuple(reads)


class ObjectCheck:
    """Checks objects of manifests (module rule): each key once, at most ``threads`` at a time; remembers what it
    found (a problem per key, empty when intact)."""

    def __init__(self, objects: Objects, keys: RunKeys, verify_checksums: bool, threads: int) -> None:
        self._objects, self._keys = objects, keys
        self.verify_checksums, self.threads = verify_checksums, max(1, threads)
        self.found: dict[str, str] = {}
        self._suspects: frozenset[str] | None = None

    def problems(self, entries: Iterable[ObjectEntry], sizes: dict[str, int] | None = None) -> list[str]:
        """What is wrong with ``entries`` (empty: all intact); ``sizes``: a listing of run-scoped objects."""
        keyed = {self._keys.object_key(e.key, e.shared): e for e in entries}
        todo = {k: e for k, e in keyed.items() if k not in self.found and (e.shared or sizes is None)}
        if todo:
            self._suspected()
            with ThreadPoolExecutor(max_workers=min(self.threads, len(todo))) as pool:
                self.found.update(zip(todo, pool.map(lambda item: self._one(*item), todo.items()), strict=True))
        for key, entry in keyed.items():
            if key not in self.found and sizes is not None:
                size = sizes.get(key)
                self.found[key] = "is missing" if size is None else \
                    f"has {size} bytes, manifest says {entry.size}" if size != entry.size else ""
        return [f"{key} {self.found[key]}" for key in keyed if self.found[key]]

    def _one(self, key: str, entry: ObjectEntry) -> str:
        if entry.shared and entry.sha256 in self._suspected():
            return "is marked suspect: a reader's GET of it failed (its producer's restart overwrites it)"
        verdict = check_stored(self._objects, key, entry)
        if verdict.problem:
            return verdict.problem
        if self.verify_checksums and self._objects.sha256(key) != entry.sha256:  # streamed, never whole in memory
            return "does not match its SHA-256"
        return ""


    def _suspected(self) -> frozenset[str]:
        if self._suspects is None:  # one LIST per checker, before its threads start (the first batch's caller)
            self._suspects = suspects(self._objects, self._objects.layout)
        return self._suspects


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
    Objects are checked by one :class:`ObjectCheck` (module rule).
    """

    def __init__(self, objects: Objects, keys: RunKeys, mode: Mode | str = Mode.FAST, *,
                 verify_checksums: bool = False, probe: Probe | str = Probe.LIST,
                 unavailable: Iterable[PartitionId] = (), batch: bool = True, threads: int = 16,
                 reads: Iterable[Read] = ()) -> None:
        self._objects, self._keys = objects, keys
        self.mode, self.probe = Mode(mode), Probe(probe)
        self.verify_checksums, self.batch, self.threads = verify_checksums, batch, threads
        self.unavailable = frozenset(check_partition(p) for p in unavailable)
        self.reads = {check_partition(r.partition): r for r in reads}
        self._check = ObjectCheck(objects, keys, verify_checksums, threads)
        self._cache: dict[str, _ResultCache] = {}
        self._reads_checked = False

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
        self._check_reads()
        manifest = self._manifest(cache, partition, state.current)
        if isinstance(manifest, str):
            return manifest
        problems = self._check.problems(self._objects_of(manifest), self._sizes(cache, manifest))
        return f"{partition}: " + "; ".join(problems) if problems else ""

    def _objects_of(self, manifest: Manifest) -> tuple[ObjectEntry, ...]:
        read = self.reads.get(manifest.partition)
        return manifest.objects if read is None else read.objects(manifest)

    def _check_reads(self) -> None:
        """Verify every object the failed subtask read, in one parallel batch (module rule), once."""
        if self._reads_checked or not self.reads:
            return
        self._reads_checked = True
        entries: list[ObjectEntry] = []
        for partition in self.reads:
            cache = self._result(partition.result)
            state = cache.states.get(partition.index)
            if state is not None and state.current is not None:
                manifest = self._manifest(cache, partition, state.current)
                if isinstance(manifest, Manifest):
                    entries.extend(e for e in self._objects_of(manifest) if e.shared)
        self._check.problems(entries)

    def _result(self, result: str) -> _ResultCache:
        cache = self._cache.get(result)
        if cache is None:
            cache = _ResultCache(scan_result(self._objects, self._keys, result))
            self._cache[result] = cache
        return cache

    def _manifest(self, cache: _ResultCache, partition: PartitionId, attempt: int) -> Manifest | str:
        if self.batch and not cache.manifests:
            self._prefetch(cache)
        if partition.index not in cache.manifests:
            cache.manifests[partition.index] = self._load(partition, attempt)
        return cache.manifests[partition.index]

    def _load(self, partition: PartitionId, attempt: int) -> Manifest | str:
        try:
            manifest = load_manifest(self._objects, self._keys, partition, attempt)
        except (ManifestError, NotAvailable) as exc:
            return str(exc)
        return manifest if manifest is not None else f"{partition}: manifest of attempt {attempt} vanished"

    def _prefetch(self, cache: _ResultCache) -> None:
        current = [(s.partition, s.current) for s in cache.states.values() if s.current is not None]
        with ThreadPoolExecutor(max_workers=max(1, min(self.threads, len(current) or 1))) as pool:
            loaded = pool.map(lambda pa: self._load(pa[0], pa[1]), current)
            cache.manifests.update({p.index: m for (p, _), m in zip(current, loaded, strict=True)})

    def _sizes(self, cache: _ResultCache, manifest: Manifest) -> dict[str, int] | None:
        if self.probe is Probe.HEAD or all(e.shared for e in manifest.objects):
            return None
        if not self.batch:
            prefix = self._keys.attempt_data(manifest.partition, manifest.attempt, manifest.writer)
            return {item.key: item.size for item in self._objects.listing(prefix)}
        if cache.sizes is None:
            prefix = self._keys.data_prefix(manifest.partition.result)
            cache.sizes = {item.key: item.size for item in self._objects.listing(prefix)}
        return cache.sizes

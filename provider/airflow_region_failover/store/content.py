"""Content-addressed data objects: store one encoded body under the name of its hash, upload nothing if the right
bytes are already there, move a wrong object aside, and confirm before a commit that every shared object a
manifest lists is there, intact and fresh.

Rules:

* **Put** (:func:`put_content`): an object's key is ``<prefix>/cas/v1/<h[:2]>/<h>.parquet``, ``h`` = SHA-256 of its
  bytes (:meth:`.keys.Layout.cas_object`). A body of at most :data:`SINGLE_PUT_BYTES` (every object the writers cut)
  goes up with a create-only PUT (``If-None-Match: *``) carrying its SHA-256 as the S3 checksum: the server refuses
  a body that does not match and keeps the checksum with the object, which is what a reader that does not hash the
  bytes itself checks (Spark's own reader, :mod:`.dataplane.reading`). A larger body is streamed as a multipart upload,
  visible only when complete (a concurrent writer of the same key writes the same bytes, so whichever completes last
  changes nothing). The caller learns whether bytes went up (:class:`Stored`), so each write reports bytes uploaded
  vs reused, and how long hashing and storing took (the task's timeline, :mod:`~airflow_region_failover.timeline`).
* **Trust only what was checked** (:func:`check_stored`). An object found under ``h`` — the PUT's 412, the HEAD
  before a multipart upload — is reused only if it has the body's size and the SHA-256 the server keeps with it
  is ``h``; where the server keeps a CRC32 instead (an object put by a plain SDK call over ours), the writer, who
  holds the bytes, compares that. Where it keeps neither (an object uploaded before this rule, a multipart
  upload, a server without checksums) the size is all a writer can compare, and readers, which hash every byte
  they read (:mod:`.dataplane.reading`), find the rest.
* **Quarantine** (:func:`quarantine`): whoever finds other bytes (or another size) under ``h`` — a reader, the
  committer, a writer's put — moves the object aside to
  ``<prefix>/cas/v1/quarantine/<h>-<t>.parquet`` (only while it is still the object it found: ``If-Match`` on its
  ETag) and logs it, so the next put of those bytes writes them again. A reader's error names the partition
  (:func:`~airflow_region_failover.exceptions.unreadable`), the failover loop restarts its producer, and the
  producer's put heals the object for every run that lists it: a corrupted shared object counts as lost.
* **Suspect** (:func:`mark_suspect`): an object the server lists and HEADs but cannot serve (a GET answered 5xx
  after botocore's retries: a self-hosted server that finds a disk CRC error on read) often cannot be moved aside
  either (the copy reads it), so the reader leaves an empty mark ``<prefix>/cas/v1/quarantine/<h>.suspect``
  instead and names the partition. The deep check counts a marked object lost (:func:`suspects`, one LIST), and a
  put that finds the object present reuses it only if it is not marked and its first byte is served (a ranged
  GET); otherwise it overwrites it unconditionally — bytes that hash to the name are always safe to overwrite, a
  concurrent writer of the same key writes the same bytes — and removes the mark. gc sweeps a mark older than the
  grace like a quarantined object (a reader that still cannot read the object marks it again).
* **Freshness** (the race with the sweeper; git's *freshen* rule). A writer that found an object present may be
  about to list an object the sweeper has judged garbage. Writers know the grace floor ``G0`` (the store's
  ``min_grace_seconds``: ``[region_failover] store_min_grace_seconds``, 15 min by default); the sweeper uses a
  grace ``G >= G0``. Every age is the server's clock minus the object's last-modified time (both the server's:
  :attr:`.s3.objects.Stat.now`), so no clock of a process is compared with another's. Before the manifest PUT the
  committer confirms every shared object it lists (:func:`confirm_shared`, starting at ``t``): missing, of
  another size or of other bytes -> :class:`IncompleteCommit` (nothing committed; the retried task uploads it
  again); older than ``G0/2`` -> refreshed by a server-side copy onto itself. The PUT is issued by ``t + G0/8``
  (:data:`COMMIT_SHARE`; later: confirm again) and must land by ``t + G0/4``; the committer measures that on
  its monotonic clock until the PUT's answer, and when the answer came later it confirms every object again
  *after* the manifest landed and withdraws its commit (retires its own attempt) if one is gone
  (:mod:`.commit`). The sweeper (:mod:`.gc.registry`) derives the references starting at ``d``, then HEADs each
  unreferenced candidate at ``s < d + G/4`` and DELETEs it only if its last-modified ``m < s - G`` and the DELETE
  follows the HEAD within :data:`.gc.registry.HEAD_TO_DELETE_SECONDS` (else it judges the object again next sweep).
  Safety: suppose the manifest, visible at ``v``, was missed by the derivation (``v > d``). If the committer's
  check came after the HEAD, it came after the DELETE and saw the object missing. Otherwise ``m >= t - G0/2 >=
  t - G/2`` and ``m < s - G``, so ``s - t > G/2``; but ``s < d + G/4 < v + G/4 <= t + G0/4 + G/4 <= t + G/2``: a
  contradiction (a late landing, ``v > t + G0/4``, is caught by the confirmation after it). What remains is a
  committer refreshing the object inside the sweeper's bounded HEAD->DELETE gap: its manifest then lists a missing
  object, which every reader and the deep check report as the partition being unavailable, so its producer is
  restarted and writes it again — the same path as any lost object. Run one sweeper at a time.
"""

from __future__ import annotations

import base64
import contextlib
import hashlib
import logging
import time
import zlib
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field

from airflow_region_failover import conf
from airflow_region_failover.exceptions import AlreadyCommitted, IncompleteCommit, StoreError
from airflow_region_failover.store.key_checks import cas_name
from airflow_region_failover.store.keys import Layout
from airflow_region_failover.store.manifest import ObjectEntry
from airflow_region_failover.store.s3.objects import Objects, Stat
from airflow_region_failover.store.s3.upload import UploadStream

log = logging.getLogger(__name__)

MIN_GRACE_SECONDS = float(conf.declared_default("store_min_grace_seconds"))
"""The grace floor ``G0`` writers assume and the shortest grace a sweep accepts, by default (15 min: longer than
any live writer is silent; module rule); a deployment sets it with ``[region_failover] store_min_grace_seconds``
(:attr:`.config.StoreConfig.min_grace_seconds`)."""
FRESH_SHARE = 0.5
"""A shared object older than ``FRESH_SHARE * G0`` is refreshed before a manifest listing it is committed."""
SINGLE_PUT_BYTES = 5 * 1024 ** 3
"""The largest body stored with one create-only PUT carrying its SHA-256 (S3's single-PUT limit); a larger one is a
multipart upload, whose checksum S3 keeps only per part (its readers hash it themselves)."""
COMMIT_SHARE = 0.125
"""The manifest PUT must be issued within ``COMMIT_SHARE * G0`` of the confirmation."""
LAND_SHARE = 0.25
"""...and land within ``LAND_SHARE * G0`` of it; a later answer makes the committer confirm again after it."""


@dataclass(frozen=True)
class Stored:
    """One stored body: its manifest entry and whether its bytes were uploaded now (``False``: already there);
    ``hash_s``/``upload_s``: seconds spent hashing it and storing it (the requests, whether or not bytes went up)."""

    entry: ObjectEntry
    uploaded: bool
    hash_s: float = field(default=0.0, compare=False)
    upload_s: float = field(default=0.0, compare=False)


@dataclass(frozen=True)
class Verdict:
    """What is stored under an object's key: ``problem`` empty if it is the object (as far as the server can tell),
    else why not; ``found``: its HEAD (``None``: missing)."""

    problem: str
    found: Stat | None

    @property
    def bad(self) -> bool:
        """Another object stands under the key (not merely missing)."""
        return bool(self.problem) and self.found is not None


def check_stored(objects: Objects, key: str, entry: ObjectEntry, body: memoryview | None = None) -> Verdict:
    """Whether ``key`` holds ``entry`` (module rule): its size, and the SHA-256 the server keeps with it when it
    keeps one; given the ``body``, also the CRC32 it keeps instead."""
    found = objects.stat(key)
    if found is None:
        return Verdict("is missing", None)
    if found.size != entry.size:
        return Verdict(f"has {found.size} bytes, its manifest says {entry.size}", found)
    if found.sha256 is not None and found.sha256 != entry.sha256:
        return Verdict(f"holds other bytes than its SHA-256 {entry.sha256[:12]}... (the server keeps the SHA-256 "
                       f"{found.sha256[:12]}... for it)", found)
    if found.sha256 is None and found.crc32 is not None and body is not None and found.crc32 != _crc32(body):
        return Verdict(f"holds other bytes than its SHA-256 {entry.sha256[:12]}... (the CRC32 the server keeps "
                       "for it differs)", found)
    return Verdict("", found)


def _crc32(body: memoryview) -> str:
    """``body``'s CRC32 as S3 sends it (base64 of the big-endian 4 bytes)."""
    return base64.b64encode(zlib.crc32(body).to_bytes(4, "big")).decode()


def quarantine(objects: Objects, layout: Layout, entry: ObjectEntry, etag: str, why: str) -> None:
    """Move the shared object ``entry`` found wrong (``why``) aside, while it is still the object with ``etag``
    (module rule), so the next put of its bytes writes it again; a run-scoped object is left where it is."""
    if not entry.shared or not etag:
        return
    key = layout.cas_object(entry.sha256)
    target = layout.quarantined(entry.sha256, int(time.time()))
    moved = objects.move_aside(key, target, etag)
    log.warning("shared object %s %s: %s", key, why, f"moved aside to {target}; the next put of its bytes writes "
                "them again" if moved else "it was replaced or removed meanwhile")


def mark_suspect(objects: Objects, layout: Layout, entry: ObjectEntry, why: str) -> None:
    """Mark the shared object ``entry``, which the server could not serve (``why``), suspect (module rule), so the
    deep check counts it lost and its next put overwrites it; a run-scoped object is left unmarked (its producer's
    restart writes a new attempt). A mark that cannot be written is logged: the next put's GET probe still finds
    the object unservable."""
    if not entry.shared:
        return
    key, mark = layout.cas_object(entry.sha256), layout.suspect(entry.sha256)
    try:
        objects.put(mark, b"")
    except Exception as exc:  # the reader's error names the partition either way
        log.warning("shared object %s %s; marking it suspect failed too (%s): its next put probes it",
                    key, why, type(exc).__name__)
        return
    log.warning("shared object %s %s: marked suspect (%s); the next put of its bytes overwrites it", key, why, mark)


def suspects(objects: Objects, layout: Layout) -> frozenset[str]:
    """The SHA-256s of every shared object marked suspect (:func:`mark_suspect`; one LIST of the quarantine)."""
    root = layout.quarantine_root + "/"
    return frozenset(item.key[len(root):-len(".suspect")] for item in objects.listing(root)
                     if item.key.endswith(".suspect") and "/" not in item.key[len(root):])


def _unservable(objects: Objects, layout: Layout, key: str, digest: str) -> str:
    """Why the object found intact under ``key`` must not be reused (module rule), or empty."""
    if objects.head_size(layout.suspect(digest)) is not None:
        return "is marked suspect (a reader's GET of it failed)"
    if not objects.servable(key):
        return "is listed and HEADed but a GET of it fails"
    return ""


def _overwrite(objects: Objects, layout: Layout, key: str, view: memoryview, digest: str, why: str,
               part_size: int, threads: int) -> None:
    """Write ``view`` over the object under ``key`` unconditionally (it hashes to the name) and drop its mark."""
    if len(view) <= SINGLE_PUT_BYTES:
        objects.put_replacing(key, bytes(view), digest)
    else:
        with UploadStream(objects, key, part_size, threads) as stream:
            for start in range(0, len(view), part_size):
                stream.write(view[start:start + part_size])
            stream.finish()
    objects.delete([layout.suspect(digest)])
    log.warning("shared object %s %s: overwritten with the bytes that hash to its name", key, why)


def put_content(objects: Objects, layout: Layout, body: bytes | bytearray | memoryview, subpartition: int = -1,
                *, part_size: int = 16 * 1024 * 1024, threads: int = 1,
                announce: Callable[[str], str] | None = None) -> Stored:
    """Store ``body`` (one complete encoded object) content-addressed; uploads nothing if it is there and checked
    (module rule). ``subpartition`` >= 0: the object holds that subpartition of a keyed partition.
    ``announce(sha256)``: the key of an empty marker created first, which holds a reference while the write is
    under way (:meth:`.keys.RunKeys.announcement`), so a sweeper never takes a live writer's objects for
    garbage."""
    started = time.perf_counter()
    view = memoryview(body)
    digest = hashlib.sha256(view).hexdigest()
    hashed = time.perf_counter()
    key = layout.cas_object(digest)
    entry = ObjectEntry(cas_name(digest), len(view), digest, subpartition, shared=True)

    def done(uploaded: bool) -> Stored:
        return Stored(entry, uploaded, hashed - started, time.perf_counter() - hashed)

    if announce is not None:
        with contextlib.suppress(AlreadyCommitted):
            objects.put_if_absent(announce(digest), b"", content_type="application/octet-stream")
    for _ in range(3):
        if len(view) <= SINGLE_PUT_BYTES and _put_once(objects, key, view, digest):
            return done(True)
        verdict = check_stored(objects, key, entry, view)
        if not verdict.problem:
            why = _unservable(objects, layout, key, digest)
            if why:
                _overwrite(objects, layout, key, view, digest, why, part_size, threads)
                return done(True)
            return done(False)
        if verdict.found is not None:
            quarantine(objects, layout, entry, verdict.found.etag, verdict.problem)
        elif len(view) > SINGLE_PUT_BYTES:
            with UploadStream(objects, key, part_size, threads) as stream:
                for start in range(0, len(view), part_size):
                    stream.write(view[start:start + part_size])
                stream.finish()
            return done(True)
    raise StoreError(f"{key}: another object kept appearing under this SHA-256 while it was stored; check what "
                     "else writes under the store's prefix")


def _put_once(objects: Objects, key: str, view: memoryview, digest: str) -> bool:
    """One create-only PUT carrying the body's SHA-256; ``False`` if something is stored under ``key``."""
    try:
        objects.put_if_absent(key, bytes(view), content_type="application/octet-stream", sha256=digest)
    except AlreadyCommitted:
        return False
    return True


@dataclass(frozen=True)
class Tally:
    """Bytes and objects a write produced, and how many of each it uploaded (the rest were already there)."""

    objects: int = 0
    bytes: int = 0
    new_objects: int = 0
    new_bytes: int = 0

    def add(self, stored: Stored) -> Tally:
        """This tally with one more stored object."""
        size = stored.entry.size
        return Tally(self.objects + 1, self.bytes + size, self.new_objects + stored.uploaded,
                     self.new_bytes + size * stored.uploaded)

    def __add__(self, other: Tally) -> Tally:
        return Tally(self.objects + other.objects, self.bytes + other.bytes, self.new_objects + other.new_objects,
                     self.new_bytes + other.new_bytes)

    def describe(self) -> str:
        """``uploaded X of Y bytes (N of M objects new)``."""
        return f"uploaded {self.new_bytes} of {self.bytes} bytes ({self.new_objects} of {self.objects} objects new)"


def confirm_shared(objects: Objects, layout: Layout, entries: tuple[ObjectEntry, ...], where: str,
                   min_grace_seconds: float, threads: int = 16) -> float:
    """Confirm (module rule) that every shared entry is there, of its size and (where the server keeps one) of its
    SHA-256, refreshing the stale ones and moving wrong ones aside; returns the time the check started.
    :class:`IncompleteCommit` naming the first missing or wrong object."""
    started = time.time()
    shared = sorted({e.sha256: e for e in entries if e.shared}.values(), key=lambda e: e.sha256)

    def confirm(entry: ObjectEntry) -> str:
        key = layout.cas_object(entry.sha256)
        verdict = check_stored(objects, key, entry)
        if verdict.bad and verdict.found is not None:
            quarantine(objects, layout, entry, verdict.found.etag, verdict.problem)
        if verdict.problem or verdict.found is None:
            return f"object {key} listed in the manifest {verdict.problem}"
        stale = verdict.found.modified < verdict.found.now - FRESH_SHARE * min_grace_seconds
        if stale and not objects.freshen(key):
            return f"object {key} listed in the manifest vanished while it was refreshed"
        return ""

    with ThreadPoolExecutor(max_workers=max(1, min(threads, len(shared) or 1))) as pool:
        problems = [p for p in pool.map(confirm, shared) if p]
    if problems:
        raise IncompleteCommit(f"{where}: {problems[0]}; nothing was committed: retry the task to write the "
                               "partition again")
    return started


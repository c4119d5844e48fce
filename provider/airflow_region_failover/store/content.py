"""Content-addressed data objects: store one encoded body under the name of its hash, upload nothing if it is
already there, and confirm before a commit that every shared object a manifest lists is there and fresh.

Rules:

* **Put** (:func:`put_content`): an object's key is ``<prefix>/cas/v1/<h[:2]>/<h>.parquet``, ``h`` = SHA-256 of
  its bytes (:meth:`.keys.Layout.cas_object`). A body of at most one part goes up with a create-only PUT
  (``If-None-Match: *``); the server's 412 means the object is there and nothing was uploaded. A larger body is
  HEADed first and, if absent, streamed as a multipart upload that is visible only when complete (a concurrent
  writer of the same key writes the same bytes, so whichever completes last changes nothing). The caller learns
  whether bytes went up (:class:`Stored`), so each write reports bytes uploaded vs reused, and how long hashing and
  storing took (the task's timeline, :mod:`~airflow_region_failover.timeline`).
* **Freshness** (the race with the sweeper; git's *freshen* rule). A writer that found an object present may be
  about to list an object the sweeper has judged garbage. Writers know the grace floor ``G0``
  (:data:`.lifecycle.MIN_GRACE_SECONDS`, or the store's ``min_grace_seconds``); the sweeper uses a grace ``G >=
  G0``. Before the manifest PUT the committer confirms every shared object it lists (:func:`confirm_shared`,
  starting at ``t``): missing or of another size -> :class:`IncompleteCommit` (nothing committed; the retried task
  uploads it again); last-modified older than ``G0/2`` -> refreshed by a server-side copy onto itself (no bytes
  sent). The PUT is issued by ``t + G0/8`` (:func:`commit_deadline`; later: confirm again) and must land by
  ``t + G0/4``. The sweeper (:mod:`.registry`) derives the references starting at ``d``, then HEADs each
  unreferenced candidate at ``s < d + G/4`` and DELETEs it right away only if its last-modified ``m < s - G``.
  Safety: suppose the manifest, visible at ``v``, was missed by the derivation (``v > d``). If the committer's
  check came after the HEAD, it came after the DELETE and saw the object missing. Otherwise ``m >= t - G0/2 >=
  t - G/2`` and ``m < s - G``, so ``s - t > G/2``; but ``s < d + G/4 < v + G/4 <= t + G0/4 + G/4 <= t + G/2``: a
  contradiction. What is left is the gap between the sweeper's HEAD and DELETE of one object (one request), as in
  git's prune; run one sweeper at a time.
"""

from __future__ import annotations

import contextlib
import hashlib
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field

from airflow_region_failover.exceptions import AlreadyCommitted, IncompleteCommit
from airflow_region_failover.store.keys import Layout, cas_name
from airflow_region_failover.store.manifest import ObjectEntry
from airflow_region_failover.store.objects import Objects
from airflow_region_failover.store.upload import UploadStream

MIN_GRACE_SECONDS = 15 * 60.0
"""The shortest grace a sweep accepts by default (and the CLI at all): longer than any live writer is silent; the
floor ``G0`` writers assume (module rule)."""
FRESH_SHARE = 0.5
"""A shared object older than ``FRESH_SHARE * G0`` is refreshed before a manifest listing it is committed."""
COMMIT_SHARE = 0.125
"""The manifest PUT must be issued within ``COMMIT_SHARE * G0`` of the confirmation."""


@dataclass(frozen=True)
class Stored:
    """One stored body: its manifest entry and whether its bytes were uploaded now (``False``: already there);
    ``hash_s``/``upload_s``: seconds spent hashing it and storing it (the requests, whether or not bytes went up)."""

    entry: ObjectEntry
    uploaded: bool
    hash_s: float = field(default=0.0, compare=False)
    upload_s: float = field(default=0.0, compare=False)


def put_content(objects: Objects, layout: Layout, body: bytes | bytearray | memoryview, subpartition: int = -1,
                *, part_size: int = 16 * 1024 * 1024, threads: int = 1,
                announce: Callable[[str], str] | None = None) -> Stored:
    """Store ``body`` (one complete encoded object) content-addressed; uploads nothing if it is there (module
    rule). ``subpartition`` >= 0: the object holds that subpartition of a keyed partition. ``announce(sha256)``:
    the key of an empty marker created first, which holds a reference while the write is under way
    (:meth:`.keys.RunKeys.announcement`), so a sweeper never takes a live writer's objects for garbage."""
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
    if len(view) <= part_size:
        try:
            objects.put_if_absent(key, bytes(view), content_type="application/octet-stream")
        except AlreadyCommitted:
            return done(False)
        return done(True)
    found = objects.head(key)
    if found is not None and found.size == len(view):
        return done(False)
    with UploadStream(objects, key, part_size, threads) as stream:
        for start in range(0, len(view), part_size):
            stream.write(view[start:start + part_size])
        stream.finish()
    return done(True)


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
    """Confirm (module rule) that every shared entry is there with its size, refreshing the stale ones; returns
    the time the check started. :class:`IncompleteCommit` naming the first missing or wrong-sized object."""
    started = time.time()
    stale_before = started - FRESH_SHARE * min_grace_seconds
    shared = sorted({e.sha256: e for e in entries if e.shared}.values(), key=lambda e: e.sha256)

    def confirm(entry: ObjectEntry) -> str:
        key = layout.cas_object(entry.sha256)
        found = objects.head(key)
        if found is None:
            return f"object {key} listed in the manifest is missing"
        if found.size != entry.size:
            return f"object {key} has {found.size} bytes, the manifest says {entry.size}"
        if found.modified < stale_before and not objects.freshen(key):
            return f"object {key} listed in the manifest vanished while it was refreshed"
        return ""

    with ThreadPoolExecutor(max_workers=max(1, min(threads, len(shared) or 1))) as pool:
        problems = [p for p in pool.map(confirm, shared) if p]
    if problems:
        raise IncompleteCommit(f"{where}: {problems[0]}; nothing was committed: retry the task to write the "
                               "partition again")
    return started


def commit_deadline(checked_at: float, min_grace_seconds: float) -> float:
    """The latest time the manifest PUT may be issued after a confirmation at ``checked_at`` (module rule)."""
    return checked_at + COMMIT_SHARE * min_grace_seconds

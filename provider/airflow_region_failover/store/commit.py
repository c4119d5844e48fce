"""Commit protocol: which attempt's data is *the* committed version of a partition, and how it changes.

Per partition and producer attempt (Airflow's ``try_number``, increasing within a DAG run):

1. **begin** (:func:`begin_attempt`): the new attempt retires every lower attempt — a marker
   ``retired/P/A.json`` per committed lower attempt (keeping its content checksum) and one for ``attempt - 1``
   — so the *fence* (highest retired attempt) is at least ``attempt - 1``.
2. **write**: data objects are content-addressed in the shared area (:mod:`.content`: an object already there is
   not uploaded again; older writers put them under ``data/P/A-<writer>/``, ``writer`` a random token); an upload
   is visible only when complete.
3. **commit** (:func:`commit`): refused with :class:`Superseded` if the fence is >= ``attempt`` or a higher
   attempt has committed, and with :class:`IncompleteCommit` unless every object the manifest lists is there with
   its recorded size (one LIST of the writer's prefix for run-scoped objects; a HEAD per shared object, which
   also refreshes stale ones and bounds the time to the PUT: :mod:`.content`); otherwise the manifest
   ``manifests/P/A.json`` is created with ``If-None-Match: *``. Exactly one writer of an attempt wins; the loser
   gets :class:`AlreadyCommitted` and the first commit stands. A writer whose own PUT landed but whose response
   was lost (the retry gets 412) finds its own manifest there — same writer token, same objects — and that is
   its commit, not a loss.

Reader rule (:func:`current_attempt`): the current version is the committed attempt with the highest number
that is above the fence; if there is none the partition is unavailable. A zombie (an older attempt still
running after its task was cleared) can therefore never replace the current version: its manifest lands in
its own key, at or below the fence or below the newer commit, and no reader picks it — even if it slips past
the commit pre-check in a race. Manifests are never overwritten and never partially visible (one PUT).
"""

from __future__ import annotations

import contextlib
import re
import time
from dataclasses import dataclass
from datetime import datetime, timezone

from airflow_region_failover.exceptions import (
    AlreadyCommitted,
    IncompleteCommit,
    ManifestError,
    NotAvailable,
    Superseded,
)
from airflow_region_failover.graph.ids import PartitionId
from airflow_region_failover.store.content import COMMIT_SHARE, LAND_SHARE, MIN_GRACE_SECONDS, confirm_shared
from airflow_region_failover.store.keys import PARTITION_PART, RunKeys
from airflow_region_failover.store.manifest import Manifest, Retirement
from airflow_region_failover.store.s3.objects import Objects

_ATTEMPT_KEY = re.compile(rf"({PARTITION_PART})/a(\d{{6}})\.json\Z")


@dataclass(frozen=True)
class PartitionState:
    """What the manifest and retirement keys of one partition say (from LISTs, no GETs)."""

    partition: PartitionId
    committed: frozenset[int]
    retired: frozenset[int]

    @property
    def fence(self) -> int:
        """The highest retired attempt (0 if none): commits at or below it never count."""
        return max(self.retired, default=0)

    @property
    def current(self) -> int | None:
        """The current version: the highest committed attempt above the fence, or ``None``."""
        best = max(self.committed, default=0)
        return best if best > self.fence else None


def now_iso() -> str:
    """UTC now as ISO-8601 text."""
    return datetime.now(timezone.utc).isoformat(timespec="milliseconds")


def scan_result(objects: Objects, keys: RunKeys, result: str, index: int | None = None) -> dict[int, PartitionState]:
    """The state of every partition of ``result`` (or just ``index``): two LISTs, whatever the count."""
    suffix = f"p{index:05d}/" if index is not None else ""
    committed = _attempts(objects, keys.manifests_prefix(result), suffix)
    retired = _attempts(objects, keys.retired_prefix(result), suffix)
    return {
        i: PartitionState(PartitionId(result, i), frozenset(committed.get(i, ())), frozenset(retired.get(i, ())))
        for i in sorted(set(committed) | set(retired))
    }


def _attempts(objects: Objects, prefix: str, suffix: str) -> dict[int, set[int]]:
    found: dict[int, set[int]] = {}
    for item in objects.listing(prefix + suffix):
        match = _ATTEMPT_KEY.match(item.key[len(prefix):])
        if match and item.size > 0:
            found.setdefault(int(match.group(1)[1:]), set()).add(int(match.group(2)))
    return found


def state_of(objects: Objects, keys: RunKeys, partition: PartitionId) -> PartitionState:
    """The state of one partition."""
    states = scan_result(objects, keys, partition.result, partition.index)
    return states.get(partition.index, PartitionState(partition, frozenset(), frozenset()))


def current_attempt(objects: Objects, keys: RunKeys, partition: PartitionId) -> int | None:
    """The attempt whose manifest is the partition's current version (reader rule), or ``None``."""
    return state_of(objects, keys, partition).current


def load_manifest(objects: Objects, keys: RunKeys, partition: PartitionId, attempt: int) -> Manifest | None:
    """The committed manifest of ``attempt`` (validated against the partition and attempt), or ``None``."""
    key = keys.manifest(partition, attempt)
    data = objects.get(key)
    if data is None:
        return None
    manifest = Manifest.from_json(data, where=key)
    if (manifest.partition, manifest.attempt, manifest.dag_id, manifest.run_id) != (
            partition, attempt, keys.dag_id, keys.run_id):
        raise NotAvailable(f"manifest {key} describes {manifest.partition} attempt {manifest.attempt} "
                           f"of {manifest.dag_id}/{manifest.run_id}: not this partition")
    return manifest


def current_manifest(objects: Objects, keys: RunKeys, partition: PartitionId) -> Manifest:
    """The current committed manifest; :class:`NotAvailable` naming the partition if there is none."""
    state = state_of(objects, keys, partition)
    if state.current is None:
        raise NotAvailable(_why_unavailable(keys, state))
    manifest = load_manifest(objects, keys, partition, state.current)
    if manifest is None:
        raise NotAvailable(f"{partition} of {keys.dag_id}/{keys.run_id}: manifest vanished while reading")
    return manifest


def _why_unavailable(keys: RunKeys, state: PartitionState) -> str:
    where = f"{state.partition} of {keys.dag_id}/{keys.run_id}"
    if not state.committed:
        return f"{where} was never committed"
    return f"{where} is retired (attempts <= {state.fence}) and no newer attempt has committed"


def _retire(objects: Objects, keys: RunKeys, partition: PartitionId, attempt: int, reason: str) -> Retirement:
    manifest = load_manifest(objects, keys, partition, attempt)
    marker = Retirement(partition, attempt, manifest.content_checksum if manifest else "", reason, now_iso())
    with contextlib.suppress(AlreadyCommitted):  # already retired: markers are immutable, the first one stands
        objects.put_if_absent(keys.retired(partition, attempt), marker.to_json())
    return marker


def begin_attempt(objects: Objects, keys: RunKeys, partition: PartitionId, attempt: int) -> tuple[Retirement, ...]:
    """Fence every attempt below ``attempt`` (see step 1); returns the markers written for committed ones.

    Raises :class:`Superseded` if ``attempt`` itself is already fenced or a higher attempt has committed.
    """
    state = state_of(objects, keys, partition)
    _refuse_if_superseded(keys, state, attempt)
    retired = [
        _retire(objects, keys, partition, a, f"superseded by attempt {attempt}")
        for a in sorted(state.committed - state.retired) if a < attempt
    ]
    if attempt > 1 and attempt - 1 not in state.retired and attempt - 1 not in state.committed:
        _retire(objects, keys, partition, attempt - 1, f"fenced by attempt {attempt}")
    return tuple(retired)


def _refuse_if_superseded(keys: RunKeys, state: PartitionState, attempt: int) -> None:
    where = f"{state.partition} of {keys.dag_id}/{keys.run_id}"
    if state.fence >= attempt:
        raise Superseded(f"{where}: attempt {attempt} is retired (fence {state.fence}); a newer attempt owns it")
    newer = [a for a in state.committed if a > attempt]
    if newer:
        raise Superseded(f"{where}: attempt {max(newer)} has committed; attempt {attempt} may not commit")


def commit(objects: Objects, keys: RunKeys, manifest: Manifest,
           min_grace_seconds: float = MIN_GRACE_SECONDS) -> Manifest:
    """Commit ``manifest`` (step 3) and return the committed manifest.

    :class:`Superseded`, :class:`IncompleteCommit` or :class:`AlreadyCommitted` if it may not or did not win; a
    manifest of this writer with these objects already in place is this writer's own earlier PUT: returned as is.
    ``min_grace_seconds``: the sweepers' grace floor the shared objects are confirmed against (:mod:`.content`):
    the PUT is issued within ``COMMIT_SHARE`` of it after the confirmation began, and if its answer comes later
    than ``LAND_SHARE`` of it (measured on this process's monotonic clock) every object is confirmed again after
    the manifest landed, the commit withdrawn if one is gone (:func:`_confirm_after_landing`).
    """
    for _ in range(3):
        began = time.monotonic()
        check_objects(objects, keys, manifest, min_grace_seconds)
        state = state_of(objects, keys, manifest.partition)
        _refuse_if_superseded(keys, state, manifest.attempt)
        if time.monotonic() - began <= COMMIT_SHARE * min_grace_seconds:
            break
    else:
        raise IncompleteCommit(f"{manifest.partition} of {keys.dag_id}/{keys.run_id}: the store is too slow to "
                               "commit within the grace floor's bound after confirming the objects; retry the task")
    key = keys.manifest(manifest.partition, manifest.attempt)
    try:
        objects.put_if_absent(key, manifest.to_json())
        committed = manifest
    except AlreadyCommitted:
        standing = _standing(objects, key)
        if standing is None or (standing.writer, standing.objects) != (manifest.writer, manifest.objects):
            raise AlreadyCommitted(
                f"{manifest.partition} of {keys.dag_id}/{keys.run_id} attempt {manifest.attempt} was already "
                f"committed by another writer; that commit stands ({key})") from None
        committed = standing
    late = time.monotonic() - began
    if late > LAND_SHARE * min_grace_seconds:
        _confirm_after_landing(objects, keys, committed, late, min_grace_seconds)
    return committed


def _confirm_after_landing(objects: Objects, keys: RunKeys, manifest: Manifest, late: float,
                           min_grace_seconds: float) -> None:
    """The manifest may have landed after the bound the sweeper relies on: confirm (and refresh) every object
    again now that it is visible; if one is gone, withdraw the commit by retiring this attempt (no reader takes a
    retired attempt for the current version) and raise :class:`IncompleteCommit` (the retried task writes it
    again)."""
    try:
        check_objects(objects, keys, manifest, min_grace_seconds)
    except IncompleteCommit as exc:
        _retire(objects, keys, manifest.partition, manifest.attempt,
                f"withdrawn: its manifest landed {late:.1f} s after its objects were confirmed and one was gone")
        raise IncompleteCommit(f"{exc} (its manifest landed {late:.1f} s after the objects were confirmed, later "
                               f"than the {LAND_SHARE * min_grace_seconds:g} s the sweeper allows; the commit is "
                               "withdrawn)") from None


def _standing(objects: Objects, key: str) -> Manifest | None:
    """The manifest at ``key`` if it can be read, else ``None`` (then it is not this writer's)."""
    data = objects.get(key)
    try:
        return None if data is None else Manifest.from_json(data, where=key)
    except ManifestError:
        return None


def check_objects(objects: Objects, keys: RunKeys, manifest: Manifest,
                  min_grace_seconds: float = MIN_GRACE_SECONDS) -> float:
    """Raise :class:`IncompleteCommit` naming the first object of ``manifest`` that is missing or has another size
    than recorded: one LIST of the writer's prefix, where a writer puts every run-scoped object (one LIST per other
    folder a hand-made manifest may name); shared objects are confirmed by :func:`.content.confirm_shared`. Returns
    when the check started."""
    where = f"{manifest.partition} of {keys.dag_id}/{keys.run_id} attempt {manifest.attempt}"
    checked = confirm_shared(objects, objects.layout, manifest.objects, where, min_grace_seconds)
    scoped = [entry for entry in manifest.objects if not entry.shared]
    folders = sorted({(keys.run_prefix + entry.key).rsplit("/", 1)[0] + "/" for entry in scoped})
    sizes = {item.key: item.size for folder in folders for item in objects.listing(folder)}
    for entry in scoped:
        key = keys.run_prefix + entry.key
        size = sizes.get(key)
        if size is None:
            raise IncompleteCommit(f"{where}: object {key} listed in the manifest is missing; nothing was "
                                   "committed: retry the task to write the partition again")
        if size != entry.size:
            raise IncompleteCommit(f"{where}: object {key} has {size} bytes, the manifest says {entry.size}; "
                                   "nothing was committed: retry the task to write the partition again")
    return checked


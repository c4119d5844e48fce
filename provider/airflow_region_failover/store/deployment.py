"""The start-up checks of a deployment's store: does the S3 server honour conditional writes
(:func:`probe_conditional_writes`), which prefix belongs to this deployment, and does it lie inside another
deployment's?

Conditional writes. Rule: the commit protocol, the run record, holds and the failover decision logs all rely on S3
refusing a create-only PUT (``If-None-Match: *``) of an existing key and a PUT with a stale ``If-Match`` ETag (412). A
server that ignores either header silently turns every compare-and-swap into last-writer-wins, so the probe writes a
throw-away object under the deployment's failover root (``<prefix>/failover/v1/_probe/<random>``), checks both
refusals, deletes it, and raises :class:`ConditionalWritesUnsupported` naming the endpoint and what it ignored.

The prefix. Rules: every deployment marks its prefix with ``<prefix>/_region_failover_deployment.json`` (created
once with ``If-None-Match: *`` when the deployment's store starts; later processes find it there). A prefix below
another deployment's marked prefix is refused at start-up with :class:`NestedDeployment` naming both prefixes — its keys
would lie in the other deployment's tree, where that deployment's sweeper would take them for orphans. A
deployment started before an enclosing one cannot be refused afterwards; for it the sweeper and retention never
descend into a sub-prefix that holds a marker (:func:`nested_prefixes`, :func:`outside_nested`). A parent marker
this deployment may not read (403: credentials scoped to its own prefix) counts as absent: such a deployment
cannot see, and so cannot be inside, another one's tree that it is not allowed into.

Once per deployment, not per process: the marker also records that its server was found to honour conditional
writes (:func:`probe_conditional_writes`; ``conditional_writes``: when, through which endpoint). A process whose
deployment's marker says so starts with that one GET (:func:`checked`) instead of the probe's and this check's five
requests: the nesting check has nothing to add once the marker stands (a deployment marked later could not have been
refused anyway, see above), and the server is the one the marker lives on. A marker written before this rule is
brought up to date by the next process that checks.
"""

from __future__ import annotations

import contextlib
import json
import logging
import secrets
from collections.abc import Callable, Iterable, Sequence

from airflow_region_failover.exceptions import (
    AlreadyCommitted,
    ConditionalWritesUnsupported,
    ConditionFailed,
    NestedDeployment,
)
from airflow_region_failover.store.commit import now_iso
from airflow_region_failover.store.keys import DEPLOYMENT_MARKER
from airflow_region_failover.store.s3.objects import Listed, Objects, error_code

log = logging.getLogger(__name__)
FORMAT = "airflow-region-failover/deployment"
VERSION = 1
CHECKED = "conditional_writes"
"""The marker's key recording that the deployment's server honours conditional writes (module rule)."""


def checked(objects: Objects) -> bool:
    """Whether this deployment's marker says its start-up checks passed (one GET; module rule)."""
    body = objects.get(objects.layout.deployment_marker)
    try:
        return body is not None and bool(json.loads(body).get(CHECKED))
    except (ValueError, AttributeError):
        return False


def mark_deployment(objects: Objects, endpoint: str) -> None:
    """Refuse a prefix inside another deployment's; then mark this deployment's prefix (idempotent)."""
    layout = objects.layout
    for marker in layout.enclosing_markers():
        if _visible(objects, marker):
            outer = marker.removesuffix(DEPLOYMENT_MARKER).rstrip("/")
            where = f"prefix {outer!r}" if outer else "the bucket's root"
            raise NestedDeployment(
                f"store prefix {layout.prefix!r} lies inside the deployment at {where} of s3://{layout.bucket} "
                f"({endpoint}, marker {marker}): its sweeper would take this deployment's keys for orphans; set "
                f"[region_failover] store_prefix to a prefix outside {outer + '/' if outer else 'it'}")
    check = {"verified_at": now_iso(), "endpoint": endpoint}
    body = {"format": FORMAT, "version": VERSION, "bucket": layout.bucket, "prefix": layout.prefix,
            "created_at": now_iso(), CHECKED: check}
    try:
        objects.put_if_absent(layout.deployment_marker, json.dumps(body, sort_keys=True).encode())
    except AlreadyCommitted:  # marked by an earlier process of this deployment: record the check if it lacks it
        _record_check(objects, check)


def _record_check(objects: Objects, check: dict[str, str]) -> None:
    """Add the conditional-write check to a marker written before the module rule's last paragraph (best effort:
    a lost race means another process just did)."""
    got = objects.get_with_etag(objects.layout.deployment_marker)
    if got is None:
        return
    try:
        marker = json.loads(got[0])
    except ValueError:
        return
    if isinstance(marker, dict) and not marker.get(CHECKED):
        with contextlib.suppress(ConditionFailed):
            objects.put_if_match(objects.layout.deployment_marker,
                                 json.dumps({**marker, CHECKED: check}, sort_keys=True).encode(), got[1])


def _visible(objects: Objects, marker: str) -> bool:
    try:
        return objects.marker_exists(marker)
    except Exception as exc:
        if error_code(exc) not in {"AccessDenied", "403", "Forbidden"}:
            raise
        log.info("may not read %s (credentials scoped to the store prefix): not checked for a deployment", marker)
        return False


def is_marker(relative_key: str) -> bool:
    """Whether ``relative_key`` (relative to a prefix being swept) is another deployment's marker."""
    return relative_key == DEPLOYMENT_MARKER or relative_key.endswith("/" + DEPLOYMENT_MARKER)


def nested_prefixes(base: str, items: Iterable[Listed]) -> tuple[str, ...]:
    """The ``/``-ended prefixes under ``base`` that hold another deployment's marker (found in ``items``)."""
    return tuple(sorted(item.key.removesuffix(DEPLOYMENT_MARKER) for item in items
                        if is_marker(item.key[len(base):])))


def outside_nested(items: Sequence[Listed], nested: Sequence[str]) -> list[Listed]:
    """``items`` without those that lie under one of the ``nested`` prefixes."""
    return [item for item in items if not item.key.startswith(tuple(nested))] if nested else list(items)


WRONG_ETAG = '"00000000000000000000000000000000"'
_NOT_IMPLEMENTED = {"NotImplemented", "501"}


def probe_conditional_writes(objects: Objects, endpoint: str) -> None:
    """Raise :class:`ConditionalWritesUnsupported` unless ``objects``' server refuses both stale conditions."""
    key = objects.layout.probe_key(secrets.token_hex(8))
    ignored: list[str] = []
    try:
        _expect("If-None-Match", endpoint, lambda: objects.put_if_absent(key, b"probe", "text/plain"))
        try:
            _expect("If-None-Match", endpoint, lambda: objects.put_if_absent(key, b"probe 2", "text/plain"))
            ignored.append("If-None-Match: * (a create-only PUT of an existing key succeeded)")
        except AlreadyCommitted:
            pass
        try:
            _expect("If-Match", endpoint, lambda: objects.put_if_match(key, b"probe 3", WRONG_ETAG, "text/plain"))
            ignored.append("If-Match (a PUT with a wrong ETag succeeded)")
        except ConditionFailed:
            pass
    finally:
        with contextlib.suppress(Exception):  # best effort: a leftover probe object is harmless
            objects.delete([key])
    if ignored:
        raise ConditionalWritesUnsupported(
            f"S3 endpoint {endpoint} ignored {' and '.join(ignored)}: every compare-and-swap of the result store "
            "and the decision logs would silently become last-writer-wins; use a server that supports conditional "
            "writes (AWS S3, SeaweedFS, a recent MinIO)")
    log.debug("S3 endpoint %s honours conditional writes", endpoint)


def _expect(header: str, endpoint: str, put: Callable[[], object]) -> None:
    """Run ``put``; a server that rejects the conditional header as not implemented does not support it."""
    try:
        put()
    except ConditionFailed:
        raise
    except Exception as exc:
        if error_code(exc) in _NOT_IMPLEMENTED:
            raise ConditionalWritesUnsupported(
                f"S3 endpoint {endpoint} does not implement {header} on PUT: the store's compare-and-swap needs "
                "conditional writes; use a server that supports them (AWS S3, SeaweedFS, a recent MinIO)") from None
        raise

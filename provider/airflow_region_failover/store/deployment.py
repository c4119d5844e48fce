"""Which prefix belongs to this deployment, and does it lie inside another deployment's?

Rules: every deployment marks its prefix with ``<prefix>/_region_failover_deployment.json`` (created once with
``If-None-Match: *`` when the deployment's store starts; later processes find it there). A prefix below another
deployment's marked prefix is refused at start-up with :class:`NestedDeployment` naming both prefixes — its keys
would lie in the other deployment's tree, where that deployment's sweeper would take them for orphans. A
deployment started before an enclosing one cannot be refused afterwards; for it the sweeper and retention never
descend into a sub-prefix that holds a marker (:func:`nested_prefixes`, :func:`outside_nested`). A parent marker
this deployment may not read (403: credentials scoped to its own prefix) counts as absent: such a deployment
cannot see, and so cannot be inside, another one's tree that it is not allowed into.
"""

from __future__ import annotations

import contextlib
import json
import logging
from collections.abc import Iterable, Sequence

from airflow_region_failover.exceptions import AlreadyCommitted, NestedDeployment
from airflow_region_failover.store.commit import now_iso
from airflow_region_failover.store.keys import DEPLOYMENT_MARKER
from airflow_region_failover.store.objects import Listed, Objects, error_code

log = logging.getLogger(__name__)
FORMAT = "airflow-region-failover/deployment"
VERSION = 1


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
    body = {"format": FORMAT, "version": VERSION, "bucket": layout.bucket, "prefix": layout.prefix,
            "created_at": now_iso()}
    with contextlib.suppress(AlreadyCommitted):  # marked by an earlier process of this deployment
        objects.put_if_absent(layout.deployment_marker, json.dumps(body, sort_keys=True).encode())


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

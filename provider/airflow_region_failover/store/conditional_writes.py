"""Does the S3 server honour conditional writes? Asked once per process before the store is used.

Rule: the commit protocol, the run record, holds and the failover decision logs all rely on S3 refusing a
create-only PUT (``If-None-Match: *``) of an existing key and a PUT with a stale ``If-Match`` ETag (412). A server
that ignores either header silently turns every compare-and-swap into last-writer-wins, so the probe writes a
throw-away object under the deployment's failover root (``<prefix>/failover/v1/_probe/<random>``), checks both
refusals, deletes it, and raises :class:`ConditionalWritesUnsupported` naming the endpoint and what it ignored.
"""

from __future__ import annotations

import contextlib
import logging
import secrets
from collections.abc import Callable

from airflow_region_failover.exceptions import AlreadyCommitted, ConditionalWritesUnsupported, ConditionFailed
from airflow_region_failover.store.s3.objects import Objects, error_code

log = logging.getLogger(__name__)

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

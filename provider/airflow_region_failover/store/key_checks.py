"""The ids every store key is built from, checked: the bucket, the prefix, Airflow's dag and run ids (encoded as one
key part, injectively), a partition, an index, a writer token and a SHA-256 (:mod:`.keys` says the layout and the
rules they implement). Every function returns its input, normalised, or raises :class:`UnsafeKeyError` naming it.
"""

from __future__ import annotations

import re

from airflow_region_failover.exceptions import UnsafeKeyError
from airflow_region_failover.graph.errors import GraphError
from airflow_region_failover.graph.ids import PartitionId, key_part

MAX_AIRFLOW_ID = 250
_PLAIN = re.compile(r"[A-Za-z0-9_-]")
_BUCKET = re.compile(r"[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]\Z")
_SEGMENT = re.compile(r"[A-Za-z0-9_.-]+\Z")
_WRITER = re.compile(r"[0-9a-f]{8,32}\Z")
_SHA256 = re.compile(r"[0-9a-f]{64}\Z")


def check_bucket(bucket: object) -> str:
    """Return ``bucket`` if it is a valid S3 bucket name (lower-case, 3-63 chars, not an IP), else raise."""
    if not isinstance(bucket, str) or not _BUCKET.match(bucket) or ".." in bucket or _looks_like_ip(bucket):
        raise UnsafeKeyError(f"bucket {bucket!r} is not a valid S3 bucket name (3-63 of [a-z0-9.-], no '..')")
    return bucket


def check_prefix(prefix: object) -> str:
    """Return the normalised prefix (no leading/trailing ``/``) or raise naming the bad segment."""
    if not isinstance(prefix, str) or not prefix.isascii():
        raise UnsafeKeyError(f"store prefix {prefix!r} must be an ASCII string")
    if prefix.startswith("/"):
        raise UnsafeKeyError(f"store prefix {prefix!r} must be relative (no leading '/')")
    segments = prefix.rstrip("/").split("/") if prefix.strip("/") else []
    for segment in segments:
        if segment in {".", ".."} or not _SEGMENT.match(segment):
            raise UnsafeKeyError(f"store prefix {prefix!r}: segment {segment!r} must be [A-Za-z0-9_.-]+, not . or ..")
    return "/".join(segments)


def encode_airflow_id(value: object, *, what: str) -> str:
    """Encode a dag id or run id as one key part (injective, reversible); reject unsafe input naming it."""
    if not isinstance(value, str) or not value:
        raise UnsafeKeyError(f"{what} {value!r} must be a non-empty string")
    if len(value) > MAX_AIRFLOW_ID:
        raise UnsafeKeyError(f"{what} {value!r} is longer than {MAX_AIRFLOW_ID} characters")
    bad = [c for c in value if not c.isascii() or not c.isprintable() or c in "/\\"]
    if bad:
        raise UnsafeKeyError(f"{what} {value!r} contains {bad[0]!r}: only printable ASCII without '/' or '\\'")
    return "".join(c if _PLAIN.match(c) else f".{ord(c):02x}" for c in value)


def decode_airflow_id(part: str) -> str:
    """Inverse of :func:`encode_airflow_id`."""
    return re.sub(r"\.([0-9a-f]{2})", lambda m: chr(int(m.group(1), 16)), part)


def check_partition(partition: object) -> PartitionId:
    """Return ``partition`` if it is a :class:`PartitionId` with a valid result and index >= 0, else raise."""
    if not isinstance(partition, PartitionId):
        raise UnsafeKeyError(f"partition {partition!r} must be a PartitionId")
    check_index(partition.index, what=f"partition {partition.result!r} index")
    try:
        key_part(partition.result)
    except GraphError as exc:
        raise UnsafeKeyError(str(exc)) from None
    return partition


def check_index(value: object, *, what: str, minimum: int = 0) -> int:
    """Return ``value`` if it is an ``int`` (not bool) >= ``minimum`` and < 10**6, else raise naming it."""
    if isinstance(value, bool) or not isinstance(value, int) or not minimum <= value < 10**6:
        raise UnsafeKeyError(f"{what} {value!r} must be an integer in [{minimum}, 999999]")
    return value


def check_writer(writer: object) -> str:
    """Return ``writer`` if it is a lower-case hex token of 8-32 characters, else raise."""
    if not isinstance(writer, str) or not _WRITER.match(writer):
        raise UnsafeKeyError(f"writer token {writer!r} must be 8-32 lower-case hex digits")
    return writer


def check_sha256(digest: object) -> str:
    """Return ``digest`` if it is a SHA-256 in 64 lower-case hex digits, else raise."""
    if not isinstance(digest, str) or not _SHA256.match(digest):
        raise UnsafeKeyError(f"content hash {digest!r} must be a SHA-256 of 64 lower-case hex digits")
    return digest


def cas_name(digest: str) -> str:
    """``<h[:2]>/<h>.parquet``: a content-addressed object's key relative to the shared area."""
    return f"{check_sha256(digest)[:2]}/{digest}.parquet"


def _looks_like_ip(bucket: str) -> bool:
    return bool(re.fullmatch(r"\d+\.\d+\.\d+\.\d+", bucket))

"""Object I/O on S3: guarded keys, errors translated (the streaming multipart upload, built on this module, is
:mod:`.upload`).

Rules: every key passes :meth:`Layout.check` before any request (the only exception: reading whether another
deployment's marker exists at a parent prefix, :meth:`Objects.marker_exists`); connection failures after botocore's
bounded retries become :class:`StoreUnreachable` naming the operation and key (never credentials); an upload is
visible only when complete — on any error its multipart upload is aborted, so nothing half-written is left
visible; an incomplete upload's last activity is its newest part (its initiation if it has none); bodies are
read as a stream of :data:`CHUNK` bytes, so a caller holds an object at most once. Clocks: an object's age is the
server's ``Date`` minus its ``LastModified``, both the server's clock (:attr:`Stat.now`, :meth:`Objects.clock`),
so no process compares its own clock with the server's (the local clock stands in only for a server that sends no
``Date``). A body sent with its SHA-256 (:meth:`Objects.put_if_absent`) is refused by the server if it does not
match, and the server keeps the checksum with the object (:attr:`Stat.sha256`; ``None`` where it keeps none).
"""

from __future__ import annotations

import base64
import contextlib
import hashlib
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from email.utils import parsedate_to_datetime
from typing import Any, TypeVar

from airflow_region_failover.exceptions import (
    AlreadyCommitted,
    ConditionFailed,
    ObjectUnservable,
    StoreError,
    StoreUnreachable,
    UnsafeKeyError,
)
from airflow_region_failover.store.keys import Layout

T = TypeVar("T")
CHUNK = 256 * 1024


@dataclass(frozen=True)
class Listed:
    """One listed object: key, size, last-modified time (epoch seconds)."""

    key: str
    size: int
    modified: float


@dataclass(frozen=True)
class Stat:
    """One object's HEAD: size, last-modified, ETag, the full-object SHA-256 the server keeps with it (hex;
    ``None`` when it keeps none: uploaded without one, multipart, or a server that keeps no checksums), the
    server's clock when it answered (:func:`server_now`), and the CRC32 it keeps instead (base64, as S3 sends it:
    what an SDK sends by default with a plain PUT; ``None`` if none)."""

    key: str
    size: int
    modified: float
    etag: str
    sha256: str | None
    now: float
    crc32: str | None = None


@dataclass(frozen=True)
class Opened:
    """A GET under way: the streaming body (read it with :meth:`Objects.chunks`), its length and ETag."""

    body: Any
    length: int
    etag: str


@dataclass(frozen=True)
class Upload:
    """One incomplete multipart upload: key, upload id, initiation time (epoch seconds)."""

    key: str
    upload_id: str
    initiated: float


def _is_connection_error(exc: BaseException) -> bool:
    from botocore.exceptions import ConnectionError as BotoConnectionError
    from botocore.exceptions import HTTPClientError

    return isinstance(exc, BotoConnectionError | HTTPClientError)


def error_code(exc: BaseException) -> str:
    """The S3 error code of a botocore ``ClientError`` (empty for any other exception)."""
    response = getattr(exc, "response", None) or {}
    return str(response.get("Error", {}).get("Code", ""))


def http_status(exc: BaseException) -> int:
    """The HTTP status of a botocore ``ClientError`` (0 for any other exception)."""
    response = getattr(exc, "response", None) or {}
    return int(response.get("ResponseMetadata", {}).get("HTTPStatusCode", 0) or 0)


def server_now(response: Any) -> float:
    """The server's clock when it sent ``response`` (its ``Date`` header, whole seconds), else this process's."""
    headers = (response or {}).get("ResponseMetadata", {}).get("HTTPHeaders", {})
    try:
        return parsedate_to_datetime(headers["date"]).timestamp()
    except (KeyError, TypeError, ValueError):
        return time.time()


def _full_sha256(response: Any) -> str | None:
    """The full-object SHA-256 (hex) a HEAD/GET with ``ChecksumMode`` returned, or ``None`` (none, or composite)."""
    stored = response.get("ChecksumSHA256")
    if not stored or "-" in stored or response.get("ChecksumType", "FULL_OBJECT") != "FULL_OBJECT":
        return None
    return base64.b64decode(stored).hex()


def call(operation: str, key: str, fn: Callable[[], T]) -> T:
    """Run one S3 call; connection failures (after retries) become :class:`StoreUnreachable`."""
    try:
        return fn()
    except Exception as exc:
        if _is_connection_error(exc):
            raise StoreUnreachable(f"S3 {operation} of {key!r} failed after retries: {type(exc).__name__}") from exc
        raise


class Objects:
    """Guarded object operations on one bucket through one (shared) boto3 client."""

    def __init__(self, client: Any, layout: Layout) -> None:
        self.client = client
        self.layout = layout
        self.bucket = layout.bucket

    def put_if_absent(self, key: str, body: bytes, content_type: str = "application/json",
                      sha256: str | None = None) -> str:
        """Create ``key`` only if absent (``If-None-Match: *``) and return its ETag; :class:`AlreadyCommitted` if
        it exists. ``sha256`` (hex): the body's SHA-256, sent as its S3 checksum — the server refuses a body that
        does not match it and keeps it with the object (:attr:`Stat.sha256`).

        A 409 ``ConditionalRequestConflict`` (a concurrent conditional write still in flight) is retried, so
        the answer is always the server's 200 or 412.
        """
        self.layout.check(key)
        checksum = {} if sha256 is None else {"ChecksumAlgorithm": "SHA256",  # botocore sends ours, hashes nothing
                                              "ChecksumSHA256": base64.b64encode(bytes.fromhex(sha256)).decode()}
        for delay in (0.05, 0.2, 0.5, 1.0, None):
            try:
                response = call("conditional PUT", key, lambda: self.client.put_object(
                    Bucket=self.bucket, Key=key, Body=body, IfNoneMatch="*", ContentType=content_type, **checksum))
                return str(response.get("ETag", ""))
            except StoreUnreachable:
                raise
            except Exception as exc:
                code = error_code(exc)
                if code in {"PreconditionFailed", "412"}:
                    raise AlreadyCommitted(f"{key} already exists") from None
                if code not in {"ConditionalRequestConflict", "409"} or delay is None:
                    raise
                time.sleep(delay)
        raise AssertionError("unreachable: the last attempt returns or raises")

    def put_if_match(self, key: str, body: bytes, etag: str, content_type: str = "application/json") -> str:
        """Replace ``key`` only if its ETag is still ``etag`` (``If-Match``); returns the new ETag.

        :class:`ConditionFailed` if the object changed (412) or a concurrent conditional write is in flight (409).
        """
        self.layout.check(key)
        try:
            response = call("conditional PUT", key, lambda: self.client.put_object(
                Bucket=self.bucket, Key=key, Body=body, IfMatch=etag, ContentType=content_type))
        except StoreUnreachable:
            raise
        except Exception as exc:
            if error_code(exc) in {"PreconditionFailed", "412", "ConditionalRequestConflict", "409", "NoSuchKey",
                                   "404"}:
                raise ConditionFailed(f"{key} changed since it was read") from None
            raise
        return str(response["ETag"])

    def get(self, key: str) -> bytes | None:
        """The body of ``key``, or ``None`` if it does not exist."""
        got = self.get_with_etag(key)
        return None if got is None else got[0]

    def get_with_etag(self, key: str) -> tuple[bytes, str] | None:
        """The body and ETag of ``key`` (for a later :meth:`put_if_match`), or ``None`` if it does not exist."""
        response = self._unless_missing("GET", key, lambda: self.client.get_object(Bucket=self.bucket, Key=key))
        if response is None:
            return None
        body: bytes = response["Body"].read()
        return body, str(response["ETag"])

    def put(self, key: str, body: bytes) -> None:
        """Write ``key`` unconditionally (a marker whose only news is its new last-modified time)."""
        self.layout.check(key)
        call("PUT", key, lambda: self.client.put_object(Bucket=self.bucket, Key=key, Body=body))

    def open(self, key: str) -> Opened | None:
        """The streaming body of ``key``, its length and ETag, or ``None`` if missing; :class:`ObjectUnservable`
        when the server answers the GET with a server error (5xx) after botocore's retries."""
        response = self._served("GET", key, lambda: self.client.get_object(Bucket=self.bucket, Key=key))
        return None if response is None else Opened(response["Body"], int(response["ContentLength"]),
                                                    str(response.get("ETag", "")))

    def servable(self, key: str) -> bool:
        """Whether the server serves ``key``'s first byte (a ranged GET): ``False`` when it answers a server error
        (:meth:`open`'s rule) or the object is gone."""
        try:
            response = self._served("GET", key, lambda: self.client.get_object(
                Bucket=self.bucket, Key=key, Range="bytes=0-0"))
        except ObjectUnservable:
            return False
        if response is None:
            return False
        response["Body"].close()  # the answer's status is the probe; its byte is not read
        return True

    def _served(self, method: str, key: str, request: Callable[[], Any]) -> Any:
        """:meth:`_unless_missing`, a server error (5xx) becoming :class:`ObjectUnservable` naming ``key``."""
        try:
            return self._unless_missing(method, key, request)
        except StoreUnreachable:
            raise
        except Exception as exc:
            if http_status(exc) >= 500:
                raise ObjectUnservable(f"S3 {method} of {key!r} answered {http_status(exc)} {error_code(exc)} "
                                       "after retries", key) from exc
            raise

    def put_replacing(self, key: str, body: bytes, sha256: str) -> str:
        """Write ``key`` unconditionally with ``sha256`` (hex) as its S3 checksum (the server refuses a body that
        does not match it); returns the new ETag. Only for a content-addressed object, whose name is its hash."""
        self.layout.check(key)
        response = call("PUT", key, lambda: self.client.put_object(
            Bucket=self.bucket, Key=key, Body=body, ContentType="application/octet-stream",
            ChecksumAlgorithm="SHA256", ChecksumSHA256=base64.b64encode(bytes.fromhex(sha256)).decode()))
        return str(response.get("ETag", ""))

    @staticmethod
    def chunks(key: str, body: Any) -> Iterator[bytes]:
        """The bytes of an opened ``body``, :data:`CHUNK` at a time; closes it."""
        with contextlib.closing(body):
            while chunk := call("GET", key, lambda: body.read(CHUNK)):
                yield chunk

    def sha256(self, key: str) -> str | None:
        """The SHA-256 (hex) of ``key``'s content, streamed; ``None`` if it does not exist."""
        opened = self.open(key)
        if opened is None:
            return None
        digest = hashlib.sha256()
        for chunk in self.chunks(key, opened.body):
            digest.update(chunk)
        return digest.hexdigest()

    def marker_exists(self, key: str) -> bool:
        """Whether another deployment's marker ``key`` (one of :meth:`Layout.enclosing_markers`) exists."""
        if key not in self.layout.enclosing_markers():
            raise UnsafeKeyError(f"key {key!r} is not a deployment marker at a parent of {self.layout.prefix!r}")
        response = self._unless_missing("HEAD", key, lambda: self.client.head_object(Bucket=self.bucket, Key=key),
                                        checked=True)
        return response is not None

    def head(self, key: str) -> Listed | None:
        """``key``'s size and last-modified time, or ``None`` if it does not exist."""
        response = self._unless_missing("HEAD", key, lambda: self.client.head_object(Bucket=self.bucket, Key=key))
        return None if response is None else Listed(key, int(response["ContentLength"]),
                                                     response["LastModified"].timestamp())

    def stat(self, key: str) -> Stat | None:
        """``key``'s HEAD with the checksum the server keeps (module rule), or ``None`` if it does not exist."""
        response = self._unless_missing("HEAD", key, lambda: self.client.head_object(
            Bucket=self.bucket, Key=key, ChecksumMode="ENABLED"))
        if response is None:
            return None
        return Stat(key, int(response["ContentLength"]), response["LastModified"].timestamp(),
                    str(response.get("ETag", "")), _full_sha256(response), server_now(response),
                    response.get("ChecksumCRC32") if response.get("ChecksumType", "FULL_OBJECT") == "FULL_OBJECT"
                    and "-" not in str(response.get("ChecksumCRC32", "")) else None)

    def clock(self) -> float:
        """The server's clock now (one LIST of at most one key under the results' root)."""
        prefix = self.layout.check(self.layout.root + "/")
        return server_now(call("LIST", prefix, lambda: self.client.list_objects_v2(
            Bucket=self.bucket, Prefix=prefix, MaxKeys=1)))

    def freshen(self, key: str) -> bool:
        """Give ``key`` a new last-modified time without sending its bytes (a server-side copy onto itself, like
        git's *freshen*), asking the server to keep its SHA-256 (where a copy computes one); ``False`` if it does
        not exist."""
        response = self._unless_missing("copy", key, lambda: self.client.copy_object(
            Bucket=self.bucket, Key=key, CopySource={"Bucket": self.bucket, "Key": key},
            MetadataDirective="REPLACE", ChecksumAlgorithm="SHA256"))
        return response is not None

    def move_aside(self, key: str, target: str, etag: str) -> bool:
        """Copy ``key`` to ``target`` and delete it, only while its ETag is ``etag`` (``If-Match`` on both, where
        the server honours it on DELETE); ``False`` if it is gone or another object stands there now."""
        self.layout.check(key)
        self.layout.check(target)
        gone = {"PreconditionFailed", "412", "NoSuchKey", "404", "NotFound"}
        for operation, request in (
                ("copy", lambda: self.client.copy_object(Bucket=self.bucket, Key=target, CopySourceIfMatch=etag,
                                                         CopySource={"Bucket": self.bucket, "Key": key})),
                ("DELETE", lambda: self.client.delete_object(Bucket=self.bucket, Key=key, IfMatch=etag))):
            try:
                call(operation, key, request)
            except StoreUnreachable:
                raise
            except Exception as exc:
                if error_code(exc) in gone:
                    return False
                raise
        return True

    def head_size(self, key: str) -> int | None:
        """The size of ``key``, or ``None`` if it does not exist."""
        response = self._unless_missing("HEAD", key, lambda: self.client.head_object(Bucket=self.bucket, Key=key))
        return None if response is None else int(response["ContentLength"])

    def _unless_missing(self, method: str, key: str, request: Callable[[], Any], checked: bool = False) -> Any:
        """``request``'s response for ``key`` (checked here unless the caller did), or ``None`` if it is missing."""
        if not checked:
            self.layout.check(key)
        try:
            return call(method, key, request)
        except StoreUnreachable:
            raise
        except Exception as exc:
            if error_code(exc) in {"NoSuchKey", "404", "NotFound"}:
                return None
            raise

    def listing(self, prefix: str) -> Iterator[Listed]:
        """Every object under ``prefix`` (paginated LIST)."""
        self.layout.check(prefix)
        paginator = self.client.get_paginator("list_objects_v2")
        pages = call("LIST", prefix, lambda: iter(paginator.paginate(Bucket=self.bucket, Prefix=prefix)))
        while True:
            page = call("LIST", prefix, lambda: next(pages, None))
            if page is None:
                return
            for item in page.get("Contents", []):
                yield Listed(item["Key"], int(item["Size"]), item["LastModified"].timestamp())

    def list_dirs(self, prefix: str) -> list[str]:
        """The common prefixes one level below ``prefix`` (LIST with delimiter ``/``)."""
        return self.level(prefix)[0]

    def level(self, prefix: str) -> tuple[list[str], list[Listed]]:
        """One level below ``prefix`` (LIST with delimiter ``/``): the common prefixes and the objects."""
        self.layout.check(prefix)
        paginator = self.client.get_paginator("list_objects_v2")
        dirs: list[str] = []
        files: list[Listed] = []
        for page in call("LIST", prefix, lambda: list(paginator.paginate(
                Bucket=self.bucket, Prefix=prefix, Delimiter="/"))):
            dirs.extend(p["Prefix"] for p in page.get("CommonPrefixes", []))
            files.extend(Listed(i["Key"], int(i["Size"]), i["LastModified"].timestamp())
                         for i in page.get("Contents", []))
        return dirs, files

    def delete(self, keys: list[str]) -> int:
        """Delete ``keys`` in batches of 1,000; returns how many were deleted."""
        for key in keys:
            self.layout.check(key)
        for start in range(0, len(keys), 1000):
            batch = [{"Key": k} for k in keys[start:start + 1000]]
            response = call("DELETE", batch[0]["Key"], lambda b=batch: self.client.delete_objects(  # type: ignore[misc]
                Bucket=self.bucket, Delete={"Objects": b, "Quiet": True}))
            if response.get("Errors"):
                raise StoreError(f"deleting under {keys[0]!r} failed: {response['Errors'][:3]}")
        return len(keys)

    def uploads(self, prefix: str) -> list[Upload]:
        """Every incomplete multipart upload under ``prefix`` (paginated LIST uploads)."""
        self.layout.check(prefix)
        paginator = self.client.get_paginator("list_multipart_uploads")
        pages = call("LIST uploads", prefix, lambda: list(paginator.paginate(Bucket=self.bucket, Prefix=prefix)))
        return [Upload(u["Key"], u["UploadId"], u["Initiated"].timestamp())
                for page in pages for u in page.get("Uploads", []) if u["Key"].startswith(prefix)]

    def last_activity(self, upload: Upload) -> float:
        """When ``upload`` last changed: its newest part's LastModified (ListParts), else its initiation."""
        self.layout.check(upload.key)
        paginator = self.client.get_paginator("list_parts")
        try:
            pages = call("LIST parts", upload.key, lambda: list(paginator.paginate(
                Bucket=self.bucket, Key=upload.key, UploadId=upload.upload_id)))
        except StoreUnreachable:
            raise
        except Exception as exc:
            if error_code(exc) in {"NoSuchUpload", "404"}:  # completed or aborted meanwhile: not a live upload
                return upload.initiated
            raise
        parts = [float(p["LastModified"].timestamp()) for page in pages for p in page.get("Parts", [])]
        return max([upload.initiated, *parts])

    def abort_upload(self, key: str, upload_id: str) -> None:
        """Abort one multipart upload (ignores one that is already gone)."""
        self.layout.check(key)
        try:
            self.client.abort_multipart_upload(Bucket=self.bucket, Key=key, UploadId=upload_id)
        except Exception as exc:
            if error_code(exc) not in {"NoSuchUpload", "404"}:
                raise

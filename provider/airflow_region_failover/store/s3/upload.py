"""Streaming multipart upload: a file-like sink that is visible on the store only when complete.

Rule: the key passes :meth:`..keys.Layout.check` first; parts are uploaded on threads while the caller keeps
writing (at most ``threads + 1`` parts in flight); ``finish()`` completes the upload (a single PUT when it fits
one part); any exception inside the ``with`` block or in ``finish`` aborts the multipart upload, so the key never
appears half-written.
"""

from __future__ import annotations

import contextlib
import hashlib
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any

from airflow_region_failover.store.s3.objects import Objects, call


class UploadStream:
    """File-like sink: buffers ``part_size`` bytes per part, uploads parts on ``threads`` threads.

    ``finish()`` completes the upload (a single PUT if it fits in one part) and returns (size, sha256); any
    exception inside the ``with`` block, or in ``finish``, aborts the multipart upload: the key never appears.
    """

    def __init__(self, objects: Objects, key: str, part_size: int, threads: int) -> None:
        self._objects, self.key, self._part_size = objects, objects.layout.check(key), part_size
        self._buffer = bytearray()
        self._sha = hashlib.sha256()
        self._size = 0
        self._upload_id: str | None = None
        self._parts: list[Future[dict[str, Any]]] = []
        self._pool = ThreadPoolExecutor(max_workers=threads) if threads > 1 else None
        self.closed = False

    # -- file protocol used by pyarrow --------------------------------------------------------------------
    def write(self, data: bytes | bytearray | memoryview) -> int:
        """Append ``data``; full parts are handed to the upload threads."""
        view = memoryview(data)
        self._sha.update(view)
        self._size += len(view)
        self._buffer += view
        while len(self._buffer) >= self._part_size:
            with memoryview(self._buffer) as whole:
                part = bytes(whole[: self._part_size])  # one copy (a bytearray slice would copy twice)
            self._submit(part)
            del self._buffer[: self._part_size]
        return len(view)

    def tell(self) -> int:
        """Bytes written so far."""
        return self._size

    def flush(self) -> None:
        """No-op (parts are uploaded as they fill)."""

    def writable(self) -> bool:
        """Always true."""
        return True

    def close(self) -> None:
        """Mark closed (pyarrow may call this); completion happens in :meth:`finish`."""
        self.closed = True

    # -- upload ---------------------------------------------------------------------------------------------
    def _submit(self, body: bytes) -> None:
        client, bucket = self._objects.client, self._objects.bucket
        if self._upload_id is None:
            response = call("create multipart upload", self.key,
                            lambda: client.create_multipart_upload(Bucket=bucket, Key=self.key))
            self._upload_id = response["UploadId"]
        number = len(self._parts) + 1
        upload_id = self._upload_id

        def send() -> dict[str, Any]:
            response = call("upload part", self.key, lambda: client.upload_part(
                Bucket=bucket, Key=self.key, UploadId=upload_id, PartNumber=number, Body=body))
            return {"PartNumber": number, "ETag": response["ETag"]}

        self._parts.append(self._pool.submit(send) if self._pool else _done(send))
        self._bound_in_flight()

    def _bound_in_flight(self) -> None:
        limit = (self._pool._max_workers if self._pool else 1) + 1
        pending = [f for f in self._parts if not f.done()]
        if len(pending) > limit:
            pending[0].result()

    def finish(self) -> tuple[int, str]:
        """Complete the upload; returns (size, sha256 hex)."""
        client, bucket = self._objects.client, self._objects.bucket
        if self._upload_id is None:
            body = bytes(self._buffer)
            call("PUT", self.key, lambda: client.put_object(Bucket=bucket, Key=self.key, Body=body))
        else:
            if self._buffer:
                self._submit(bytes(self._buffer))
            parts = [f.result() for f in self._parts]
            call("complete multipart upload", self.key, lambda: client.complete_multipart_upload(
                Bucket=bucket, Key=self.key, UploadId=self._upload_id, MultipartUpload={"Parts": parts}))
        self._buffer.clear()
        self._shutdown()
        return self._size, self._sha.hexdigest()

    def abort(self) -> None:
        """Abort the multipart upload (best effort) and drop buffered data."""
        self._buffer.clear()
        for future in self._parts:
            future.cancel()
        self._shutdown()
        if self._upload_id is not None:
            with contextlib.suppress(Exception):  # best effort: the sweeper aborts what is left
                self._objects.abort_upload(self.key, self._upload_id)

    def _shutdown(self) -> None:
        if self._pool is not None:
            self._pool.shutdown(wait=True, cancel_futures=True)
            self._pool = None

    def __enter__(self) -> UploadStream:
        return self

    def __exit__(self, kind: object, value: object, traceback: object) -> None:
        if kind is not None:
            self.abort()


def _done(fn: Callable[[], dict[str, Any]]) -> Future[dict[str, Any]]:
    future: Future[dict[str, Any]] = Future()
    try:
        future.set_result(fn())
    except BaseException as exc:
        future.set_exception(exc)
    return future

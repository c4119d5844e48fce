"""A loopback HTTP proxy in front of an S3 server that answers chosen requests with a fault — for failure-injection
tests on the real stack (SeaweedFS) instead of a mock.

Rules:

* **Forwarding.** Every request is forwarded unchanged — method, path with query, headers (``Host`` included, so
  a SigV4 signature made for the proxy's address still verifies upstream: the server signs what it receives) and
  body (``Content-Length`` bytes) — to ``upstream`` (``http://host:port``), and the answer is sent back (body read
  whole, so sized by ``Content-Length``; a HEAD's headers as they came). Point a client at :attr:`FaultProxy.url`.
* **Faults.** A :class:`Fault` answers the requests it matches itself, without forwarding: ``method`` and an exact
  ``key`` (the path after ``/<bucket>/``, URL-decoded; the proxy serves path-style requests, as the project's
  clients send them) get ``status`` with an S3 XML error body (``code``), for at most ``times`` requests (``None``:
  every one), or until a PUT of the key succeeds (``until_put``) — e.g. ``Fault("GET", key)`` is a server that
  lists and HEADs an object but cannot serve it (a disk CRC error). :meth:`FaultProxy.add` / :meth:`FaultProxy.clear`
  change them while the proxy runs; :attr:`answered` counts the requests each fault answered (to show it was hit).
* **Bounded.** It listens on ``127.0.0.1`` on a free port only, in daemon threads; upstream calls time out after
  ``upstream_timeout`` seconds (answered 502); it stops itself after ``lifetime`` seconds even if a test forgets,
  and :meth:`FaultProxy.stop` (or leaving the ``with`` block) stops it at once. Standard library only.
"""

from __future__ import annotations

import http.client
import threading
import urllib.parse
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import TracebackType

_HOP_BY_HOP = {"connection", "keep-alive", "transfer-encoding", "proxy-connection", "upgrade", "te", "trailer"}


@dataclass(frozen=True)
class Fault:
    """Answer ``method`` requests of ``key`` (bucket-relative) with ``status``/``code``, ``times`` times
    (``None``: always); ``until_put``: only until a PUT of ``key`` is answered 2xx upstream (the bad copy replaced,
    as a rewrite on a server with a bad disk sector makes the object servable again)."""

    method: str
    key: str
    status: int = 500
    code: str = "InternalError"
    times: int | None = None
    until_put: bool = False

    def body(self) -> bytes:
        """The S3 XML error a server sends with this status."""
        return (f'<?xml version="1.0" encoding="UTF-8"?><Error><Code>{self.code}</Code>'
                f"<Message>injected by the test's fault proxy</Message><Key>{self.key}</Key></Error>").encode()


class FaultProxy:
    """The proxy (module rule): ``with FaultProxy(upstream) as proxy: ... proxy.url ...``."""

    def __init__(self, upstream: str, bucket: str, *, lifetime: float = 600.0, upstream_timeout: float = 30.0) -> None:
        parsed = urllib.parse.urlsplit(upstream)
        if parsed.scheme != "http" or not parsed.hostname:
            raise ValueError(f"upstream {upstream!r}: give the S3 server's plain http://host:port URL")
        self.upstream_host, self.upstream_port = parsed.hostname, parsed.port or 80
        self.bucket, self.lifetime, self.upstream_timeout = bucket, lifetime, upstream_timeout
        self._faults: list[Fault] = []
        self.answered: dict[Fault, int] = {}
        self._lock = threading.Lock()
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, name="s3-fault-proxy", daemon=True)
        self._timer = threading.Timer(lifetime, self.stop)
        self._timer.daemon = True
        self._stopped = False

    @property
    def url(self) -> str:
        """``http://127.0.0.1:<port>``: the endpoint a client uses instead of the server's."""
        return f"http://127.0.0.1:{self._server.server_address[1]}"

    def start(self) -> FaultProxy:
        """Serve in the background (stops itself after ``lifetime`` seconds)."""
        self._thread.start()
        self._timer.start()
        return self

    def stop(self) -> None:
        """Stop serving and close the socket (idempotent)."""
        with self._lock:
            if self._stopped:
                return
            self._stopped = True
        self._timer.cancel()
        self._server.shutdown()
        self._server.server_close()

    def __enter__(self) -> FaultProxy:
        return self.start()

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None) -> None:
        self.stop()

    def add(self, fault: Fault) -> None:
        """Start answering ``fault``'s requests."""
        with self._lock:
            self._faults.append(fault)
            self.answered.setdefault(fault, 0)

    def clear(self) -> None:
        """Forward every request again."""
        with self._lock:
            self._faults.clear()

    def _key(self, path: str) -> str | None:
        key = urllib.parse.unquote(urllib.parse.urlsplit(path).path).lstrip("/")
        return key[len(self.bucket) + 1:] if key.startswith(self.bucket + "/") else None

    def _put_done(self, path: str) -> None:
        """A PUT of ``path``'s key succeeded: the faults that last ``until_put`` on it end."""
        key = self._key(path)
        with self._lock:
            self._faults = [f for f in self._faults if not (f.until_put and f.key == key)]

    def _fault_for(self, method: str, path: str) -> Fault | None:
        key = self._key(path)
        if key is None:
            return None
        with self._lock:
            for fault in self._faults:
                spent = fault.times is not None and self.answered[fault] >= fault.times
                if fault.method == method and fault.key == key and not spent:
                    self.answered[fault] += 1
                    return fault
        return None

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        proxy = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, format: str, *args: object) -> None:
                return

            def _relay(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(length) if length else b""
                fault = proxy._fault_for(self.command, self.path)
                if fault is not None:
                    self._answer(fault.status, [("Content-Type", "application/xml")], fault.body())
                    return
                try:
                    status, headers, answer = self._forward(body)
                except OSError as exc:
                    self._answer(502, [("Content-Type", "text/plain")], f"upstream: {exc}".encode())
                    return
                if self.command == "PUT" and 200 <= status < 300:
                    proxy._put_done(self.path)
                self._answer(status, headers, answer)

            def _forward(self, body: bytes) -> tuple[int, list[tuple[str, str]], bytes]:
                conn = http.client.HTTPConnection(proxy.upstream_host, proxy.upstream_port,
                                                  timeout=proxy.upstream_timeout)
                try:
                    conn.putrequest(self.command, self.path, skip_host=True, skip_accept_encoding=True)
                    for name, value in self.headers.items():
                        if name.lower() not in _HOP_BY_HOP | {"expect"}:  # 100-continue was answered here
                            conn.putheader(name, value)
                    conn.endheaders(body or None)
                    response = conn.getresponse()
                    answer = response.read()
                    return response.status, response.getheaders(), answer
                finally:
                    conn.close()

            def _answer(self, status: int, headers: list[tuple[str, str]], body: bytes) -> None:
                self.send_response(status)
                sized = False
                for name, value in headers:
                    lower = name.lower()
                    if lower in _HOP_BY_HOP:
                        continue
                    if lower == "content-length":
                        if self.command != "HEAD":
                            continue  # re-sized below from the body actually read
                        sized = True
                    self.send_header(name, value)
                if not sized:
                    self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                if self.command != "HEAD" and body:
                    self.wfile.write(body)

            do_GET = do_PUT = do_POST = do_DELETE = do_HEAD = _relay

        return Handler

"""A fault-injecting S3 proxy on loopback, in front of a real S3-compatible server (SeaweedFS), for tests that
put the failure at the S3 boundary: the product talks to the proxy's endpoint as to any S3 server.

Rules:

* **Everything passes through unchanged** — method, path, query, headers (``Host`` too, so SigV4 signatures
  made for the proxy's address still verify) and body — except requests a :class:`Fault` takes.
* **A fault matches a request** by method and a predicate on the object key (``/<bucket>/<key>``, path-style
  addressing, decoded), and then either answers a 5xx itself (an S3 XML error; the server never sees the request)
  or holds a PUT's body ``delay`` seconds before passing it on. It takes ``times`` requests, or every one
  (``None``); ``until_put`` ends it at the first PUT of the same key that passes through (an object the server
  cannot serve until it is written again, as a disk with a CRC error on it).
* **Bounded**: at most :data:`MAX_CONNECTIONS` client connections at once (more wait to be accepted), every socket
  with a timeout, the request log the newest :data:`LOG_SIZE` entries; a port picked by binding 0 (:attr:`port`),
  threads stopped when the context manager exits.
"""

from __future__ import annotations

import http.client
import http.server
import socketserver
import threading
import time
import urllib.parse
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from types import TracebackType

MAX_CONNECTIONS = 64
LOG_SIZE = 10_000
SOCKET_TIMEOUT = 120.0
HOP_BY_HOP = {"connection", "keep-alive", "proxy-connection", "transfer-encoding", "te", "trailer", "upgrade"}


@dataclass
class Fault:
    """Requests ``method`` of a key ``keys(key)`` accepts: answered ``status`` (when ``delay`` is 0) or passed on
    after ``delay`` seconds; ``times`` of them (``None``: every one); ``until_put``: until a PUT of that key passes
    through. :attr:`taken` lists the keys of the requests it took."""

    method: str
    keys: Callable[[str], bool]
    status: int = 503
    times: int | None = None
    delay: float = 0.0
    until_put: bool = False
    taken: list[str] = field(default_factory=list)
    healed: set[str] = field(default_factory=set)

    def __post_init__(self) -> None:
        if self.method not in {"GET", "PUT", "HEAD", "POST", "DELETE"}:
            raise ValueError(f"Fault method {self.method!r}: name an HTTP method S3 uses")
        if self.delay < 0 or (self.delay and self.method != "PUT"):
            raise ValueError(f"Fault delay {self.delay}: a delay >= 0 holds a PUT's body only")


@dataclass(frozen=True)
class Logged:
    """One request the proxy saw: method, key, the status answered and whether a fault took it."""

    method: str
    key: str
    status: int
    faulted: bool


class FaultProxy:
    """The proxy (module rule): ``with FaultProxy("http://127.0.0.1:8333") as proxy: ... proxy.endpoint_url``."""

    def __init__(self, upstream: str) -> None:
        parsed = urllib.parse.urlsplit(upstream)
        if parsed.scheme != "http" or not parsed.hostname:
            raise ValueError(f"upstream {upstream!r}: give the S3 server's http://host:port")
        self.upstream = (parsed.hostname, parsed.port or 80)
        self.faults: list[Fault] = []
        self.log: deque[Logged] = deque(maxlen=LOG_SIZE)
        self._lock = threading.Lock()
        self._server: _Server | None = None
        self._thread: threading.Thread | None = None

    @property
    def port(self) -> int:
        if self._server is None:
            raise RuntimeError("the proxy is not started: use it as a context manager")
        return int(self._server.server_address[1])

    @property
    def endpoint_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def add(self, fault: Fault) -> Fault:
        """Arm ``fault`` (in effect for the next matching request)."""
        with self._lock:
            self.faults.append(fault)
        return fault

    def remove(self, fault: Fault) -> None:
        with self._lock:
            self.faults.remove(fault)

    def seen(self, method: str, keys: Callable[[str], bool]) -> list[Logged]:
        """The logged requests ``method`` of keys ``keys`` accepts."""
        return [entry for entry in list(self.log) if entry.method == method and keys(entry.key)]

    def take(self, method: str, key: str) -> Fault | None:
        """The fault that takes this request (counting it), if any."""
        with self._lock:
            for fault in self.faults:
                if fault.method != method or (fault.times is not None and len(fault.taken) >= fault.times):
                    continue
                if key in fault.healed or not fault.keys(key):
                    continue
                fault.taken.append(key)
                return fault
        return None

    def passed(self, method: str, key: str, status: int) -> None:
        """A request the server answered: a successful PUT ends the ``until_put`` faults on its key."""
        if method == "PUT" and status < 300:
            with self._lock:
                for fault in self.faults:
                    if fault.until_put and fault.keys(key):
                        fault.healed.add(key)

    def __enter__(self) -> FaultProxy:
        self._server = _Server(("127.0.0.1", 0), _Handler)
        self._server.proxy = self
        self._thread = threading.Thread(target=self._server.serve_forever, name="s3-fault-proxy", daemon=True)
        self._thread.start()
        return self

    def __exit__(self, kind: type[BaseException] | None, value: BaseException | None,
                 tb: TracebackType | None) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
        if self._thread is not None:
            self._thread.join(10)
        self._server = self._thread = None


class _Server(socketserver.ThreadingMixIn, http.server.HTTPServer):
    daemon_threads = True
    block_on_close = False
    proxy: FaultProxy

    def __init__(self, address: tuple[str, int], handler: type[http.server.BaseHTTPRequestHandler]) -> None:
        super().__init__(address, handler)
        self.slots = threading.BoundedSemaphore(MAX_CONNECTIONS)

    def process_request(self, request: object, client_address: object) -> None:
        self.slots.acquire()
        super().process_request(request, client_address)  # type: ignore[arg-type]

    def shutdown_request(self, request: object) -> None:
        super().shutdown_request(request)  # type: ignore[arg-type]
        self.slots.release()


def key_of(path: str) -> str:
    """``/<bucket>/<key>?query`` -> ``<key>`` (decoded; ``""`` for a bucket-level request)."""
    bare = urllib.parse.urlsplit(path).path
    return urllib.parse.unquote(bare.lstrip("/").partition("/")[2])


class _Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    timeout = SOCKET_TIMEOUT
    server: _Server
    upstream_conn: http.client.HTTPConnection | None = None

    def log_message(self, format: str, *args: object) -> None:
        """Quiet: the request log is :attr:`FaultProxy.log`."""

    def _body(self) -> bytes:
        if self.headers.get("Transfer-Encoding", "").lower() == "chunked":
            chunks: list[bytes] = []
            while True:
                size = int(self.rfile.readline().split(b";")[0].strip() or b"0", 16)
                if size == 0:
                    while self.rfile.readline().strip():
                        pass
                    return b"".join(chunks)
                chunks.append(self.rfile.read(size))
                self.rfile.readline()
        return self.rfile.read(int(self.headers.get("Content-Length") or 0))

    def _handle(self) -> None:
        proxy = self.server.proxy
        key = key_of(self.path)
        body = self._body()
        fault = proxy.take(self.command, key)
        if fault is not None and not fault.delay:
            self._answer_error(fault.status, key)
            proxy.log.append(Logged(self.command, key, fault.status, True))
            return
        if fault is not None:
            time.sleep(fault.delay)
        status = self._forward(body)
        proxy.passed(self.command, key, status)
        proxy.log.append(Logged(self.command, key, status, fault is not None))

    do_GET = do_PUT = do_HEAD = do_POST = do_DELETE = _handle

    def _answer_error(self, status: int, key: str) -> None:
        code = "ServiceUnavailable" if status == 503 else "InternalError"
        text = (f'<?xml version="1.0" encoding="UTF-8"?>\n<Error><Code>{code}</Code><Message>injected by the test\'s '
                f"S3 fault proxy</Message><Key>{key}</Key></Error>").encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/xml")
        self.send_header("Content-Length", str(len(text)))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(text)

    def _forward(self, body: bytes) -> int:
        headers = {name: value for name, value in self.headers.items() if name.lower() not in HOP_BY_HOP}
        if self.headers.get("Transfer-Encoding", "").lower() == "chunked" or body:
            headers["Content-Length"] = str(len(body))
        for _ in range(2):  # a kept-alive upstream connection the server closed meanwhile: open a new one once
            if self.upstream_conn is None:
                self.upstream_conn = http.client.HTTPConnection(*self.server.proxy.upstream, timeout=SOCKET_TIMEOUT)
            try:
                self.upstream_conn.request(self.command, self.path, body=body or None, headers=headers)
                response = self.upstream_conn.getresponse()
                break
            except (http.client.RemoteDisconnected, ConnectionResetError, BrokenPipeError):
                self.upstream_conn.close()
                self.upstream_conn = None
        else:
            self.close_connection = True
            return 502
        payload = response.read()
        self.send_response_only(response.status, response.reason)
        for name, value in response.getheaders():
            if name.lower() not in HOP_BY_HOP and name.lower() != "content-length":
                self.send_header(name, value)
        length = response.getheader("Content-Length")
        self.send_header("Content-Length", length if self.command == "HEAD" and length else str(len(payload)))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(payload)
        return response.status

    def finish(self) -> None:
        super().finish()
        if self.upstream_conn is not None:
            self.upstream_conn.close()

"""Launchers that pick a free port and bind it later lose a race now and then: another process (another test
session's server, a parallel CI job) binds the port in between. A launcher must notice that the server it reached
is not the one it started, and start again on new ports — never read another server's answers as its own.

Real processes and sockets: a foreign server holds the port; the launched "server" is a process that binds nothing.
"""

from __future__ import annotations

import socket
import subprocess
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from devtools.cluster import Redis, SparkCluster


class _HtmlPage(BaseHTTPRequestHandler):
    """What an Airflow api-server answers on any path it does not know: its UI's HTML page."""

    def do_GET(self) -> None:
        body = b"<!doctype html><html><head><title>Airflow</title></head></html>"
        self.send_response(200)
        self.send_header("Content-Type", "text/html")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: Any) -> None:
        pass


@pytest.fixture
def foreign_html() -> Iterator[int]:
    """A port held by another server answering HTML."""
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), _HtmlPage)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    try:
        yield int(httpd.server_address[1])
    finally:
        httpd.shutdown()
        httpd.server_close()


@pytest.fixture
def foreign_pong() -> Iterator[int]:
    """A port held by another server that answers ``+PONG`` to anything (as another Redis would)."""
    server = socket.create_server(("127.0.0.1", 0))
    stop = threading.Event()

    def serve() -> None:
        server.settimeout(0.2)
        while not stop.is_set():
            try:
                conn, _ = server.accept()
            except OSError:
                continue
            with conn:
                conn.recv(64)
                conn.sendall(b"+PONG\r\n")

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    try:
        yield int(server.getsockname()[1])
    finally:
        stop.set()
        thread.join(timeout=5)
        server.close()


def _binds_nothing() -> subprocess.Popen[bytes]:
    return subprocess.Popen(["sleep", "60"], start_new_session=True)


def test_a_master_web_port_another_server_took_is_a_clash_to_start_again_from(foreign_html: int,
                                                                              tmp_path: Path) -> None:
    """The CI flake: the master's ``/json/`` answered with another server's HTML page (JSONDecodeError, which no
    retry caught). The launcher must see that the port is not its master's and raise a clash it retries on."""
    cluster = SparkCluster(tmp_path, workers=1, startup_timeout=10)
    master, worker = _binds_nothing(), _binds_nothing()
    cluster._master, cluster._workers = master, [worker]
    cluster.master_port, cluster.master_web_port = 1, foreign_html
    cluster._worker_web_ports = [2]  # type: ignore[attr-defined]
    try:
        with pytest.raises(RuntimeError, match=rf"port {foreign_html} .*another process"):
            cluster._wait_alive()
    finally:
        for process in (master, worker):
            process.kill()
            process.wait()


def test_a_redis_port_another_server_took_is_never_reported_as_ours(foreign_pong: int, tmp_path: Path,
                                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    """Another server answers PING on the port our redis-server could not bind: the launcher must not hand out
    that server's URL as ours (it starts again on new ports, and says so when every try clashed)."""
    import devtools.databases as databases

    monkeypatch.setattr(databases, "free_ports", lambda count: [foreign_pong] * count)
    monkeypatch.setattr(Redis, "command", lambda self, port: ["sleep", "60"])
    server = Redis(tmp_path, startup_timeout=5)
    try:
        with pytest.raises(RuntimeError, match=rf"port {foreign_pong} .*another process"):
            server.start(attempts=2)
    finally:
        server.stop(grace=2)

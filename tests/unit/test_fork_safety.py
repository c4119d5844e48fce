"""Nothing is inherited across a fork: a child forked after its parent built its clients (a LocalExecutor worker
forked from a scheduler whose watcher ran, a task process forked from that worker) builds its own on first use,
and the parent's keep working.

Observed on the wire: a local HTTP/1.1 server with keep-alive records which connection (client port) carried each
request. The parent's clients open one connection each; a child that used the parent's client would send its
request over that very connection (two processes on one socket: each may read the other's answer).
"""

from __future__ import annotations

import ast
import json
import os
import threading
import warnings
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

import airflow_region_failover
from airflow_region_failover.decisions import storage
from airflow_region_failover.plugins import rest
from airflow_region_failover.spark import session as spark_session
from airflow_region_failover.store import config, result_store
from airflow_region_failover.store.s3 import clients

ROOT = Path(airflow_region_failover.__file__).parent
#: caches that hold no socket, pool or session (values only): these may be plain functools caches
VALUE_CACHES = {"plugins/metadata_db.py:_of_version", "observability/lineage.py:_run_facet_class"}


class _Recorder(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # keep-alive: a client reuses its connection
    seen: list[tuple[str, int]] = []

    def _answer(self, body: bytes) -> None:
        self.seen.append((self.path, self.client_address[1]))
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)

    def do_GET(self) -> None:
        self._answer(json.dumps({"path": self.path}).encode())

    def do_HEAD(self) -> None:
        self._answer(b"")

    def log_message(self, *args: Any) -> None:
        pass


@pytest.fixture
def server() -> Iterator[tuple[str, list[tuple[str, int]]]]:
    seen: list[tuple[str, int]] = []
    handler = type("Handler", (_Recorder,), {"seen": seen})
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    httpd.block_on_close = False  # the keep-alive connections' threads end with the test process
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{httpd.server_address[1]}", seen
    finally:
        httpd.shutdown()
        httpd.server_close()


@pytest.fixture
def caches(server: tuple[str, list[tuple[str, int]]], monkeypatch: pytest.MonkeyPatch) -> Iterator[dict[str, Any]]:
    """The provider's process-wide clients, built in this process against the recording server."""
    url, _ = server
    access = clients.S3Access(endpoint_url=url, credentials=clients.S3Credentials("AK", "SK"), max_attempts=1)
    monkeypatch.setattr(rest, "_connection_credentials", lambda: rest.ApiCredentials(url, token="t"))
    monkeypatch.setattr(result_store.ResultStore, "from_airflow",
                        classmethod(lambda cls: cls(config.StoreConfig(bucket="fork-test", access=access))))
    monkeypatch.setattr(result_store.ResultStore, "start_up", lambda self: self)
    monkeypatch.setattr(spark_session, "_build", lambda target: object())
    factories: dict[str, Callable[[], Any]] = {
        "store.clients.client_for": lambda: clients.client_for(access),
        "store.result_store.default_store": result_store.default_store,
        "decisions.storage.default_run_logs": storage.default_run_logs,
        "plugins.rest.default_api": rest.default_api,
        "spark.session._session": lambda: spark_session._session("sc://target"),  # type: ignore[arg-type]
    }
    clear = (clients.client_for, result_store.default_store, storage.default_run_logs, rest.default_api,
             spark_session._session)
    for cache in clear:
        cache.cache_clear()
    try:
        yield factories
    finally:
        for cache in clear:
            cache.cache_clear()


def in_child(work: Callable[[], dict[str, Any]]) -> dict[str, Any]:
    """Run ``work`` in a forked child; its JSON answer (or the error it raised)."""
    read, write = os.pipe()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)  # "this process is multi-threaded": as Airflow forks
        pid = os.fork()
    if pid == 0:  # the child: answer, then leave without running the parent's clean-ups
        try:
            answer = json.dumps(work())
        except BaseException as exc:
            answer = json.dumps({"error": f"{type(exc).__name__}: {exc}"})
        os.write(write, answer.encode())
        os._exit(0)
    os.close(write)
    chunks = []
    while chunk := os.read(read, 65536):
        chunks.append(chunk)
    os.close(read)
    os.waitpid(pid, 0)
    return dict(json.loads(b"".join(chunks)))


def test_a_forked_child_builds_its_own_clients_and_the_parents_keep_working(
        caches: dict[str, Any], server: tuple[str, list[tuple[str, int]]]) -> None:
    _, seen = server
    built = {name: factory() for name, factory in caches.items()}
    built["store.clients.client_for"].head_bucket(Bucket="fork-parent")
    built["plugins.rest.default_api"].get("/parent")
    parent_ports = {port for _, port in seen}

    def child() -> dict[str, Any]:
        again = {name: factory() for name, factory in caches.items()}
        again["store.clients.client_for"].head_bucket(Bucket="fork-child")
        again["plugins.rest.default_api"].get("/child")
        return {"inherited": sorted(name for name, value in again.items() if value is built[name])}

    answer = in_child(child)
    assert answer == {"inherited": []}, f"a forked child reuses its parent's objects: {answer}"
    child_ports = {port for path, port in seen if "child" in path}
    assert child_ports and not child_ports & parent_ports, f"the child spoke over the parent's connection: {seen}"
    assert all(factory() is built[name] for name, factory in caches.items()), "the parent's cache was reset"
    built["store.clients.client_for"].head_bucket(Bucket="fork-parent-again")
    assert built["plugins.rest.default_api"].get("/parent-again") == {"path": "/api/v2/parent-again"}
    assert {port for path, port in seen if "parent-again" in path} <= parent_ports, "the parent reconnected"


def _cached_functions() -> Iterator[tuple[str, str]]:
    """``(file:function, decorator)`` of every function of the package cached with functools or per_process."""
    for path in sorted(ROOT.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                for decorator in node.decorator_list:
                    text = ast.unparse(decorator)
                    if any(word in text for word in ("lru_cache", "functools.cache", "per_process")):
                        yield f"{path.relative_to(ROOT)}:{node.name}", text


def test_every_process_wide_cache_of_a_client_is_reset_in_a_forked_child() -> None:
    """One mechanism for every cache: a cache is ``per_process`` (reset at fork) unless it holds values only."""
    found = dict(_cached_functions())
    plain = sorted(name for name, decorator in found.items()
                   if "per_process" not in decorator and name not in VALUE_CACHES)
    assert not plain, f"caches a forked child would inherit (declare them with process_cache.per_process): {plain}"
    assert set(found) >= VALUE_CACHES, "a listed value cache is gone: update VALUE_CACHES"

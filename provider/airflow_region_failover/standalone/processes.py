"""Local server processes: free loopback ports, stopping a server's whole process group, and a guard that stops
everything a stack started when the process that started it dies.

Rules:
- a port picked free (:func:`free_ports`) is bound later by the server, and another process may bind it in
  between (a parallel test session, another stack): before a launcher trusts what answers on a port it checks that
  the server it started (or a descendant) listens there (:func:`ours_listening`); another process's listener
  there is a clash (:class:`PortTaken`, a ``RuntimeError``), on which :func:`start_with_retries` starts again on
  new ports;
- every local server (SeaweedFS, Spark Connect, Airflow components, PostgreSQL, ...) is started in its own session
  (``start_new_session=True``), so signalling its process group reaches every child it spawned (a JVM, workers);
- before the first server starts, :func:`ensure_guard` marks this process's environment with a stack id
  (``REGION_FAILOVER_STACK``), which every descendant inherits (a task process, an executor JVM, a Python worker),
  and starts a guard process. The guard waits for the starting process to end — normally, by SIGTERM or SIGKILL:
  its end closes the guard's stdin — and then stops every process carrying the id (SIGTERM, then SIGKILL). The
  id, not the process tree, decides: processes that re-parented or started their own session are found too;
- a process that rewrites its own environment block (``setproctitle``: Airflow's api-server, its workers) loses the
  id, so each server is also :func:`register`-ed with the guard by its process group, and the guard stops those
  groups too (a group stopped normally is unregistered first, so a reused id is never signalled).
"""

from __future__ import annotations

import contextlib
import os
import secrets
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable
from typing import IO, TypeVar

import psutil

_T = TypeVar("_T")

# Set in os.environ by PySpark itself once a process has built a Spark Connect session; a child that inherits it
# can no longer build a classic (embedded) session ("CONNECT_URL_NOT_SET"). Never passed on to a child.
PYSPARK_CLIENT_MARKERS = ("SPARK_CONNECT_MODE_ENABLED",)


def inherited_environment(drop_prefixes: tuple[str, ...] = ()) -> dict[str, str]:
    """This process's environment for a child server or task: without PySpark's in-process client markers and
    without variables starting with any of ``drop_prefixes`` (e.g. ``AIRFLOW__`` when the child gets its own)."""
    return {k: v for k, v in os.environ.items()
            if k not in PYSPARK_CLIENT_MARKERS and not (drop_prefixes and k.startswith(drop_prefixes))}


def free_ports(count: int) -> list[int]:
    """``count`` distinct ports that are free on 127.0.0.1 right now (the OS picks them)."""
    sockets = [socket.socket(socket.AF_INET, socket.SOCK_STREAM) for _ in range(count)]
    try:
        for sock in sockets:
            sock.bind(("127.0.0.1", 0))
        return [sock.getsockname()[1] for sock in sockets]
    finally:
        for sock in sockets:
            sock.close()


class PortTaken(RuntimeError):
    """Another process listens on a port a launcher picked for its own server (start again on new ports)."""


def _listening(procs: list[psutil.Process]) -> set[int]:
    """The TCP ports ``procs`` listen on."""
    ports: set[int] = set()
    for proc in procs:
        with contextlib.suppress(psutil.Error):
            ports.update(c.laddr.port for c in proc.net_connections(kind="tcp") if c.status == psutil.CONN_LISTEN)
    return ports


def _listened_by_anyone(port: int) -> bool:
    """Whether any process listens on TCP ``port`` (Linux's socket tables: no walk over every process's files)."""
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        with contextlib.suppress(OSError), open(table) as rows:
            next(rows, None)
            for row in rows:
                local, state = row.split()[1], row.split()[3]
                if state == "0A" and int(local.rsplit(":", 1)[1], 16) == port:
                    return True
    return False


def _holder(port: int) -> str:
    """Who listens on ``port``, for an error message."""
    with contextlib.suppress(psutil.Error, OSError):
        for conn in psutil.net_connections(kind="tcp"):
            if conn.status == psutil.CONN_LISTEN and conn.laddr.port == port and conn.pid is not None:
                with contextlib.suppress(psutil.Error):
                    return f"pid {conn.pid} ({' '.join(psutil.Process(conn.pid).cmdline())[:120]})"
                return f"pid {conn.pid}"
    return "a process this user cannot see"


def ours_listening(pid: int | None, ports: list[int], what: str) -> bool:
    """Whether the process ``pid`` started (or one of its descendants) listens on every one of ``ports``; ``False``
    while some is not listened on yet. Raises :class:`PortTaken` naming the port and its holder when another
    process listens there (see the module rule)."""
    if pid is None:
        return False
    try:
        root = psutil.Process(pid)
        tree = [root, *root.children(recursive=True)]
    except psutil.Error:
        return False
    missing = [port for port in ports if port not in _listening(tree)]
    for port in missing:
        if _listened_by_anyone(port) and port not in _listening(tree):  # again: ours may have bound it just now
            raise PortTaken(f"{what}: port {port} picked for it is taken by another process, {_holder(port)}; "
                            "starting again on new ports")
    return not missing


def signal_group(pid: int, sig: int) -> None:
    """Send ``sig`` to the process group led by ``pid`` (gone already: nothing to do)."""
    with contextlib.suppress(ProcessLookupError):
        os.killpg(pid, sig)


def stop_group(process: subprocess.Popen[bytes] | None, grace: float) -> None:
    """SIGTERM ``process``'s group; SIGKILL it if still alive after ``grace`` seconds; unregister it."""
    if process is None:
        return
    if process.poll() is None:
        signal_group(process.pid, signal.SIGTERM)
        try:
            process.wait(timeout=grace)
        except subprocess.TimeoutExpired:
            signal_group(process.pid, signal.SIGKILL)
            process.wait(timeout=grace)
    register(process.pid, stopped=True)


def start_with_retries(start_once: Callable[[], _T], stop: Callable[[], None], what: str, attempts: int = 3,
                       retry_on: tuple[type[Exception], ...] = (RuntimeError, TimeoutError)) -> _T:
    """``start_once()``, retried up to ``attempts`` times (new ports each time) after a clash (:class:`PortTaken`,
    a server that exited) or a time-out (``retry_on``)."""
    ensure_guard()
    error: Exception | None = None
    for _ in range(attempts):
        try:
            return start_once()
        except retry_on as exc:
            error = exc
            stop()
    raise RuntimeError(f"{what} did not start after {attempts} attempts: {error}")


MARKER = "REGION_FAILOVER_STACK"
_guard: tuple[str, subprocess.Popen[bytes], IO[bytes]] | None = None


def ensure_guard() -> str:
    """The stack id of this process (set in ``os.environ``, inherited by every child), with its guard running.

    A process gets its own id even when it inherited one (a stack started by a test that runs in another stack):
    its own guard then stops its own servers, and the outer guard stops this process.
    """
    global _guard
    if _guard is not None and _guard[1].poll() is None:
        return _guard[0]
    stack_id = f"{os.getpid()}-{secrets.token_hex(6)}"
    os.environ[MARKER] = stack_id
    env = {k: v for k, v in os.environ.items() if k != MARKER}
    guard = subprocess.Popen([sys.executable, "-m", __name__, "guard", stack_id, str(os.getpid())],
                             stdin=subprocess.PIPE, stdout=subprocess.DEVNULL, env=env, start_new_session=True)
    assert guard.stdin is not None
    _guard = (stack_id, guard, guard.stdin)
    return stack_id


def register(pid: int, *, stopped: bool = False) -> None:
    """Tell the guard about a server's process group (``pid`` of a ``start_new_session`` child), or that it was
    stopped (``stopped``). Without a guard, nothing to do."""
    if _guard is None:
        return
    with contextlib.suppress(OSError, ValueError):
        _guard[2].write(f"{'-' if stopped else ''}{pid}\n".encode())
        _guard[2].flush()


def marked(stack_id: str, exclude: frozenset[int] = frozenset()) -> list[psutil.Process]:
    """Every live process whose environment carries ``stack_id`` (but those in ``exclude``)."""
    found = []
    for proc in psutil.process_iter():
        if proc.pid in exclude:
            continue
        with contextlib.suppress(psutil.Error, OSError):
            if proc.environ().get(MARKER) == stack_id and proc.status() != psutil.STATUS_ZOMBIE:
                found.append(proc)
    return found


def _grouped(groups: set[int], exclude: frozenset[int]) -> list[psutil.Process]:
    found = []
    for proc in psutil.process_iter():
        with contextlib.suppress(psutil.Error, OSError):
            if proc.pid not in exclude and os.getpgid(proc.pid) in groups and proc.status() != psutil.STATUS_ZOMBIE:
                found.append(proc)
    return found


def sweep(stack_id: str, grace: float = 10.0, exclude: frozenset[int] = frozenset(),
          groups: frozenset[int] = frozenset()) -> int:
    """Stop every process carrying ``stack_id`` or in one of ``groups``: SIGTERM, then SIGKILL what is left after
    ``grace`` seconds. Returns how many processes were found. Repeats until none is found (a dying parent may
    spawn once more)."""
    total = 0
    for _ in range(3):
        skip = exclude | {os.getpid()}
        procs = list({p.pid: p for p in [*marked(stack_id, skip), *_grouped(set(groups), skip)]}.values())
        if not procs:
            break
        total += len(procs)
        for proc in procs:
            with contextlib.suppress(psutil.Error):
                proc.terminate()
        alive = _wait_gone(procs, grace)
        for proc in alive:
            with contextlib.suppress(psutil.Error):
                proc.kill()
        _wait_gone(alive, 5.0)
    return total


def _wait_gone(procs: list[psutil.Process], timeout: float) -> list[psutil.Process]:
    """Wait up to ``timeout`` s until each process has exited (a zombie counts: its parent reaps it); the rest."""
    deadline = time.monotonic() + timeout
    alive = procs
    while alive:
        alive = [p for p in alive if _running(p)]
        if not alive or time.monotonic() > deadline:
            break
        time.sleep(0.1)
    return alive


def _running(proc: psutil.Process) -> bool:
    try:
        return bool(proc.is_running() and proc.status() != psutil.STATUS_ZOMBIE)
    except psutil.Error:
        return False


def stop_guarded(grace: float = 10.0) -> None:
    """Stop everything this process's stack started (its guard included); for a clean exit."""
    global _guard
    if _guard is None:
        return
    stack_id, guard, pipe = _guard
    _guard = None
    sweep(stack_id, grace, frozenset({guard.pid}))
    with contextlib.suppress(OSError):
        pipe.close()
    with contextlib.suppress(subprocess.TimeoutExpired):
        guard.wait(timeout=grace + 10)


def stop_on_signals() -> None:
    """Make SIGTERM and SIGHUP end this process as Ctrl-C does (``KeyboardInterrupt``), so ``finally`` blocks
    stop what it started; SIGINT already does."""
    def interrupt(signum: int, _frame: object) -> None:
        raise KeyboardInterrupt(f"signal {signum}")

    for sig in (signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, interrupt)


def _guard_main(stack_id: str, parent: int) -> int:
    """The guard: note registered groups until the starting process closes our stdin (it ended, however), then
    sweep."""
    for sig in (signal.SIGINT, signal.SIGHUP, signal.SIGTERM):
        signal.signal(sig, signal.SIG_IGN)  # Ctrl-C in a terminal reaches the group: outlive it, then sweep
    groups: set[int] = set()
    with contextlib.suppress(OSError):
        for line in sys.stdin.buffer:
            with contextlib.suppress(ValueError):
                pid = int(line)
                if pid < 0:
                    groups.discard(-pid)
                else:
                    groups.add(pid)
    time.sleep(0.5)  # a parent in its last moments
    sweep(stack_id, exclude=frozenset({parent}), groups=frozenset(groups))
    return 0


if __name__ == "__main__":
    if len(sys.argv) == 4 and sys.argv[1] == "guard":
        raise SystemExit(_guard_main(sys.argv[2], int(sys.argv[3])))
    raise SystemExit("usage: python -m airflow_region_failover.standalone.processes guard STACK_ID PARENT_PID")

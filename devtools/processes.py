"""Local server processes: free loopback ports, and stopping a server's whole process group.

Rule: every local server (SeaweedFS, Spark Connect, Airflow components) is started in its own session
(``start_new_session=True``), so signalling its process group reaches every child it spawned (a JVM, workers).
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
from collections.abc import Callable
from typing import TypeVar

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


def signal_group(pid: int, sig: int) -> None:
    """Send ``sig`` to the process group led by ``pid`` (gone already: nothing to do)."""
    with contextlib.suppress(ProcessLookupError):
        os.killpg(pid, sig)


def stop_group(process: subprocess.Popen[bytes] | None, grace: float) -> None:
    """SIGTERM ``process``'s group; SIGKILL it if still alive after ``grace`` seconds."""
    if process is None or process.poll() is not None:
        return
    signal_group(process.pid, signal.SIGTERM)
    try:
        process.wait(timeout=grace)
    except subprocess.TimeoutExpired:
        signal_group(process.pid, signal.SIGKILL)
        process.wait(timeout=grace)


def start_with_retries(start_once: Callable[[], _T], stop: Callable[[], None], what: str, attempts: int = 3) -> _T:
    """``start_once()``, retried up to ``attempts`` times (new ports each time) after a clash or a time-out."""
    error: Exception | None = None
    for _ in range(attempts):
        try:
            return start_once()
        except (RuntimeError, TimeoutError) as exc:
            error = exc
            stop()
    raise RuntimeError(f"{what} did not start after {attempts} attempts: {error}")

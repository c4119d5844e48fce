"""The stack guard: whatever ends the process that started a stack — a clean exit, SIGTERM, SIGKILL — every
process carrying its stack marker is stopped, also one that left the process tree (its own session, re-parented).
Real processes (a parent script and ``sleep`` children), no mocks."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import psutil
import pytest

from airflow_region_failover.standalone.processes import MARKER, marked

PARENT = textwrap.dedent("""
    import os, subprocess, sys, time
    from airflow_region_failover.standalone.processes import ensure_guard, register, stop_guarded, stop_on_signals
    stop_on_signals()
    stack_id = ensure_guard()
    # a server in its own session, and one that double-forks away from us (re-parented to init)
    subprocess.Popen(["sleep", "300"], start_new_session=True)
    subprocess.Popen(["sh", "-c", "(sleep 301 &) ; exit 0"], start_new_session=True).wait()
    # a server whose environment block no longer shows the marker (setproctitle rewrites it): known by its group
    blind = subprocess.Popen(["sleep", "302"], start_new_session=True, env={})
    register(blind.pid)
    print(stack_id, blind.pid, flush=True)
    try:
        if sys.argv[1] == "exit":
            sys.exit(0)
        time.sleep(300)
    finally:
        if sys.argv[1] != "exit":
            stop_guarded(grace=2)
""")


def _start(tmp_path: Path, mode: str) -> tuple[subprocess.Popen[str], str, int]:
    script = tmp_path / "parent.py"
    script.write_text(PARENT)
    env = {k: v for k, v in os.environ.items() if k != MARKER}
    parent = subprocess.Popen([sys.executable, str(script), mode], stdout=subprocess.PIPE, text=True, env=env)
    assert parent.stdout is not None
    stack_id, _, blind = parent.stdout.readline().strip().partition(" ")
    assert stack_id, "the parent did not start its stack"
    return parent, stack_id, int(blind)


def _gone(stack_id: str, timeout: float = 30.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if not marked(stack_id):
            return True
        time.sleep(0.2)
    return False


def _reaped(pid: int, timeout: float = 30.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            if psutil.Process(pid).status() == psutil.STATUS_ZOMBIE:
                return True
        except psutil.NoSuchProcess:
            return True
        time.sleep(0.2)
    return False


@pytest.mark.parametrize("how", [signal.SIGKILL, signal.SIGTERM, signal.SIGHUP])
def test_killing_the_starting_process_stops_every_marked_process(tmp_path: Path, how: int) -> None:
    parent, stack_id, blind = _start(tmp_path, "wait")
    time.sleep(0.3)
    sleepers = marked(stack_id)
    assert {tuple(p.cmdline()) for p in sleepers} >= {("sleep", "300"), ("sleep", "301")}
    assert psutil.pid_exists(blind)
    parent.send_signal(how)
    parent.wait(timeout=30)
    assert _gone(stack_id), [p.cmdline() for p in marked(stack_id)]
    assert _reaped(blind)


def test_a_clean_exit_without_stopping_is_swept_by_the_guard(tmp_path: Path) -> None:
    parent, stack_id, blind = _start(tmp_path, "exit")
    assert parent.wait(timeout=30) == 0
    assert _gone(stack_id), [p.cmdline() for p in marked(stack_id)]
    assert _reaped(blind)


def test_the_guard_spares_processes_of_other_stacks(tmp_path: Path) -> None:
    other = subprocess.Popen(["sleep", "300"], env={**os.environ, MARKER: "another-stack"})
    try:
        parent, stack_id, _ = _start(tmp_path, "wait")
        os.kill(parent.pid, signal.SIGKILL)
        parent.wait(timeout=30)
        assert _gone(stack_id)
        assert psutil.pid_exists(other.pid) and other.poll() is None
    finally:
        other.kill()
        other.wait()


LISTENER = "import socket, sys, time; s = socket.create_server(('127.0.0.1', int(sys.argv[1]))); time.sleep(60)"


def test_a_port_counts_as_ours_only_when_the_started_process_or_its_child_listens_there() -> None:
    """Nobody yet: not ours (wait). Our server's child listens: ours. Another process listens: a clash, named."""
    import socket

    from airflow_region_failover.standalone.processes import PortTaken, free_ports, ours_listening

    mine, theirs = free_ports(2)
    parent = subprocess.Popen(["sh", "-c", f'"{sys.executable}" -c "{LISTENER}" {mine}'], start_new_session=True)
    foreign = socket.create_server(("127.0.0.1", theirs))  # this test process is not the server's tree
    try:
        deadline = time.monotonic() + 30
        while not ours_listening(parent.pid, [mine], "server"):
            assert time.monotonic() < deadline, "the server's child never listened"
            time.sleep(0.1)
        with pytest.raises(PortTaken, match=rf"server: port {theirs} picked for it is taken by another process, "
                                            rf"pid {os.getpid()} "):
            ours_listening(parent.pid, [mine, theirs], "server")
        foreign.close()
        assert not ours_listening(parent.pid, [mine, theirs], "server"), "a free port is not (yet) ours"
    finally:
        foreign.close()
        os.killpg(parent.pid, signal.SIGKILL)
        parent.wait()

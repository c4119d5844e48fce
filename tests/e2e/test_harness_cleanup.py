"""Killing the test harness leaves nothing running: a pytest run that has a stack up gets SIGTERM and, 3 s into
its teardown, SIGKILL — as a CI runner's time-out does. Within a minute no process of that stack (found by the
stack marker, whatever their parent, or as descendants of that pytest while it ran: servers that rewrite their
process title, such as redis-server and Airflow's api-server, lose the marker from their environment block) is
alive.

Two stacks, one rule (every server is started and registered with the stack guard the same way,
:mod:`airflow_region_failover.standalone.processes`): by default the production-like stack's own servers that
start in seconds — PostgreSQL (a postmaster and its backends, each in its own session), Redis (which rewrites its
title) and SeaweedFS, started together as ``ProductionStack.start`` starts them; as an ``extended`` scenario the
whole production-like stack (add a Celery worker, two schedulers, the api-server, a Spark master + workers +
Connect: ~80 s of CI to start)."""

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
from tests.e2e.conftest import REPO_ROOT

pytestmark = [pytest.mark.e2e, pytest.mark.production, pytest.mark.timeout(900)]

INNER = textwrap.dedent('''
    import os, time
    from pathlib import Path
    from devtools.databases import Postgres, Redis
    from devtools.production import ProductionStack, started_together
    from airflow_region_failover.standalone.seaweedfs import SeaweedFS

    class Servers:
        def __init__(self, work):
            self.parts = [Postgres(work / "postgres"), Redis(work / "redis"), SeaweedFS(data_dir=work / "s3")]

        def start(self):
            started_together(*(part.start for part in self.parts))

        def stop(self):
            for part in self.parts:
                part.stop()

    def test_hold_the_stack_up(tmp_path):
        stack = {stack}
        stack.start()
        try:
            Path({ready!r}).write_text(os.environ[{marker!r}])
            time.sleep(600)
        finally:
            stack.stop()
''')
#: what the inner pytest holds up, and the processes that must be running before it is killed
STACKS = {
    "servers": ("Servers(tmp_path)", ("postgres", "redis-server", "weed")),
    "production": ("ProductionStack(dags_folder=Path({dags!r}), work_dir=tmp_path)",
                   ("postgres", "redis-server", "celery", "scheduler", "triggerer", "deploy.master.Master",
                    "deploy.worker.Worker", "standalone.connect_server", "weed")),
}


def _cmdline(proc: psutil.Process) -> list[str]:
    try:
        return proc.cmdline()
    except psutil.Error:
        return []


def _still_running(up: set[psutil.Process], stack_id: str) -> set[psutil.Process]:
    """Those of ``up`` alive (the same process: psutil compares start times; a zombie waiting for its new
    parent to reap it has ended), and any process that still carries the marker."""
    alive = set()
    for proc in up:
        try:
            if proc.is_running() and proc.status() != psutil.STATUS_ZOMBIE:
                alive.add(proc)
        except psutil.Error:
            continue
    return alive | set(marked(stack_id))


@pytest.mark.parametrize("stack", ["servers", pytest.param("production", marks=pytest.mark.extended)])
def test_sigterm_then_sigkill_of_pytest_leaves_no_process_of_the_stack(tmp_path: Path, stack: str) -> None:
    ready = tmp_path / "ready"
    dags = tmp_path / "dags"
    dags.mkdir()
    inner = tmp_path / "test_inner.py"
    held, parts = STACKS[stack]
    inner.write_text(INNER.format(stack=held.format(dags=str(dags)), ready=str(ready), marker=MARKER))
    env = {k: v for k, v in os.environ.items() if k != MARKER}
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO_ROOT), env.get("PYTHONPATH")]))
    with open(tmp_path / "inner.out", "wb") as out:
        run = subprocess.Popen([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-s",
                                "--rootdir", str(tmp_path), str(inner)], cwd=tmp_path, env=env,
                               stdout=out, stderr=subprocess.STDOUT)
    try:
        deadline = time.monotonic() + 400
        while not ready.exists():
            assert run.poll() is None, (tmp_path / "inner.out").read_text()[-3000:]
            assert time.monotonic() < deadline, "the inner stack did not come up"
            time.sleep(1)
        stack_id = ready.read_text()
        up = {*marked(stack_id), *psutil.Process(run.pid).children(recursive=True)}
        names = " ".join(" ".join(_cmdline(p)) for p in up)
        for part in parts:
            assert part in names, f"{part} not running: the stack was not up"
        run.send_signal(signal.SIGTERM)
        time.sleep(3)
        run.send_signal(signal.SIGKILL)
        run.wait(timeout=30)
        deadline = time.monotonic() + 60
        while _still_running(up, stack_id) and time.monotonic() < deadline:
            time.sleep(1)
        left = [" ".join(_cmdline(p))[:120] for p in _still_running(up, stack_id)]
        assert not left, f"{len(up)} processes were up; still running: {left}"
    finally:
        if run.poll() is None:
            run.kill()

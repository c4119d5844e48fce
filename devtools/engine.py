"""A Docker engine for the compose test (``tests/e2e/compose/``): the one already answering, or a ``dockerd`` this
process starts and stops.

Rules:
- :func:`missing` says why no engine can be had here, with the fix (``CI_NO_DOCKER`` set; no ``docker`` CLI, no
  Compose v2, no ``debootstrap`` for the stand-in images; no engine answering and no way to start one: not root
  or no ``dockerd``). ``.ci/run`` installs Debian's ``docker.io``, ``docker-compose`` (Compose v2, from trixie) and
  ``debootstrap`` as root (:data:`INSTALL`);
- :func:`engine` uses an engine that answers ``docker info`` as it is and leaves it running; otherwise it starts
  ``dockerd`` (Debian's defaults: overlay2, bridge networking; its own containerd) in its own session, under the
  stack guard of :mod:`airflow_region_failover.standalone.processes` (so it is stopped even if this process is
  killed), and stops it on exit — SIGTERM, which stops its containers, then SIGKILL after :data:`STOP_S`.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

INSTALL = ("as root: apt-get install docker.io debootstrap, and docker-compose from Debian trixie (Compose v2; "
           ".ci/run does both)")
START_S = 90.0
STOP_S = 60.0


def _answers() -> bool:
    if shutil.which("docker") is None:
        return False
    done = subprocess.run(["docker", "info", "--format", "{{.ServerVersion}}"], capture_output=True, text=True,
                          timeout=30, check=False)
    return done.returncode == 0


def _compose_v2() -> bool:
    done = subprocess.run(["docker", "compose", "version", "--short"], capture_output=True, text=True, timeout=30,
                          check=False)
    return done.returncode == 0 and done.stdout.strip()[:1].isdigit() and int(done.stdout.strip()[0]) >= 2


def missing() -> str | None:
    """Why the compose test cannot run here (with the fix), or ``None``."""
    if os.environ.get("CI_NO_DOCKER"):
        return "CI_NO_DOCKER is set"
    if shutil.which("docker") is None:
        return f"no docker CLI: {INSTALL}"
    if not _compose_v2():
        return f"no Docker Compose v2 (`docker compose`): {INSTALL}"
    if shutil.which("debootstrap") is None:
        return f"no debootstrap for the stand-in images: {INSTALL}"
    if _answers():
        return None
    if shutil.which("dockerd") is None:
        return f"no Docker engine answers and there is no dockerd to start: {INSTALL}"
    if os.geteuid() != 0:
        return "no Docker engine answers and only root may start dockerd here"
    return None


@contextmanager
def engine() -> Iterator[bool]:
    """A Docker engine for the block; yields whether this process started it (then it is stopped at the end)."""
    if _answers():
        yield False
        return
    from airflow_region_failover.standalone.processes import ensure_guard, register

    ensure_guard()
    log = Path(tempfile.mkstemp(prefix="rf-dockerd-", suffix=".log")[1])
    with log.open("wb") as out:
        proc = subprocess.Popen(["dockerd"], stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
    register(proc.pid)
    try:
        deadline = time.monotonic() + START_S
        while not _answers():
            if proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"dockerd did not start ({proc.returncode=}): {log.read_text()[-3000:]}")
            time.sleep(1.0)
        yield True
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=STOP_S)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, 9)
            proc.wait(timeout=30)
        register(proc.pid, stopped=True)
        log.unlink(missing_ok=True)

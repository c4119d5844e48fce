"""The store's local scratch directories (store/dataplane/scratch.py): fresh, 0700, removed after use, and the ones that
killed processes of this host left are removed by the next process that makes one — never a running process's,
never another host's."""

from __future__ import annotations

import os
import stat
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from airflow_region_failover.store.dataplane import scratch


@pytest.fixture
def temp(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    return tmp_path


def ended_pid() -> int:
    """The id of a process that has run and ended."""
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    return proc.pid


def left(temp: Path, kind: str, host: str, pid: int) -> Path:
    """A directory as a process ``pid`` of ``host`` leaves it when it is killed mid-write (a part file inside)."""
    path = temp / f"region-failover-{kind}-{host}-{pid}-abc123"
    (path / "out").mkdir(parents=True)
    (path / "out" / "part-00000.snappy.parquet").write_bytes(b"x" * 1024)
    return path


def test_a_scratch_directory_is_fresh_private_and_removed_afterwards_also_on_errors(temp: Path) -> None:
    with scratch.scratch("write") as root:
        assert root.parent == temp and stat.S_IMODE(root.stat().st_mode) == 0o700
        assert root.name.startswith(f"region-failover-write-{scratch._host()}-{os.getpid()}-")
    assert not root.exists()
    with pytest.raises(RuntimeError), scratch.scratch("write") as failing:
        raise RuntimeError("the write failed")
    assert not failing.exists()


def test_what_a_killed_process_left_is_removed_by_the_next_write_and_nothing_else(temp: Path) -> None:
    host = scratch._host()
    killed = left(temp, "write", host, ended_pid())
    running = left(temp, "write", host, os.getppid())  # a process that runs
    mine = left(temp, "write", host, os.getpid())  # this process's own (another write of it)
    elsewhere = left(temp, "write", "another-host", ended_pid())  # a temp dir shared with another host
    probe = left(temp, "probe", host, ended_pid())  # another kind: its own sweep removes it
    with scratch.scratch("write"):
        assert not killed.exists(), "the killed process's directory is removed"
    assert running.exists() and mine.exists() and elsewhere.exists() and probe.exists()
    assert scratch.sweep("probe") == [probe] and not probe.exists()

"""The S3 server's footprint on its disk: weed marks every volume read-only once its disk has less than 1 % free
(every S3 write then fails with InternalError), so the server refuses to start without room before that mark,
naming the disk and the fix; and what weed writes (its log, its local sockets) stays in its data directory."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import pytest

from airflow_region_failover.standalone import seaweedfs
from airflow_region_failover.standalone.seaweedfs import SeaweedFS

GiB = 2**30


def _disk(monkeypatch: pytest.MonkeyPatch, total: float, free: float) -> None:
    usage = shutil._ntuple_diskusage(int(total * GiB), int((total - free) * GiB), int(free * GiB))  # type: ignore[attr-defined]
    monkeypatch.setattr(seaweedfs.shutil, "disk_usage", lambda path: usage)


def _no_launch(*args: Any, **kwargs: Any) -> Any:
    raise AssertionError("weed was launched on a disk past its read-only mark")


def test_the_room_is_the_free_space_above_one_percent_of_the_disk(monkeypatch: pytest.MonkeyPatch,
                                                                  tmp_path: Path) -> None:
    _disk(monkeypatch, total=200, free=5)
    assert seaweedfs.room_before_read_only(tmp_path) == 3 * GiB
    _disk(monkeypatch, total=200, free=1)
    assert seaweedfs.room_before_read_only(tmp_path) == -1 * GiB


def test_start_refuses_a_disk_past_the_read_only_mark_naming_it_before_launching_weed(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    # the CI failure this guards: 6.7 GiB free on a 252 GiB disk at the start, a run writing ≈ 5 GiB more, then
    # every PutObject answered "InternalError" (weed: "No writable volumes and no free volumes left")
    _disk(monkeypatch, total=252, free=2.6)
    monkeypatch.setattr(seaweedfs.subprocess, "Popen", _no_launch)
    server = SeaweedFS(bucket="region-failover-test", data_dir=tmp_path / "s3")  # min_room: 0.5 GiB
    with pytest.raises(OSError) as refused:
        server.start()
    assert type(refused.value).__name__ == "DiskTooFull"
    message = str(refused.value)
    assert str(tmp_path / "s3") in message
    assert "needs 0.5 GiB" in message and "2.5 GiB" in message and "it has 0.1 GiB" in message
    assert "read-only" in message and "TMPDIR" in message


def test_start_goes_ahead_with_room_to_spare(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    _disk(monkeypatch, total=252, free=3.6)
    monkeypatch.setattr(seaweedfs, "start_with_retries", lambda start, stop, name, attempts: "started")
    assert SeaweedFS(bucket="region-failover-test", data_dir=tmp_path, min_room=GiB).start() == "started"


def test_weed_keeps_its_log_and_sockets_in_its_data_directory(tmp_path: Path) -> None:
    command = SeaweedFS(data_dir=tmp_path)._command(tmp_path / "s3-identity.json")
    assert command[1] == "-logtostderr"  # a global flag: before the command; else glog also writes /tmp/weed.*
    assert f"-s3.localSocket={tmp_path / 's3.sock'}" in command
    assert f"-filer.localSocket={tmp_path / 'filer.sock'}" in command


def test_a_data_directory_too_deep_for_a_socket_path_leaves_weed_its_default(tmp_path: Path) -> None:
    deep = tmp_path / ("d" * 100)
    deep.mkdir()
    command = SeaweedFS(data_dir=deep)._command(deep / "s3-identity.json")
    assert not any("localSocket" in flag for flag in command)

"""``region-failover standalone``: bad input is one line on stderr and exit 2, before anything starts."""

from __future__ import annotations

from pathlib import Path

import pytest

from airflow_region_failover.cli.main import main


def test_a_missing_dags_folder_is_named_with_the_fix(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    missing = tmp_path / "no-such-dags"
    assert main(["standalone", "--dags", str(missing), "--home", str(tmp_path / "home")]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and str(missing) in err and "--dags" in err, err
    assert not (tmp_path / "home").exists(), "nothing is started or created for bad input"


def test_standalone_is_listed_in_the_help(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        main(["standalone", "--help"])
    out = capsys.readouterr().out
    assert "--dags" in out and "--port" in out and "--home" in out


def test_a_disk_past_the_s3_servers_read_only_mark_is_one_line_with_the_fix(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    # SeaweedFS refuses to start on a disk with less room than it needs (weed turns read-only under 1 % free):
    # the user sees that refusal as every other bad input, not as a traceback
    import shutil

    from airflow_region_failover.standalone import command, seaweedfs

    gib = 2**30
    usage = shutil._ntuple_diskusage(252 * gib, 250 * gib, 2 * gib)  # type: ignore[attr-defined]
    monkeypatch.setattr(seaweedfs.shutil, "disk_usage", lambda path: usage)
    monkeypatch.setattr(seaweedfs.subprocess, "Popen", _no_launch)
    monkeypatch.setattr(command, "stop_on_signals", lambda: None)  # this test process keeps its own handlers
    monkeypatch.setattr(command, "stop_guarded", lambda: None)
    assert main(["standalone", "--dags", str(tmp_path), "--home", str(tmp_path / "home")]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and err.startswith("region-failover: error: SeaweedFS needs"), err
    assert str(tmp_path / "home" / "s3") in err and "TMPDIR" in err, err


def _no_launch(*args: object, **kwargs: object) -> None:
    raise AssertionError("weed was launched on a disk past its read-only mark")

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

"""The production-like stack's PostgreSQL launcher: a checkout PostgreSQL's server user cannot reach is refused
with an error naming the directory and the fix (it used to fail deep inside ``initdb`` with "invalid binary")."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from devtools.databases import Postgres, closed_ancestor


def test_a_directory_others_cannot_enter_is_named(tmp_path: Path) -> None:
    private = tmp_path / "clone"
    bin_dir = private / ".venv" / "pgserver" / "bin"
    bin_dir.mkdir(parents=True)
    private.chmod(0o700)
    assert closed_ancestor(bin_dir) in {private, *private.parents}
    assert closed_ancestor(bin_dir) is not None


def test_system_directories_are_reachable() -> None:
    assert closed_ancestor(Path("/usr/bin")) is None


@pytest.mark.skipif(os.geteuid() != 0, reason="PostgreSQL runs as nobody only when started as root")
def test_start_as_root_from_a_private_checkout_says_how_to_fix_it(tmp_path: Path,
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    private = tmp_path / "clone"
    bin_dir = private / "bin"
    bin_dir.mkdir(parents=True)
    (bin_dir / "initdb").write_text("#!/bin/sh\nexit 0\n")
    private.chmod(0o700)
    monkeypatch.setattr(Postgres, "bin_dir", property(lambda self: bin_dir))
    server = Postgres(tmp_path / "work")
    with pytest.raises(RuntimeError, match=r"cannot reach .*initdb.*chmod o\+x"):
        server.start(attempts=1)
    server.cleanup()

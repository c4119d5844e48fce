"""The production-like stack's PostgreSQL launcher: which directory keeps PostgreSQL's server user (``nobody``)
out of a checkout (tests/integration/test_cluster_launchers.py starts the server from such a checkout)."""

from __future__ import annotations

from pathlib import Path

from devtools.databases import closed_ancestor


def test_a_directory_others_cannot_enter_is_named(tmp_path: Path) -> None:
    private = tmp_path / "clone"
    bin_dir = private / ".venv" / "pgserver" / "bin"
    bin_dir.mkdir(parents=True)
    private.chmod(0o700)
    assert closed_ancestor(bin_dir) in {private, *private.parents}


def test_system_directories_are_reachable() -> None:
    assert closed_ancestor(Path("/usr/bin")) is None

"""uv.lock pins every version ``./dev`` and CI install (docs/versions.md); it must match pyproject.toml.

After any change to pyproject.toml's dependencies or extras, run ``uv lock`` and commit uv.lock with it.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def test_uv_lock_is_up_to_date_with_pyproject() -> None:
    uv = shutil.which("uv")
    if uv is None:
        pytest.skip("uv is not on PATH (./dev puts it there)")
    assert (ROOT / "uv.lock").is_file(), "uv.lock is missing: run `uv lock` in the repository root"
    # --offline: a lock that matches pyproject.toml is checked from the lock alone; a stale one fails either way
    done = subprocess.run([uv, "lock", "--check", "--offline"], cwd=ROOT, capture_output=True, text=True,
                          timeout=300, check=False)
    assert done.returncode == 0, (
        "uv.lock is out of date with pyproject.toml: run `uv lock` and commit uv.lock\n" + done.stdout + done.stderr
    )

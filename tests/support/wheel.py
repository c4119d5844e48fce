"""The wheel users install: built from this checkout with ``uv build --wheel`` (≈ 2 s, from uv's cache), and its
``METADATA`` read the way an installer reads it."""

from __future__ import annotations

import email.message
import email.parser
import shutil
import subprocess
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def build_wheel(out_dir: Path) -> Path:
    """Build the project's wheel into ``out_dir``; its path (``pytest.skip`` when uv is not on ``PATH``)."""
    uv = shutil.which("uv")
    if uv is None:
        pytest.skip("uv is not on PATH (./dev puts it there)")
    done = subprocess.run([uv, "build", "--wheel", "-q", "--out-dir", str(out_dir), str(ROOT)], capture_output=True,
                          text=True, timeout=300, check=False)
    assert done.returncode == 0, done.stdout + done.stderr
    (wheel,) = out_dir.glob("*.whl")
    return wheel


def metadata(wheel: Path) -> email.message.Message:
    """The wheel's ``*.dist-info/METADATA`` (core metadata: ``Requires-Dist``, ``Classifier``, the description...)."""
    with zipfile.ZipFile(wheel) as archive:
        (name,) = [n for n in archive.namelist() if n.endswith(".dist-info/METADATA")]
        return email.parser.Parser().parsestr(archive.read(name).decode())


def names(wheel: Path) -> list[str]:
    """Every file in the wheel."""
    with zipfile.ZipFile(wheel) as archive:
        return archive.namelist()

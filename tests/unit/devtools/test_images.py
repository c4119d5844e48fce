"""The stand-in images' inputs (devtools/images.py) and the wheels repacked from an installed environment
(devtools/wheelhouse.py), without Docker: a repacked wheel keeps file modes and non-entry-point scripts, drops
generated console scripts and byte code, and lists every member in its RECORD; a stand-in's hash follows its
files."""

from __future__ import annotations

import base64
import hashlib
import importlib.metadata as md
import shutil
import zipfile
from pathlib import Path

import pytest

from devtools import images, wheelhouse


def _installed(root: Path) -> md.Distribution:
    """A tiny installed distribution ``demo 1.0`` in a venv-shaped tree: a package with an executable helper, a
    console script made from its entry point and a plain shell script installed as a data script."""
    site = root / "lib" / "python3.11" / "site-packages"
    (site / "demo").mkdir(parents=True)
    (site / "demo" / "__init__.py").write_text("X = 1\n")
    (site / "demo" / "__pycache__").mkdir()
    (site / "demo" / "__pycache__" / "__init__.cpython-311.pyc").write_bytes(b"\0")
    helper = site / "demo" / "helper.sh"
    helper.write_text("#!/bin/sh\necho hi\n")
    helper.chmod(0o755)
    (root / "bin").mkdir()
    (root / "bin" / "demo-cli").write_text("#!/venv/bin/python\nfrom demo import X\n")
    (root / "bin" / "demo-class").write_text("#!/venv/bin/python3.11\nprint(1)\n")
    info = site / "demo-1.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: demo\nVersion: 1.0\n")
    (info / "WHEEL").write_text("Wheel-Version: 1.0\nTag: py2-none-any\nTag: py3-none-any\n")
    (info / "entry_points.txt").write_text("[console_scripts]\ndemo-cli = demo:main\n")
    (info / "INSTALLER").write_text("uv\n")
    files = ["demo/__init__.py", "demo/__pycache__/__init__.cpython-311.pyc", "demo/helper.sh",
             "../../../bin/demo-cli", "../../../bin/demo-class", "demo-1.0.dist-info/METADATA",
             "demo-1.0.dist-info/WHEEL", "demo-1.0.dist-info/entry_points.txt", "demo-1.0.dist-info/INSTALLER",
             "demo-1.0.dist-info/RECORD"]
    (info / "RECORD").write_text("".join(f"{f},,\n" for f in files))
    return md.PathDistribution(info)


def test_a_repacked_wheel_keeps_modes_and_scripts_and_records_every_member(tmp_path: Path) -> None:
    wheel = wheelhouse.repack(_installed(tmp_path / "venv"), tmp_path)
    assert wheel.name == "demo-1.0-py2.py3-none-any.whl"
    with zipfile.ZipFile(wheel) as whl:
        names = set(whl.namelist())
        assert names == {"demo/__init__.py", "demo/helper.sh", "demo-1.0.data/scripts/demo-class",
                         "demo-1.0.dist-info/METADATA", "demo-1.0.dist-info/WHEEL",
                         "demo-1.0.dist-info/entry_points.txt", "demo-1.0.dist-info/RECORD"}
        assert whl.getinfo("demo/helper.sh").external_attr >> 16 & 0o777 == 0o755
        assert whl.read("demo-1.0.data/scripts/demo-class").startswith(b"#!python\n")
        record = whl.read("demo-1.0.dist-info/RECORD").decode().splitlines()
        for line in record:
            name, digest, size = line.rsplit(",", 2)
            if name.endswith("RECORD"):
                continue
            data = whl.read(name)
            expected = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
            assert (digest, int(size)) == (f"sha256={expected}", len(data)), name
        assert len(record) == len(names)
    assert wheelhouse.repack(_installed(tmp_path / "venv2"), tmp_path) == wheel  # made once


def test_a_wheel_without_tags_is_refused_naming_the_distribution(tmp_path: Path) -> None:
    dist = _installed(tmp_path / "venv")
    (Path(str(dist._path)) / "WHEEL").write_text("Wheel-Version: 1.0\n")  # type: ignore[attr-defined]
    with pytest.raises(ValueError, match="demo: no Tag"):
        wheelhouse.repack(dist, tmp_path)


def test_a_stand_ins_hash_follows_its_files(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    shutil.copytree(images.STANDINS / "redis", tmp_path / "redis")
    monkeypatch.setattr(images, "STANDINS", tmp_path)
    redis = images.StandIn("redis:7", "redis")
    before = images.standin_hash(redis)
    assert images.standin_hash(redis) == before
    with (tmp_path / "redis" / "Dockerfile").open("a") as dockerfile:
        dockerfile.write("# changed\n")
    assert images.standin_hash(redis) != before

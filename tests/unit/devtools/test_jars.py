"""Pinned jars: fetched from a Maven layout once per machine, checked by SHA-256 and Maven's SHA-1, linked into the
destination; a wrong pin or a corrupted download is refused naming the jar (a ``file://`` repository stands in for
Maven Central)."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest

from devtools import jars

BODY = b"PK\x03\x04 a jar"


def repository(root: Path, body: bytes = BODY, sha1: str | None = None) -> jars.Jar:
    """A one-jar Maven repository under ``root``; returns the jar pinned to ``body``'s SHA-256."""
    jar = jars.Jar("org.example", "thing_2.13", "1.0", hashlib.sha256(body).hexdigest())
    path = root / jar.path
    path.parent.mkdir(parents=True)
    path.write_bytes(body)
    Path(f"{path}.sha1").write_text(f"{sha1 or hashlib.sha1(body).hexdigest()}  {jar.file_name}\n")
    return jar


def test_a_jar_is_downloaded_once_checked_and_linked(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    jar = repository(tmp_path / "maven")
    monkeypatch.setattr(jars, "MAVEN", (tmp_path / "maven").as_uri())
    (placed,) = jars.install([jar], tmp_path / "jars", tmp_path / "cache")
    assert placed.read_bytes() == BODY and placed.samefile(tmp_path / "cache" / jar.path)
    (tmp_path / "maven" / jar.path).unlink()  # a second install needs no download
    assert jars.install([jar], tmp_path / "other", tmp_path / "cache")[0].read_bytes() == BODY
    assert jars.classpath(tmp_path / "jars", [jar]) == str(placed)
    assert jars.packages([jar]) == "org.example:thing_2.13:1.0"


def test_a_download_that_does_not_match_its_pin_is_refused(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    jar = repository(tmp_path / "maven")
    monkeypatch.setattr(jars, "MAVEN", (tmp_path / "maven").as_uri())
    wrong = jars.Jar(jar.group, jar.artifact, jar.version, "0" * 64)
    with pytest.raises(RuntimeError, match=r"org\.example:thing_2\.13:1\.0: SHA-256 \w+ is not the pinned"):
        jars.install([wrong], tmp_path / "jars", tmp_path / "cache")
    assert not (tmp_path / "cache" / jar.path).exists() and not (tmp_path / "jars" / jar.file_name).exists()


def test_a_download_that_does_not_match_mavens_sha1_is_refused(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    jar = repository(tmp_path / "maven", sha1="f" * 40)
    monkeypatch.setattr(jars, "MAVEN", (tmp_path / "maven").as_uri())
    with pytest.raises(RuntimeError, match="is not Maven Central's"):
        jars.install([jar], tmp_path / "jars", tmp_path / "cache")


def test_a_missing_jar_names_the_fix(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError, match=r"run \./dev bootstrap"):
        jars.classpath(tmp_path)


def test_the_pins_are_the_versions_docs_versions_md_lists() -> None:
    table = (jars.REPO / "docs" / "versions.md").read_text()
    for jar in jars.JARS:
        assert f"`{jar.group}:{jar.artifact}` | {jar.version} | `{jar.sha256}`" in table, jar


def test_the_readers_pyspark_is_installed_without_filling_uvs_cache(tmp_path: Path,
                                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    """uv kept a new 1.9 GB build of pyspark's sdist in its cache on every hash-checked install: one per fresh
    clone's ``./dev bootstrap`` (52 GB of them on the project's VM). The install must not use the cache."""
    commands: list[list[str]] = []

    def run(command: list[str], check: bool) -> None:
        commands.append(command)
        if command[1] == "venv":
            Path(command[-1]).mkdir()

    monkeypatch.setattr(jars.subprocess, "run", run)
    jars.install_reader(tmp_path / "reader")
    (install,) = [c for c in commands if c[1:3] == ["pip", "install"]]
    assert "--no-cache" in install and "--require-hashes" in install
    assert any((tmp_path / "reader").glob(".installed-*")), "the stamp that makes the install happen once"

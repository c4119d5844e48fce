"""How the local stack keeps a secret on disk (passwords, keys, credentials): readable by its owner only, from the
first byte.

Rule: a secret file is created by ``os.open`` with mode 0600 — never written first and narrowed after, which leaves
a window in which another local user may read it — and a file that already exists (an older stack's, with a wider
mode) is narrowed to 0600 after it is emptied and before anything is written into it. Its content is never
logged. A folder holding secrets (the stack's home, its Airflow home with the SQLite DB and logs, the S3 volumes)
is 0700: created so, or — one an older stack left wider — narrowed to 0700 at the next start, which says so.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable
from pathlib import Path

from airflow_region_failover.exceptions import RegionFailoverError

SECRET_MODE = 0o600
PRIVATE_DIR_MODE = 0o700


def write_secret(path: Path, text: str) -> Path:
    """Write ``text`` to ``path``, readable and writable by its owner only (module rule)."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, SECRET_MODE)
    with os.fdopen(fd, "w", encoding="utf-8") as handle:
        os.fchmod(handle.fileno(), SECRET_MODE)
        handle.write(text)
    return path


def kept_secret(path: Path, make: Callable[[], str]) -> str:
    """The secret kept at ``path`` (so a restarted stack keeps it), made by ``make`` and written the first time."""
    if not path.exists():
        write_secret(path, make())
    return path.read_text(encoding="utf-8").strip()


def private_dir(path: Path, children: Iterable[str], say: Callable[[str], None]) -> Path:
    """Create folder ``path`` 0700, or narrow it and those of its ``children`` folders that exist to 0700 (module
    rule), telling ``say`` about each one it narrowed; :class:`RegionFailoverError` naming the folder when it cannot
    (another user owns it)."""
    path.mkdir(mode=PRIVATE_DIR_MODE, parents=True, exist_ok=True)
    for folder in (path, *(path / c for c in children)):
        if not folder.is_dir():
            continue
        mode = folder.stat().st_mode & 0o777
        if mode == PRIVATE_DIR_MODE:
            continue
        try:
            folder.chmod(PRIVATE_DIR_MODE)
        except OSError as exc:
            raise RegionFailoverError(f"{folder} is {mode:04o} and cannot be made private (0700): {exc}; use a home "
                                      "you own (--home)") from exc
        say(f"Made {folder} private ({mode:04o} -> {PRIVATE_DIR_MODE:04o}): it holds the stack's secrets and data")
    return path

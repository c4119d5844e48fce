"""How the local stack keeps a secret on disk (passwords, keys, credentials): readable by its owner only, from the
first byte.

Rule: a secret file is created by ``os.open`` with mode 0600 — never written first and narrowed after, which leaves
a window in which another local user may read it — and a file that already exists (an older stack's, with a wider
mode) is narrowed to 0600 after it is emptied and before anything is written into it. Its content is never
logged.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

SECRET_MODE = 0o600


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

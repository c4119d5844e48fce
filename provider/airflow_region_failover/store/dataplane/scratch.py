"""Where the store's local files live while Spark's own writer writes them (:mod:`.local_write`), and who removes
them.

Rules:

* **One fresh directory per write or probe**, under the system temp dir, mode 0700, named
  ``region-failover-<kind>-<host>-<pid>-<random>``, removed when the write ends, also on errors.
* **A process that is killed cannot remove its own** (a SIGKILLed step task, an OOM kill): the chaos benchmark's
  killed tasks left ~0.9 GB each at 5 GB and filled the disk, so the S3 server refused writes. Before making its
  directory, a process removes the directories of the same kind that this host's processes left and that are
  gone: the host in the name is this host's, the pid in it no longer runs, and the directory is this user's. A pid
  that runs again (reused) keeps its directory until that process ends too; a directory of another host (a
  temp dir shared between containers, each with its own process ids) is never judged from here.
"""

from __future__ import annotations

import contextlib
import logging
import os
import re
import shutil
import socket
import tempfile
from collections.abc import Iterator
from pathlib import Path

log = logging.getLogger(__name__)


def _host() -> str:
    """This host's name as it may appear in a directory name."""
    return re.sub(r"[^A-Za-z0-9.]", "_", socket.gethostname()) or "host"


def _gone(pid: int) -> bool:
    """Whether no process with this id runs on this host (one of another user's runs: not gone)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    except PermissionError:
        return False
    return False


def sweep(kind: str, temp: Path | None = None) -> list[Path]:
    """Remove the ``kind`` directories that gone processes of this host left (module rule); the ones removed."""
    temp = Path(temp or tempfile.gettempdir())
    pattern = re.compile(rf"^region-failover-{re.escape(kind)}-{re.escape(_host())}-(\d+)-")
    removed = []
    for path in temp.glob(f"region-failover-{kind}-*"):
        match = pattern.match(path.name)
        try:
            mine = path.is_dir() and path.stat().st_uid == os.getuid()
        except OSError:
            continue
        if match and mine and int(match[1]) != os.getpid() and _gone(int(match[1])):
            shutil.rmtree(path, ignore_errors=True)
            removed.append(path)
    if removed:
        log.info("result store: removed %d local %s directories that ended processes left: %s", len(removed), kind,
                 ", ".join(p.name for p in removed))
    return removed


@contextlib.contextmanager
def scratch(kind: str) -> Iterator[Path]:
    """A fresh ``kind`` directory for this process (module rule), removed afterwards whatever happens."""
    sweep(kind)
    root = Path(tempfile.mkdtemp(prefix=f"region-failover-{kind}-{_host()}-{os.getpid()}-"))
    try:
        yield root
    finally:
        shutil.rmtree(root, ignore_errors=True)

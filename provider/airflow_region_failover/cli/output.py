"""What the CLI writes to stdout: its results and nothing else, as JSON or as an aligned table (``-o json|table``).

Rules: a command's document is rendered by :func:`render` — ``json``: indented JSON; ``table``: columns separated
by two spaces under upper-case headers (a mapping becomes ``KEY VALUE`` rows in key order, a value that is not a
string, number or boolean in its JSON form). While a command that imports Airflow runs (:func:`results_only`),
everything else written to stdout — Airflow's and the AWS SDK's log lines, at the Python level and at file
descriptor 1 — goes to stderr, so ``region-failover gc | jq`` reads only the summary.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import sys
from collections.abc import Iterator, Mapping, Sequence
from typing import Any, TextIO, cast

FORMATS = ("json", "table")
"""The values of ``-o/--output``."""


def cell(value: Any) -> str:
    """A table cell: strings as they are, everything else in its JSON form (``true``, ``3``, ``["a"]``)."""
    return value if isinstance(value, str) else json.dumps(value, sort_keys=True)


def table(headers: Sequence[str], rows: Sequence[Sequence[Any]]) -> str:
    """``rows`` under ``headers`` (upper-cased), each column as wide as its widest cell, two spaces between."""
    lines = [[h.upper() for h in headers], *([cell(v) for v in row] for row in rows)]
    widths = [max(len(line[i]) for line in lines) for i in range(len(headers))]
    return "\n".join("  ".join(v.ljust(w) for v, w in zip(line, widths, strict=True)).rstrip() for line in lines)


def render(document: Mapping[str, Any], fmt: str) -> str:
    """``document`` as indented JSON (``json``) or as ``KEY VALUE`` rows in key order (``table``)."""
    if fmt == "table":
        return table(("key", "value"), sorted(document.items()))
    return json.dumps(document, indent=2, sort_keys=True)


class _Descriptor(io.TextIOBase):
    """Unbuffered text writes to a file descriptor (nothing pending that a later flush could send elsewhere)."""

    def __init__(self, fd: int) -> None:
        super().__init__()
        self._fd = fd

    def writable(self) -> bool:
        return True

    def write(self, text: str) -> int:
        view = memoryview(text.encode("utf-8"))
        while view:
            view = view[os.write(self._fd, view):]
        return len(text)


@contextlib.contextmanager
def results_only() -> Iterator[TextIO]:
    """The stream a command's results go to; inside the block everything else written to stdout goes to stderr
    (module rule). Where stdout is not file descriptor 1 (a test's capture), only ``sys.stdout`` is redirected."""
    real = sys.stdout
    real.flush()
    try:
        fd = real.fileno()
    except (AttributeError, OSError, ValueError):
        fd = -1
    if fd != 1:
        sys.stdout = sys.stderr
        try:
            yield real
        finally:
            sys.stdout = real
        return
    keep = os.dup(1)
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    try:
        yield cast(TextIO, _Descriptor(keep))
    finally:
        sys.stdout = real
        sys.stderr.flush()
        os.dup2(keep, 1)
        os.close(keep)

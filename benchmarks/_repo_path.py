"""Importing this puts the repository root on ``sys.path``, so a benchmark run as ``python benchmarks/x.py`` can
import the repo-only helpers (``devtools/`` launchers, ``tests/support/`` reference) beside the installed provider."""

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

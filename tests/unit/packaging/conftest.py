"""One wheel for every packaging test of the session (built from this checkout)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support.wheel import build_wheel


@pytest.fixture(scope="session")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_wheel(tmp_path_factory.mktemp("wheel"))

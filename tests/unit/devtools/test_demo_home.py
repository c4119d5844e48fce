"""``./dev demo`` keeps its temporary home when it fails, and says where (``devtools/demo.py``): the stack's logs are
the only evidence of why (a trigger that got no answer left nothing to read when the home went with the stack). A
demo that succeeded, or that Ctrl-C stopped, leaves nothing behind. A made-up stack: nothing is started."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from devtools import demo


class Stack:
    """A stack whose start raises ``error``; it records that it was stopped."""

    def __init__(self, error: BaseException) -> None:
        self.error, self.stopped = error, False

    def start(self) -> None:
        raise self.error

    def stop(self) -> None:
        self.stopped = True


def _run(monkeypatch: pytest.MonkeyPatch, tmp_path: Path, error: BaseException) -> tuple[Path, list[str], Any]:
    home = tmp_path / "rf-demo-x"
    home.mkdir()
    (home / "airflow").mkdir()
    said: list[str] = []
    stack = Stack(error)
    monkeypatch.setattr(demo.tempfile, "mkdtemp", lambda prefix: str(home))
    monkeypatch.setattr(demo, "Standalone", lambda dags, path, port: stack)
    monkeypatch.setattr(demo, "stop_on_signals", lambda: None)
    monkeypatch.setattr(demo, "stop_guarded", lambda: None)
    monkeypatch.setattr(demo, "_say", said.append)
    return home, said, stack


def test_a_demo_that_fails_keeps_its_home_and_names_it(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    home, said, stack = _run(monkeypatch, tmp_path, RuntimeError("no answer"))
    with pytest.raises(RuntimeError, match="no answer"):
        demo.run_demo(keep_open=False)
    assert stack.stopped and home.is_dir()
    assert any(str(home) in line and "log" in line for line in said), said


def test_a_demo_stopped_by_ctrl_c_leaves_nothing(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    home, said, stack = _run(monkeypatch, tmp_path, KeyboardInterrupt())
    assert demo.run_demo(keep_open=False) == 0
    assert stack.stopped and not home.exists()
    assert not any(str(home) in line for line in said)

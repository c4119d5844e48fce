"""The browser test's support (devtools/browser.py): without the browser it says how to install it, so the UI
test is skipped with that message instead of failing or downloading a driver."""

from __future__ import annotations

import pytest

from devtools import browser


def test_without_chromium_the_reason_says_how_to_install_it(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(browser, "CHROMIUM", "/nonexistent/chromium")
    monkeypatch.setattr(browser.shutil, "which", lambda name: None)
    reason = browser.missing()
    assert reason is not None and "/nonexistent/chromium not found" in reason
    assert "apt-get install -y chromium chromium-driver" in reason


def test_without_selenium_the_reason_says_how_to_install_it(monkeypatch: pytest.MonkeyPatch) -> None:
    import sys

    monkeypatch.setitem(sys.modules, "selenium", None)  # import selenium -> ImportError
    reason = browser.missing()
    assert reason is not None and "pip install selenium" in reason

"""A real browser on the Airflow UI: Debian's ``chromium`` driven by ``chromium-driver`` through selenium.

Used by the browser test (``tests/e2e/local/test_ui_e2e.py``) and to take the screenshots in docs/img/ of a
running demo (``./dev demo``, then ``python -m devtools.browser URL USER PASSWORD DAG_ID RUN_ID OUT_DIR``).

Rules: selenium is pointed at the system's ``/usr/bin/chromedriver`` and ``/usr/bin/chromium`` — it downloads
nothing; without them :func:`missing` says how to install them. The browser runs headless with a fixed window
size (screenshots comparable between runs) and is always quit by :func:`browser`'s context.
"""

from __future__ import annotations

import shutil
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any
from urllib.parse import quote

CHROMIUM = "/usr/bin/chromium"
CHROMEDRIVER = "/usr/bin/chromedriver"
INSTALL = "apt-get install -y chromium chromium-driver (Debian/Ubuntu, as root) and pip install selenium"
WAIT_S = 60.0


def missing() -> str | None:
    """Why the browser cannot run here (with how to install it), or ``None``."""
    try:
        import selenium  # noqa: F401
    except ImportError:
        return f"selenium is not installed: {INSTALL}"
    for path in (CHROMIUM, CHROMEDRIVER):
        if not Path(path).exists() and shutil.which(Path(path).name) is None:
            return f"{path} not found: {INSTALL}"
    return None


@contextmanager
def browser(width: int = 1400, height: int = 1000) -> Iterator[Any]:
    """A headless Chromium (quit on exit)."""
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    for arg in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--disable-gpu",
                f"--window-size={width},{height}", "--lang=en-US"):
        options.add_argument(arg)
    options.binary_location = CHROMIUM if Path(CHROMIUM).exists() else str(shutil.which("chromium"))
    driver = webdriver.Chrome(service=Service(CHROMEDRIVER if Path(CHROMEDRIVER).exists()
                                              else str(shutil.which("chromedriver"))), options=options)
    try:
        yield driver
    finally:
        driver.quit()


def _wait(driver: Any, condition: Any, timeout: float = WAIT_S) -> Any:
    from selenium.webdriver.support.ui import WebDriverWait

    return WebDriverWait(driver, timeout).until(condition)


def sign_in(driver: Any, url: str, user: str, password: str) -> None:
    """Sign in through the simple auth manager's login form, as a person does."""
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support import expected_conditions as ec

    driver.get(f"{url}/auth/login")
    name = _wait(driver, ec.visibility_of_element_located((By.CSS_SELECTOR, "input[name='username']")))
    name.send_keys(user)
    driver.find_element(By.CSS_SELECTOR, "input[type='password']").send_keys(password)
    driver.find_element(By.CSS_SELECTOR, "button[type='submit']").click()
    _wait(driver, lambda d: any(c["name"] == "_token" for c in d.get_cookies()))


def open_failover_tab(driver: Any, url: str, dag_id: str, run_id: str) -> Any:
    """Open the run's page on the "Failover" tab and switch into its iframe; return the graph's ``<svg>``."""
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support import expected_conditions as ec

    driver.get(f"{url}/dags/{quote(dag_id, safe='')}/runs/{quote(run_id, safe='')}")
    tab = _wait(driver, ec.element_to_be_clickable((By.XPATH, "//a[normalize-space()='Failover'] | "
                                                               "//button[normalize-space()='Failover']")))
    tab.click()
    frame = _wait(driver, ec.presence_of_element_located((By.CSS_SELECTOR, "iframe")))
    driver.switch_to.frame(frame)
    return _wait(driver, ec.presence_of_element_located((By.CSS_SELECTOR, "svg.rf-graph")))


def open_dry_run(driver: Any, url: str, dag_id: str, failed: str) -> Any:
    """Open the DAG's "Failover dry run" tab, ask what restarts if ``failed`` fails; return the ``<svg>``."""
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support import expected_conditions as ec
    from selenium.webdriver.support.ui import Select

    driver.switch_to.default_content()
    driver.get(f"{url}/dags/{quote(dag_id, safe='')}/plugin/region_failover_dry_run")
    frame = _wait(driver, ec.presence_of_element_located((By.CSS_SELECTOR, "iframe")))
    driver.switch_to.frame(frame)
    Select(_wait(driver, ec.presence_of_element_located((By.ID, "rf-failed")))).select_by_value(failed)
    driver.find_element(By.CSS_SELECTOR, "button[type='submit']").click()
    _wait(driver, lambda d: d.find_elements(By.CSS_SELECTOR, "g.rf-region[data-reason='failed']"))
    return driver.find_element(By.CSS_SELECTOR, "svg.rf-graph")


def reasons(driver: Any) -> dict[str, str]:
    """``region id -> reason`` as the shown SVG draws them (``kept`` for a region not restarted)."""
    from selenium.webdriver.common.by import By

    return {g.get_attribute("data-region"): g.get_attribute("data-reason")
            for g in driver.find_elements(By.CSS_SELECTOR, "svg.rf-graph g.rf-region")}


def screenshot(driver: Any, path: Path) -> Path:
    """Save what the browser shows (the whole page: the UI with the tab's iframe)."""
    driver.switch_to.default_content()
    path.parent.mkdir(parents=True, exist_ok=True)
    driver.save_screenshot(str(path))
    return path


def main(argv: list[str]) -> int:
    """``URL USER PASSWORD DAG_ID RUN_ID OUT_DIR [FAILED]``: the two screenshots of a finished run in docs/img/."""
    url, user, password, dag_id, run_id, out = argv[:6]
    failed = argv[6] if len(argv) > 6 else "aggregate#0"
    reason = missing()
    if reason:
        print(reason, file=sys.stderr)
        return 2
    with browser() as driver:
        sign_in(driver, url, user, password)
        open_failover_tab(driver, url, dag_id, run_id)
        print(reasons(driver))
        print(screenshot(driver, Path(out) / "failover-run.png"))
        open_dry_run(driver, url, dag_id, failed)
        print(screenshot(driver, Path(out) / "failover-dry-run.png"))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

"""The failover view in a real browser (Debian's ``chromium`` + ``chromium-driver`` through selenium), on the run
the S3-outage scenario has just finished — no extra run (after ``test_local_e2e.py`` in the session)::

    a#0 -> b#0 ==+==> c#0 ==> d#0        c#0 fails once: {c#0} restarts (failed), {d#0} (consumer);
    a#1 -> b#1 ==+==> c#1 ==> d#1        every other region is kept. (-> PIPELINED, ==> BLOCKING)

Signs in through the login form, opens the run, opens its "Failover" tab, reads the SVG in the tab's iframe;
then the DAG's "Failover dry run" tab. Both draw the graph to the tab's width (nothing scrolls out of sight) and
list why each failover region restarts; the dry run shows no task state in its cells. Screenshots go to
``$RF_ARTIFACTS`` (else the test's tmp dir).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

from devtools import browser
from tests.e2e.scenarios import _reasons, _the_decision

_MISSING = browser.missing()
pytestmark = [pytest.mark.e2e, pytest.mark.timeout(1500),
              pytest.mark.skipif(_MISSING is not None, reason=f"no browser for the UI test: {_MISSING}")]


@pytest.mark.prefetch("s3down")
def test_the_failover_tab_shows_the_restarted_regions_and_their_reasons(e2e: Any, tmp_path: Path) -> None:
    dag_id, run_id = e2e.started("s3down")
    gate = e2e.gate("s3down")
    gate.mkdir(parents=True, exist_ok=True)
    (gate / "go").touch()  # already open if the outage test ran; else c#0 fails once now
    assert e2e.final_state(dag_id, run_id) == "success", e2e.explain(dag_id, run_id)
    decision = _the_decision(e2e, dag_id, run_id)
    expected = {r["region"]: r["reason"] for r in decision["regions"]}
    assert _reasons(decision) == {"c#0": "failed", "d#0": "consumer"}
    artifacts = Path(os.environ.get("RF_ARTIFACTS") or tmp_path)
    admin = e2e.stack.credentials()
    from selenium.webdriver.common.by import By

    with browser.browser() as driver:
        browser.sign_in(driver, e2e.stack.url, admin.username, admin.password)
        browser.open_failover_tab(driver, e2e.stack.url, dag_id, run_id)
        drawn = browser.reasons(driver)
        assert {r: v for r, v in drawn.items() if v != "kept"} == expected, drawn
        assert len(drawn) == 7 and list(drawn.values()).count("kept") == 5, drawn
        labels = " ".join(g.text for g in driver.find_elements(By.CSS_SELECTOR, "g.rf-region text"))
        assert all(f"{region}: {reason}" in labels for region, reason in expected.items()), labels
        states = {g.get_attribute("data-subtask"): g.get_attribute("data-state")
                  for g in driver.find_elements(By.CSS_SELECTOR, "g.rf-subtask")}
        assert set(states.values()) == {"success"}, states
        events = [r.get_attribute("data-event") for r in driver.find_elements(By.CSS_SELECTOR, "tr.rf-event")]
        assert events == ["failure", "decision", "clear", "rerun"], events
        assert "rerun done" in driver.find_element(By.ID, "rf-timeline").text
        _fits_the_tab(driver)
        why = {r.get_attribute("data-region"): [c.text for c in r.find_elements(By.TAG_NAME, "td")][1:3]
               for r in driver.find_elements(By.CSS_SELECTOR, "#rf-regions tr[data-region]")}
        assert why == {r["region"]: [r["reason"], r["cause"]] for r in decision["regions"]}, why
        run_shot = browser.screenshot(driver, artifacts / "failover-run.png")
        browser.open_dry_run(driver, e2e.stack.url, dag_id, "c#0")
        planned = browser.reasons(driver)
        assert {r: v for r, v in planned.items() if v != "kept"} == expected, planned
        cells = [t.text for t in driver.find_elements(By.CSS_SELECTOR, "g.rf-subtask text")]
        assert len(cells) == 9 and not [c for c in cells if "none" in c], cells
        _fits_the_tab(driver)
        plan_shot = browser.screenshot(driver, artifacts / "failover-dry-run.png")
    assert run_shot.stat().st_size > 10_000 and plan_shot.stat().st_size > 10_000
    print(f"screenshots: {run_shot} {plan_shot}")


def _fits_the_tab(driver: Any) -> None:
    """The graph is drawn to the tab's width (this graph is wider than the tab at its natural size): nothing
    scrolls out of sight, and it is never drawn wider than its natural size."""
    size = driver.execute_script(
        "const s = document.querySelector('svg.rf-graph'), box = s.closest('.graph');"
        "return [s.getBoundingClientRect().width, Number(s.dataset.width), box.scrollWidth, box.clientWidth];")
    drawn, natural, scroll, visible = size
    assert drawn <= visible + 1 and drawn <= natural + 1 and scroll <= visible + 1, size

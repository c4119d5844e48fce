"""The quick-start stack, ``docker/compose.yaml``, built and started as docs/operator/deployment.md's Docker section
says (the same commands: ``up --build --wait``, ``down -v``), with stand-ins for the images no registry gives here
(:mod:`devtools.images`); the example ETL with its injected failure through the stack's REST API::

    gen_* -> clean ==> join#0..1 ==> aggregate#0..3 ==> report#0      fail_once: aggregate#0 fails once ->
                                                                      {aggregate#0} restarts (failed),
                                                                      {report#0} (consumer); nothing else

Asserts the decision (exactly those two regions), the run's success, the tries, the report's rows (against the
ETL's expected report, computed on the stack's Spark Connect server) and the run's Failover tab (the plugin's view
route, signed in with the UI's session cookie; refused without it; a screenshot in Chromium where installed, to
``$RF_ARTIFACTS`` or the test's tmp dir). ``down -v`` and the engine's stop (if the test started it) run on every
exit: failure, timeout, SIGTERM (tests/conftest.py turns it into an interrupt).
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, cast

import httpx
import pytest

from airflow_region_failover.decisions.storage import RunLogs
from airflow_region_failover.plugins.rest import AirflowRestClient, ApiCredentials
from airflow_region_failover.store.result_store import ResultStore
from devtools import browser, engine, images
from tests.e2e.conftest import E2E, REPO_ROOT
from tests.e2e.scenarios import _check_report, _check_tries, _the_decision

_MISSING = engine.missing()
pytestmark = [pytest.mark.e2e, pytest.mark.compose, pytest.mark.timeout(1800),
              pytest.mark.skipif(_MISSING is not None, reason=f"no Docker engine for the compose test: {_MISSING}")]

COMPOSE = ["docker", "compose", "-f", "docker/compose.yaml"]
UP = [*COMPOSE, "up", "--build", "--wait"]
DOWN = [*COMPOSE, "down", "-v"]
URL = "http://127.0.0.1:8080"
ADMIN = ("admin", "admin")  # docker/simple_auth_passwords.json (demo only)
DAG_ID = "tpch_etl"


@dataclass(frozen=True)
class ComposeStack:
    """What :class:`~tests.e2e.conftest.E2E` reads of a stack (no home: the logs are the containers')."""

    url: str
    home: Path | None = None


def _run(cmd: list[str], timeout: float, check: bool = True) -> subprocess.CompletedProcess[str]:
    print(f"$ {' '.join(cmd)}", flush=True)
    return subprocess.run(cmd, cwd=REPO_ROOT, text=True, timeout=timeout, check=check)


def _store_credentials() -> dict[str, Any]:
    """The ``aws_default`` connection the stack's services get (from ``docker compose config``: one source)."""
    done = subprocess.run([*COMPOSE, "config", "--format", "json"], cwd=REPO_ROOT, capture_output=True, text=True,
                          check=True, timeout=60)
    env = json.loads(done.stdout)["services"]["api-server"]["environment"]
    return {"conn": json.loads(env["AIRFLOW_CONN_AWS_DEFAULT"]),
            "bucket": env["AIRFLOW__REGION_FAILOVER__STORE_BUCKET"],
            "prefix": env["AIRFLOW__REGION_FAILOVER__STORE_PREFIX"]}


def _diagnose() -> None:
    """The services' states and the last log lines, for a stack that did not come up or a run that failed."""
    _run([*COMPOSE, "ps", "-a"], 60, check=False)
    _run([*COMPOSE, "logs", "--no-color", "--tail", "60"], 120, check=False)


@pytest.fixture(scope="module")
def stack() -> Iterator[E2E]:
    """Engine, stand-in images, ``up --build --wait``; ``down -v`` and the engine's stop whatever happens."""
    timings: dict[str, float] = {}
    with engine.engine() as started:
        print(f"Docker engine {'started by the test' if started else 'already running'}")
        start = time.monotonic()
        built = images.build_standins()
        timings["stand-ins"] = time.monotonic() - start
        print(f"stand-in images built: {built or 'none (all cached)'}")
        try:
            start = time.monotonic()
            try:
                _run(UP, timeout=1200)
            except (subprocess.CalledProcessError, subprocess.TimeoutExpired):
                _diagnose()
                raise
            timings["up --build --wait"] = time.monotonic() - start
            creds = _store_credentials()
            conn = creds["conn"]
            store = ResultStore.from_endpoint("http://127.0.0.1:8333", conn["login"], conn["password"],
                                              creds["bucket"], prefix=creds["prefix"])
            with AirflowRestClient(ApiCredentials(URL, *ADMIN)) as api:
                yield E2E(stack=cast(Any, ComposeStack(URL)), api=api, store=store, logs=RunLogs(store.objects))
        finally:
            start = time.monotonic()
            _run(DOWN, timeout=300, check=False)
            timings["down -v"] = time.monotonic() - start
            print("timings: " + ", ".join(f"{k} {v:.0f} s" for k, v in timings.items()))


def test_the_compose_stack_runs_the_example_etl_and_restarts_only_the_failed_region(
        stack: E2E, tmp_path: Path) -> None:
    start = time.monotonic()
    stack.api.wait_for_dag(DAG_ID, timeout=300)
    run_id = stack.api.trigger(DAG_ID, {"fail_once": True})
    state = stack.final_state(DAG_ID, run_id, timeout=900)
    print(f"run {run_id}: {state} after {time.monotonic() - start:.0f} s")
    if state != "success":
        _diagnose()
    assert state == "success", stack.explain(DAG_ID, run_id)
    decision = _the_decision(stack, DAG_ID, run_id)
    reasons = {"+".join(r["subtasks"]): r["reason"] for r in decision["regions"]}
    assert reasons == {"aggregate#0": "failed", "report#0": "consumer"}, stack.explain(DAG_ID, run_id)
    _check_tries(stack.tries(DAG_ID, run_id), {"aggregate.0"}, {"report.0"})
    _check_report(stack, run_id, "sc://127.0.0.1:15002")
    drawn = _failover_tab(run_id)
    expected = {r["region"]: r["reason"] for r in decision["regions"]}
    assert {r: v for r, v in drawn.items() if v != "kept"} == expected, drawn
    _screenshot(run_id, decision, Path(os.environ.get("RF_ARTIFACTS") or tmp_path))


def _failover_tab(run_id: str) -> dict[str, str]:
    """The run's Failover tab as the UI's iframe loads it: the plugin's view route, signed in with the session
    cookie the login sets (``_token``); without it the route refuses. Returns ``region -> reason`` as drawn."""
    route = f"{URL}/region-failover/run/{DAG_ID}/{run_id}"
    with httpx.Client(timeout=60) as http:
        assert http.get(route).status_code == 401, "the Failover view answered without a login"
        token = http.post(f"{URL}/auth/token", json={"username": ADMIN[0], "password": ADMIN[1]}).json()
        page = http.get(route, cookies={"_token": token["access_token"]})
    assert page.status_code == 200, page.text[:2000]
    drawn = dict(re.findall(r'<g class="rf-region[^"]*"[^>]*data-region="([^"]+)"[^>]*data-reason="([^"]+)"',
                            page.text))
    assert drawn, page.text[:3000]
    return drawn


def _screenshot(run_id: str, decision: dict[str, Any], artifacts: Path) -> None:
    """The Failover tab in Chromium (signed in through the login form), where installed; else said and skipped."""
    if browser.missing() is not None:
        print(f"no Failover tab screenshot: {browser.missing()}")
        return
    expected = {r["region"]: r["reason"] for r in decision["regions"]}
    with browser.browser() as driver:
        browser.sign_in(driver, URL, *ADMIN)
        browser.open_failover_tab(driver, URL, DAG_ID, run_id)
        drawn = browser.reasons(driver)
        assert {r: v for r, v in drawn.items() if v != "kept"} == expected, drawn
        shot = browser.screenshot(driver, artifacts / "failover-compose.png")
    assert shot.stat().st_size > 10_000
    print(f"screenshot: {shot}")

"""End-to-end fixtures: ONE SeaweedFS, ONE Spark Connect server and ONE Airflow 3 stack per test session.

Everything runs on loopback and is started here (real scheduler, real Spark, real S3 server); every process is
stopped at the end of the session. The DAGs folder holds the example ETL and the e2e DAGs of ``dags/``.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from devtools.airflow_stack import (
    REPO_ROOT,
    AirflowStack,
    merged_dags_folder,
    platform_env,
)

E2E_DAGS = Path(__file__).parent / "dags"
DAG_IDS = ("tpch_etl", "rf_e2e_region", "rf_e2e_full", "rf_e2e_delayed", "rf_e2e_deterministic", "rf_e2e_budget",
           "rf_e2e_retries", "rf_e2e_code")
#: Users besides the admin: ``viewer`` may read every DAG; ``outsider`` (role viewer) may not see ``rf_e2e_region``
#: (tests.support.auth.DagDenyingAuthManager).
USERS = {"viewer": "viewer", "outsider": "viewer"}
DENIED = "outsider:rf_e2e_region"
#: A second watcher, as a second scheduler would run one (HA): every scenario runs with two.
SECOND_WATCHER = """
import signal, threading
from airflow_region_failover.plugins.watcher import Watcher
stop = threading.Event()
signal.signal(signal.SIGTERM, lambda *a: stop.set())
watcher = Watcher()
watcher.start()
stop.wait()
watcher.stop()
"""
#: Independent scenarios triggered together by the first test needing one (their waits overlap).
PREFETCH = {
    "region": ("rf_e2e_region", {"fail": {"c#0": 1}}),
    "full": ("rf_e2e_full", {"fail": {"c#0": 1}}),
    "budget": ("rf_e2e_budget", {"fail": {"c#0": 5}}),
    "kill": ("rf_e2e_region", {"kill": ["c#0"]}),
    "delayed": ("rf_e2e_delayed", {"fail": {"d#0": 1}}),
    "retries": ("rf_e2e_retries", {"fail": {"c#0": 1}}),
}


@dataclass
class E2E:
    """What a test needs: the stack, a REST client, the result store, the decision logs, the S3 server process and
    the DAGs folder."""

    stack: AirflowStack
    api: Any
    store: Any
    logs: Any
    s3: Any = None
    dags: Path | None = None
    prefetched: dict[str, str] = field(default_factory=dict)

    def prefetch(self) -> None:
        """Trigger every :data:`PREFETCH` scenario now."""
        for name, (dag_id, conf) in PREFETCH.items():
            self.prefetched[name] = self.api.trigger(dag_id, conf)

    def finished(self, name: str, timeout: float = 900.0) -> tuple[str, str, str]:
        """``(dag_id, run_id, state)`` of a prefetched scenario once its run has ended (the first call triggers
        every scenario, so running a single test does not start the others)."""
        if not self.prefetched:
            self.prefetch()
        dag_id = PREFETCH[name][0]
        run_id = self.prefetched[name]
        return dag_id, run_id, self.final_state(dag_id, run_id, timeout)

    def run(self, dag_id: str, conf: dict[str, Any] | None = None, timeout: float = 900.0) -> tuple[str, str]:
        """Trigger ``dag_id`` and wait until it ends; return ``(run_id, state)``."""
        run_id = self.api.trigger(dag_id, conf or {})
        return run_id, self.final_state(dag_id, run_id, timeout)

    def final_state(self, dag_id: str, run_id: str, timeout: float = 900.0, grace: float = 15.0) -> str:
        """Wait for a terminal state that stays: a run can show ``failed`` for a moment before the restart's
        clear puts it back to ``running`` (the scheduler marks it failed when every task is done)."""
        deadline = time.monotonic() + timeout
        while True:
            state = self.api.wait_for_run(dag_id, run_id, timeout=max(1.0, deadline - time.monotonic()), poll=0.5)
            if state == "success":
                return state
            time.sleep(grace)
            if self.api.dag_run(dag_id, run_id)["state"] == state or time.monotonic() > deadline:
                return state

    def tries(self, dag_id: str, run_id: str) -> dict[str, int]:
        """``task_id -> try_number`` of every task instance of the run."""
        return {ti["task_id"]: int(ti["try_number"]) for ti in self.api.task_instances(dag_id, run_id)}

    def states(self, dag_id: str, run_id: str) -> dict[str, str]:
        """``task_id -> state``."""
        return {ti["task_id"]: str(ti["state"]) for ti in self.api.task_instances(dag_id, run_id)}

    def explain(self, dag_id: str, run_id: str) -> str:
        """Everything a failed assertion needs, in full: states, tries and the decision log of the run."""
        import json

        tis = {ti["task_id"]: (ti["state"], ti["try_number"]) for ti in self.api.task_instances(dag_id, run_id)}
        doc = self.history(dag_id, run_id)
        text = f"{dag_id}/{run_id}\ntasks: {tis}\ndecisions: {json.dumps(doc.get('decisions'), indent=1)}" \
               f"\nevents: {json.dumps(doc.get('events'))}\ncleared: {doc.get('cleared_tries')}"
        print(text)  # shown in full under "Captured stdout" even where pytest shortens the assertion message
        return text

    def history(self, dag_id: str, run_id: str) -> dict[str, Any]:
        """The run's decision log (its JSON form)."""
        return dict(self.logs.read(dag_id, run_id).to_json())

    def wait_until(self, predicate: Any, timeout: float = 120.0, what: str = "condition") -> None:
        """Poll ``predicate()`` until true."""
        deadline = time.monotonic() + timeout
        while not predicate():
            if time.monotonic() > deadline:
                raise TimeoutError(f"{what} not reached after {timeout:.0f} s")
            time.sleep(0.3)


@pytest.fixture(scope="session")
def e2e(s3_process: Any, s3_server: Any, spark_connect: str,
        tmp_path_factory: pytest.TempPathFactory) -> Iterator[E2E]:
    """The shared stack (started once; ~30-60 s), with a second watcher process beside the scheduler's."""
    import shutil
    import subprocess
    import sys

    from airflow_region_failover.store.facade import ResultStore
    from airflow_region_failover.store.runlog import RunLogs
    from devtools.processes import stop_group

    home = tmp_path_factory.mktemp("airflow")
    dags = merged_dags_folder(home / "dags", REPO_ROOT / "dags" / "tpch_etl.py", E2E_DAGS / "rf_e2e.py")
    shutil.copy(E2E_DAGS / "rf_e2e_code.py", dags / "rf_e2e_code.py")  # a real file: a test edits it
    stack = AirflowStack(dags_folder=dags, home=home / "home",
                         extra_env={**platform_env(s3_server, spark_connect), "RF_TEST_DAG_DENIED": DENIED},
                         parallelism=8, users=USERS, auth_manager="tests.support.auth.DagDenyingAuthManager")
    stack.start()
    watcher = None
    try:
        with open(stack.home / "second-watcher.log", "ab") as out:  # type: ignore[operator]
            watcher = subprocess.Popen([sys.executable, "-c", SECOND_WATCHER], env=stack.env(), stdout=out,
                                       stderr=subprocess.STDOUT, start_new_session=True)
        store = ResultStore.from_endpoint(s3_server.endpoint_url, s3_server.access_key, s3_server.secret_key,
                                          s3_server.bucket)
        logs = RunLogs(store.objects)
        with stack.client() as api:
            for dag_id in DAG_IDS:
                api.wait_for_dag(dag_id, timeout=180)
            yield E2E(stack, api, store, logs, s3_process, dags)
    finally:
        stop_group(watcher, 10)
        stack.stop()

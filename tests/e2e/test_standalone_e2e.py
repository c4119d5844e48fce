"""``region-failover standalone`` as a user runs it: on a DAGs folder holding the README's first DAG, it serves
the UI, runs that DAG with an injected failure (the failover restarts the failed region and its consumer), and
SIGTERM stops everything it started — nothing of it keeps running. It prints how to reach its S3 (keys in a 0600
file, not on the terminal) and keeps its secrets 0600 in a 0700 home. Starting it again on the same home keeps the
run and its history, and honours the ``AIRFLOW__...`` settings exported to it, as ``airflow standalone`` does (an
``extended`` scenario: a second start costs ~45 s of CI).

    numbers#0 ==> squares#0 ==+==> total#0        squares#0 fails on its first try
    numbers#1 ==> squares#1 ==+                   (==> BLOCKING)
"""

from __future__ import annotations

import os
import re
import signal
import stat
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest

from airflow_region_failover.plugins.rest import AirflowRestClient, ApiCredentials
from airflow_region_failover.standalone.processes import MARKER, marked
from tests.support.readme import readme_dag

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(900)]
DAG_ID = "my_first_region_job"
UP = re.compile(r"is up: (http://127\.0\.0\.1:\d+)\s+user: (\S+)\s+password: (\S+)")


class Standalone:
    """``region-failover standalone`` in a child process, its output in a file."""

    def __init__(self, dags: Path, home: Path, exported: dict[str, str] | None = None) -> None:
        self.out = home.parent / f"standalone-{time.monotonic_ns()}.out"
        env = {**{k: v for k, v in os.environ.items() if not k.startswith("AIRFLOW")}, **(exported or {})}
        self.proc = subprocess.Popen(
            [str(Path(sys.executable).with_name("region-failover")), "standalone", "--dags", str(dags),
             "--port", "0", "--home", str(home)],
            stdout=self.out.open("wb"), stderr=subprocess.STDOUT, env=env)

    def wait_up(self, timeout: float = 300.0) -> tuple[str, str, str]:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            found = UP.search(self.out.read_text(errors="replace"))
            if found:
                return found.group(1), found.group(2), found.group(3)
            assert self.proc.poll() is None, self.out.read_text(errors="replace")[-3000:]
            time.sleep(1)
        raise TimeoutError(self.out.read_text(errors="replace")[-3000:])

    def started(self) -> tuple[set[str], list[psutil.Process]]:
        """The stack markers of everything it started (its children carry its own id), and those processes."""
        ids, tree = set(), psutil.Process(self.proc.pid).children(recursive=True)
        for child in tree:
            try:
                ids.add(child.environ().get(MARKER))
            except psutil.Error:
                continue
        return {i for i in ids if i}, tree

    def terminate(self) -> int:
        self.proc.send_signal(signal.SIGTERM)
        return self.proc.wait(timeout=120)


def _cmd(proc: psutil.Process) -> str:
    """A live process's command line; '' once it has exited (a zombie included)."""
    try:
        return " ".join(proc.cmdline())
    except psutil.Error:
        return ""


def test_standalone_runs_a_readme_dag_with_a_failure_and_stops_cleanly_on_sigterm(tmp_path: Path) -> None:
    _run_and_stop(tmp_path / "dags", tmp_path / "home")


@pytest.mark.extended  # the password kept in the home and the exported settings: tests/unit/standalone/test_command.py
def test_standalone_started_again_on_its_home_keeps_the_run_and_honours_exported_settings(tmp_path: Path) -> None:
    dags, home = tmp_path / "dags", tmp_path / "home"
    run_id = _run_and_stop(dags, home)
    exported = {"AIRFLOW__API__EXPOSE_CONFIG": "True", "AIRFLOW__REGION_FAILOVER__WATCH_INTERVAL": "0.7"}
    again = Standalone(dags, home, exported)  # the same home: the run and its note are still there
    try:
        url, user, password = again.wait_up()
        assert password == (home / "admin-password").read_text().strip()
        with AirflowRestClient(ApiCredentials(url, user, password)) as api:
            assert api.dag_run(DAG_ID, run_id)["state"] == "success"
            assert "squares#0" in (api.dag_run(DAG_ID, run_id)["note"] or "")
            option = api.get("/config/section/region_failover/option/watch_interval")
            assert option["sections"][0]["options"][0]["value"] == "0.7", option
    finally:
        assert again.terminate() == 0


def _run_and_stop(dags: Path, home: Path) -> str:
    """Start the standalone on ``dags`` (the README's first DAG) and ``home``, run the DAG with its injected
    failure, check the restart and the note, SIGTERM it and check that nothing of it runs and its secrets are kept;
    the run's id."""
    dags.mkdir()
    (dags / f"{DAG_ID}.py").write_text(readme_dag())
    standalone = Standalone(dags, home)
    try:
        url, user, password = standalone.wait_up()
        ids, tree = standalone.started()
        names = " ".join(_cmd(p) for p in tree)
        wanted = ("weed", "standalone.connect_server", "scheduler", "api_server")
        assert len(ids) == 1 and all(n in names for n in wanted)
        with AirflowRestClient(ApiCredentials(url, user, password)) as api:
            api.wait_for_dag(DAG_ID, timeout=180)
            run_id = api.trigger(DAG_ID, {"fail_once": True})
            assert api.final_state(DAG_ID, run_id, timeout=600.0) == "success", api.task_instances(DAG_ID, run_id)
            tries = {ti["task_id"]: int(ti["try_number"]) for ti in api.task_instances(DAG_ID, run_id)}
            assert (tries["numbers.0"], tries["numbers.1"], tries["squares.0"], tries["squares.1"]) == (1, 1, 2, 1), \
                tries  # total#0 restarts as the consumer: its try is 1 or 2 (whether it had started)
            note = api.dag_run(DAG_ID, run_id)["note"] or ""
            assert "squares#0" in note and "failed" in note, note
        assert standalone.terminate() == 0
        assert all(not marked(i) for i in ids), [p.cmdline() for i in ids for p in marked(i)]
        alive = [_cmd(p) for p in tree if p.is_running() and _cmd(p)]
        assert not alive, alive
        assert "Stopping" in standalone.out.read_text()
        _secrets_kept(standalone.out.read_text(), home)
        return run_id
    finally:
        if standalone.proc.poll() is None:
            standalone.proc.kill()


def _secrets_kept(out: str, home: Path) -> None:
    """The way to S3 is printed, its keys are in ``<home>/s3.env`` (0600) and not in the output; the home is 0700
    and the simple auth manager's passwords file 0600."""
    assert re.search(r"Result store \(S3, SeaweedFS\): endpoint http://127\.0\.0\.1:\d+\s+bucket region-failover", out)
    assert f"{home.resolve() / 's3.env'} (0600)" in out and "/region-failover/tables/<table>" in out
    keys = dict(line.split("=", 1) for line in (home / "s3.env").read_text().splitlines())
    assert keys["AWS_SECRET_ACCESS_KEY"] and keys["AWS_SECRET_ACCESS_KEY"] not in out
    modes = {p: stat.S_IMODE((home / p).stat().st_mode) for p in ("", "s3.env", "airflow/passwords.json")}
    assert modes == {"": 0o700, "s3.env": 0o600, "airflow/passwords.json": 0o600}, modes

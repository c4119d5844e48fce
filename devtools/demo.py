"""The demo: ``region-failover standalone`` on the example DAGs, then the example ETL with one failure.

``./dev demo [--exit] [--no-fail] [--port N]`` (``python -m devtools.demo`` from the repository root).

Rules: everything runs on 127.0.0.1 in a temporary home and is stopped on exit (Ctrl-C, SIGTERM, SIGHUP, or right
after the run with ``--exit``; if the demo is killed, its guard process stops the rest). It prints the UI address
and the admin credentials first, then each task state change, then what was restarted and why (the failover
history) and the final state of the run and of every task. The home is removed on exit unless the demo failed (an
error, or a run that did not succeed): then it is kept, and named, for the stack's logs.
"""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from airflow_region_failover.decisions.storage import RunLogs
from airflow_region_failover.plugins.history import format_history
from airflow_region_failover.plugins.rest import RunEnd
from airflow_region_failover.standalone.command import Standalone
from airflow_region_failover.standalone.processes import stop_guarded, stop_on_signals
from airflow_region_failover.store.result_store import ResultStore

DAG_ID = "tpch_etl"
REPO_ROOT = Path(__file__).resolve().parents[1]


def _say(text: str) -> None:
    sys.stdout.write(text + "\n")
    sys.stdout.flush()


def _follow(api: Any, run_id: str, timeout: float) -> str:
    """Print task state changes until the run ends; return its final state (by the REST client's rule,
    :class:`~airflow_region_failover.plugins.rest.RunEnd`: ``failed`` once it stayed failed)."""
    seen: dict[str, tuple[str, int]] = {}
    start = time.monotonic()
    end = RunEnd()
    while time.monotonic() - start < timeout:
        for ti in api.task_instances(DAG_ID, run_id):
            now = (str(ti["state"]), int(ti["try_number"]))
            if seen.get(ti["task_id"]) != now:
                seen[ti["task_id"]] = now
                _say(f"  {time.monotonic() - start:6.1f} s  {ti['task_id']:<18} {now[0]:<16} try {now[1]}")
        state = str(api.dag_run(DAG_ID, run_id)["state"])
        if end.final(state):
            return state
        time.sleep(1.0)
    return "timeout"


def _summary(api: Any, logs: Any, run_id: str, state: str) -> None:
    _say(f"\n== Failover history (region-failover history {DAG_ID} {run_id}) ==")
    _say(format_history(logs.read(DAG_ID, run_id)))
    _say("\n== Final state ==")
    _say(f"run {run_id}: {state.upper()}")
    for ti in sorted(api.task_instances(DAG_ID, run_id), key=lambda t: t["task_id"]):
        _say(f"  {ti['task_id']:<18} {ti['state']:<10} tries: {ti['try_number']}")


def run_demo(fail_once: bool = True, keep_open: bool = True, port: int = 0, timeout: float = 1200.0) -> int:
    """Start everything, run the ETL, print the outcome; keep the UI up until Ctrl-C if ``keep_open``."""
    stop_on_signals()
    home = Path(tempfile.mkdtemp(prefix="rf-demo-"))
    stack = Standalone(REPO_ROOT / "dags", home, port)
    errored, failed = True, False  # kept for the logs when either holds (module rule)
    try:
        stack.start()
        airflow = stack.airflow
        assert airflow is not None
        _say(f"  Airflow UI: {airflow.url}   user: {airflow.username}   password: {airflow.password}")
        endpoint = stack.endpoint
        store = ResultStore.from_endpoint(endpoint.endpoint_url, endpoint.access_key, endpoint.secret_key,
                                          endpoint.bucket)
        logs = RunLogs(store.objects)
        with airflow.client() as api:
            api.wait_for_dag(DAG_ID, timeout=300)
            run_id = api.trigger(DAG_ID, {"fail_once": fail_once})
            _say(f"\nTriggered {DAG_ID} run {run_id} with fail_once={fail_once} "
                 f"(see {airflow.url}/dags/{DAG_ID}/runs/{run_id})")
            state = _follow(api, run_id, timeout)
            _summary(api, logs, run_id, state)
            errored, failed = False, state != "success"
            _say(f"\nThe run's Failover tab (graph, restarted regions and why, timeline): "
                 f"{airflow.url}/dags/{DAG_ID}/runs/{run_id}/plugin/region_failover")
        if keep_open:
            _say(f"\nThe UI stays up at {airflow.url} (user {airflow.username}, password {airflow.password}). "
                 "Ctrl-C to stop everything.")
            while True:
                time.sleep(3600)
        return 1 if failed else 0
    except KeyboardInterrupt:
        errored = False
        return 0
    finally:
        _say("Stopping ...")
        stack.stop()
        stop_guarded()
        if errored or failed:
            _say(f"Kept the demo's home for its logs: {home} (the components' in {home / 'airflow'}/*.log, the tasks' "
                 f"under {home / 'airflow' / 'logs'}); remove it when done")
        else:
            shutil.rmtree(home, ignore_errors=True)


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m devtools.demo [--exit] [--no-fail] [--port N]``."""
    parser = argparse.ArgumentParser(prog="./dev demo", description=__doc__.splitlines()[0])
    parser.add_argument("--exit", action="store_true", help="stop everything when the run has finished (CI)")
    parser.add_argument("--no-fail", action="store_true", help="run without the injected failure")
    parser.add_argument("--port", type=int, default=0, help="port of the Airflow UI/API (default: a free one)")
    args = parser.parse_args(sys.argv[1:] if argv is None else argv)
    return run_demo(fail_once=not args.no_fail, keep_open=not args.exit, port=args.port)


if __name__ == "__main__":
    sys.exit(main())

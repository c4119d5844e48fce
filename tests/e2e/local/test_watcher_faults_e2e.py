"""Faults of the scheduler's own process on the embedded stack (after the scenarios of ``test_local_e2e.py``: these
restart the scheduler and take S3 away, so they run once no other run is active).

    a#0 -> b#0 ==+==> c#0 ==> d#0        rf_e2e_region: c#0 fails once; {c#0} restarts (failed), {d#0} (consumer)
    a#1 -> b#1 ==+==> c#1 ==> d#1        (-> PIPELINED, ==> BLOCKING)
"""

from __future__ import annotations

import contextlib
import time
from pathlib import Path
from typing import Any

import psutil
import pytest

from tests.e2e.scenarios import _applied, _reasons, _the_decision, _wait_idle

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(1500)]

LOOKBACK = "AIRFLOW__REGION_FAILOVER__WATCH_LOOKBACK"
TRIED_S = 120.0
"""How long the restarted scheduler's watcher may take to try (and fail) to record the failure while S3 is away."""
FORK_TASKS = 3


def test_a_failure_not_recorded_during_an_outage_survives_a_scheduler_restart_past_the_look_back(
        e2e: Any, tmp_path: Path) -> None:
    """S3 goes away; c#0 fails: neither its worker nor a watcher can record it. Then both watchers (the scheduler,
    and the second watcher beside it) restart with ``watch_lookback`` = 5 s, more than 5 s after the failure and
    while S3 is still away: their probes look back no further than their start, and the run has ended. Once S3
    answers again the failure must still be recorded and applied, and the run succeed."""
    dag_id, gate = "rf_e2e_region", tmp_path / "gate"
    _wait_idle(e2e)  # no other run sees S3 go away (a gated scenario run would hold this test, and it this one)
    run_id = e2e.api.trigger(dag_id, {"fail": {"c#0": 1}, "gate": str(gate)})
    e2e.wait_until(lambda: (gate / "c#0.started").exists(), 900, "c#0 at the gate")
    others = ("a.b.0", "a.b.1", "c.1", "d.1", "side.0")
    e2e.wait_until(lambda: all(e2e.states(dag_id, run_id).get(t) == "success" for t in others), 900, "the rest")
    _wait_idle(e2e, but=(run_id,))
    original, short = dict(e2e.stack.extra_env), {LOOKBACK: "5"}
    try:
        with e2e.s3.down():  # S3 answers again at the end of the block
            (gate / "go").touch()
            e2e.wait_until(lambda: e2e.states(dag_id, run_id).get("c.0") == "failed", 300, "c#0 failed")
            failed = time.monotonic()
            time.sleep(5.0)  # the watchers find the failure and cannot record it
            killed = e2e.stack.kill("scheduler", stay_down=True)
            e2e.second_watcher.stop()
            e2e.stack.extra_env = {**original, **short}
            time.sleep(max(0.0, 10.0 - (time.monotonic() - failed)))  # restarted past their look-back
            e2e.stack.revive("scheduler")
            e2e.second_watcher.start(short)
            e2e.wait_until(lambda: e2e.stack.pid("scheduler") != killed, 60, "the scheduler started again")
            since = _watcher_started(e2e, e2e.stack.pid("scheduler"), 120.0)
            restarted = time.monotonic() - failed
            _tried_to_record(e2e, since, f"c.0 of {dag_id}/{run_id}", TRIED_S)
    finally:
        e2e.stack.extra_env = original
    back = time.monotonic()
    try:
        e2e.wait_until(lambda: _applied(e2e.history(dag_id, run_id)), 300, "the failure recorded and applied")
    except TimeoutError as exc:
        raise AssertionError(f"{exc}\n{e2e.explain(dag_id, run_id)}") from exc
    print(f"watcher restarted {restarted:.0f} s after the failure; recorded and applied "
          f"{time.monotonic() - back:.1f} s after S3 answered again")
    assert e2e.final_state(dag_id, run_id) == "success", e2e.explain(dag_id, run_id)
    assert _reasons(_the_decision(e2e, dag_id, run_id)) == {"c#0": "failed", "d#0": "consumer"}
    kept = e2e.api.get(f"/dags/{dag_id}/dagRuns/{run_id}/taskInstances/c.0/xcomEntries")["xcom_entries"]
    assert [x["key"] for x in kept if x["key"].startswith("region_failover")] == [], "recorded: no longer kept"


def _watcher_started(e2e: Any, scheduler: int, timeout: float) -> int:
    """Wait until the watcher of scheduler process ``scheduler`` has started (its log line names the process);
    where the scheduler's log goes on from that line."""
    log, line = Path(e2e.stack.home) / "scheduler.log", f":{scheduler} started"
    e2e.wait_until(lambda: line in log.read_text(errors="replace"), timeout, f"the watcher of scheduler {scheduler}")
    text = log.read_text(errors="replace")
    return text.rindex(line) + len(line)


def _tried_to_record(e2e: Any, since: int, failure: str, timeout: float) -> None:
    """Wait until the scheduler's log, after offset ``since``, says its watcher could not record ``failure``
    (``<task> of <dag>/<run>``): the restarted watcher tried while S3 was away."""
    log = Path(e2e.stack.home) / "scheduler.log"
    e2e.wait_until(lambda: f"could not record {failure}" in log.read_text(errors="replace")[since:], timeout,
                   f"the restarted watcher trying to record {failure}")


def _local_workers(scheduler: psutil.Process) -> list[psutil.Process]:
    return [p for p in scheduler.children() if "LocalExecutor" in " ".join(p.cmdline())]


def _waiting_for_the_queue_lock(worker: psutil.Process) -> bool:
    """An idle LocalExecutor worker blocked on the task queue's lock (not the one holding it while it reads the
    queue: killing that one would leave the lock held for ever)."""
    try:
        return "futex" in Path(f"/proc/{worker.pid}/wchan").read_text()
    except OSError:
        return False


def test_a_local_executor_worker_forked_after_the_watcher_ran_inherits_no_client(e2e: Any) -> None:
    """
        rf_e2e_fork: inherits_no_client_0, _1, _2 (plain tasks, in parallel)

    The scheduler's watcher has built its S3 client, result store and decision logs (every pass lists the pending
    decisions), and its REST client once it applied a decision. Idle LocalExecutor workers die; the executor forks
    replacements from the scheduler when tasks are queued. A task process forked by such a worker must hold no
    client it did not build itself (else it speaks over the scheduler's keep-alive connections)."""
    _wait_idle(e2e)
    scheduler = psutil.Process(e2e.stack.pid("scheduler"))
    _watcher_started(e2e, scheduler.pid, 120.0)
    time.sleep(3.0)  # a few watcher passes: its clients are built
    before = _local_workers(scheduler)
    doomed = [w for w in before if _waiting_for_the_queue_lock(w)]
    assert len(doomed) >= FORK_TASKS, f"idle workers waiting for the queue: {len(doomed)} of {len(before)}"
    for worker in doomed:
        worker.kill()
    psutil.wait_procs(doomed, timeout=30)
    run_id, state = e2e.run("rf_e2e_fork", timeout=600)
    logs = {f"inherits_no_client_{i}": e2e.stack.task_log("rf_e2e_fork", run_id, f"inherits_no_client_{i}")
            for i in range(FORK_TASKS)}
    assert state == "success", "\n".join(f"{task}: {_errors(text)}" for task, text in logs.items())
    ran_in = {task: _returned(e2e, run_id, task)["worker"] for task in logs}
    old = {w.pid for w in before}
    assert [task for task, worker in ran_in.items() if worker not in old], f"no task ran in a new worker: {ran_in}"


def _errors(task_log: str) -> str:
    """What a task logged at level error (its exception's message first), or that it logged none."""
    import json

    found = []
    for line in task_log.splitlines():
        with contextlib.suppress(ValueError):
            event = json.loads(line)
            if event.get("level") == "error":
                found.append(str(event.get("error_detail", [{}])[0].get("exc_value") or event.get("event")))
    return "; ".join(found)[:2000] or "no error logged"


def _returned(e2e: Any, run_id: str, task_id: str) -> dict[str, Any]:
    entry = e2e.api.get(f"/dags/rf_e2e_fork/dagRuns/{run_id}/taskInstances/{task_id}/xcomEntries/return_value",
                        deserialize=True, stringify=False)
    return dict(entry["value"])

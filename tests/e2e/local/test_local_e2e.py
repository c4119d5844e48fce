"""Scenarios on the embedded stack (what ``region-failover standalone`` and the demo run: SQLite, LocalExecutor,
one scheduler, Spark Connect on ``local[2]``, SeaweedFS) with a second watcher process beside the scheduler's.

    a#0 -> b#0 ==+==> c#0 ==> d#0        rf_e2e_*: a -PIPELINED POINTWISE-> b -BLOCKING ALL_TO_ALL-> c
    a#1 -> b#1 ==+==> c#1 ==> d#1                  -BLOCKING POINTWISE-> d; plus an unconnected side#0

a -> b is chained: tasks ``a.b.0`` and ``a.b.1`` run a#i and b#i (a failure of either is a failure of that task).
"""

from __future__ import annotations

import time
from concurrent.futures import ThreadPoolExecutor
from datetime import datetime
from pathlib import Path
from typing import Any

import httpx
import pytest

from airflow_region_failover.graph.ids import PartitionId
from tests.e2e.scenarios import (
    E2E_DAG,
    _applied,
    _attempts,
    _check_report,
    _check_tries,
    _d_output,
    _delete_partition,
    _patch,
    _post,
    _reasons,
    _reparse,
    _the_decision,
    _values,
    _wait_idle,
)

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(1500)]


@pytest.mark.extended
def test_deterministic_producer_re_produced_byte_identical_keeps_finished_consumers(e2e: Any,
                                                                                   tmp_path: Path) -> None:
    """As the backtracking test, but ``b`` is declared ``deterministic``: b#1 re-produces its deleted partition
    byte-identical, so the finished consumers c#1 and d#1 keep their committed results (restarted, not recomputed).

        a#0 -> b#0 ==+==> c#0 ==> d#0        c#0 fails after b->c#1 was deleted
        a#1 -> b#1 ==+==> c#1 ==> d#1        (-> PIPELINED, ==> BLOCKING)
    """
    dag_id, gate = "rf_e2e_deterministic", tmp_path / "gate"
    run_id = e2e.api.trigger(dag_id, {"fail": {"c#0": 1}, "gate": str(gate)})
    e2e.wait_until(lambda: (gate / "c#0.started").exists(), 900, "c#0 at the gate")
    e2e.wait_until(lambda: e2e.states(dag_id, run_id).get("d.1") == "success", 900, "d#1 done")
    before = _attempts(e2e, dag_id, run_id, ["b->c#1", "c->d#1", "d#1"])
    checksum = e2e.store.manifest(dag_id, run_id, PartitionId("b->c", 1)).content_checksum
    assert _delete_partition(e2e, dag_id, run_id, "b->c", 1) > 0
    (gate / "go").touch()
    assert e2e.final_state(dag_id, run_id) == "success", e2e.explain(dag_id, run_id)
    decision = _the_decision(e2e, dag_id, run_id)
    assert sorted(decision["restart"]) == ["a.b.1", "c.0", "c.1", "d.0", "d.1"]
    tries = e2e.tries(dag_id, run_id)
    assert tries["a.b.1"] == tries["c.1"] == tries["d.1"] == 2, tries
    after = _attempts(e2e, dag_id, run_id, ["b->c#1", "c->d#1", "d#1"])
    assert before == {"b->c#1": 1, "c->d#1": 1, "d#1": 1} and after == {"b->c#1": 2, "c->d#1": 1, "d#1": 1}
    assert e2e.store.manifest(dag_id, run_id, PartitionId("b->c", 1)).content_checksum == checksum
    assert "kept BLOCKING partition c->d#1" in e2e.stack.task_log(dag_id, run_id, "c.1", 2)
    assert _d_output(e2e, dag_id, run_id) == E2E_DAG["expected_d"]()


@pytest.mark.extended
@pytest.mark.prefetch("full")
def test_full_strategy_reruns_every_task(e2e: Any) -> None:
    """``full``: every task of the run gets a second try, the unrelated ``side`` included."""
    _, run_id, state = e2e.finished("full")
    assert state == "success", e2e.explain("rf_e2e_full", run_id)
    tries = e2e.tries("rf_e2e_full", run_id)
    assert all(tries[t] == 2 for t in ("a.b.0", "a.b.1", "c.0", "c.1", "side.0")), tries
    decision = _the_decision(e2e, "rf_e2e_full", run_id)
    assert decision["strategy"] == "full" and "full" in _reasons(decision).values()
    assert _d_output(e2e, "rf_e2e_full", run_id) == E2E_DAG["expected_d"]()


@pytest.mark.extended
@pytest.mark.prefetch("delayed")
def test_restart_delay_is_honoured_while_the_run_keeps_running(e2e: Any) -> None:
    """Backoff delay 60 s: the decision is cleared at once (the run is ``running`` again) but the restarted task
    runs only 60 s after the failure: it is rescheduled to the restart time (no worker slot held meanwhile). (The
    delay is long enough that the restarted task starts before it even when the session's other runs hold the
    stack's worker slots for a while: measured, 34 s once on 2 busy cores.)"""
    _, run_id, state = e2e.finished("delayed")
    assert state == "success", e2e.explain("rf_e2e_delayed", run_id)
    decision = _the_decision(e2e, "rf_e2e_delayed", run_id)
    failed_at = decision["failures"][0]["at"]
    assert decision["apply_at"] >= failed_at + 59.9 > decision["applied_at"]
    _check_tries(e2e.tries("rf_e2e_delayed", run_id), {"d.0"}, set())
    log = e2e.stack.task_log("rf_e2e_delayed", run_id, "d.0", 2)
    assert "restart backoff delay" in log and "UP_FOR_RESCHEDULE" in log, log[-2000:]
    committed = e2e.store.manifest("rf_e2e_delayed", run_id, PartitionId("d", 0))
    assert committed.attempt == 2
    assert datetime.fromisoformat(committed.committed_at).timestamp() >= decision["apply_at"], "ran before the delay"


@pytest.mark.extended
def test_etl_late_failure_reruns_only_failed_and_consumer_regions(e2e: Any, spark_connect: str) -> None:
    """fail_once: aggregate#0 fails -> aggregate#0 + report#0 rerun; aggregate#1..3 and every producer keep try 1
    and their manifests."""
    run_id, state = e2e.run("tpch_etl", {"fail_once": True})
    assert state == "success", e2e.explain("tpch_etl", run_id)
    decision = _the_decision(e2e, "tpch_etl", run_id)
    reasons = {r["subtasks"][0]: r["reason"] for r in decision["regions"]}
    # aggregate#1..3 are committed or still at work when aggregate#0 fails: either way available, never restarted
    assert reasons == {"aggregate#0": "failed", "report#0": "consumer"}, reasons
    _check_tries(e2e.tries("tpch_etl", run_id), {"aggregate.0"}, {"report.0"})
    produced = ["join->aggregate#0", "join->aggregate#3", "gen_customer->join#0", "clean_orders->join#1"]
    assert set(_attempts(e2e, "tpch_etl", run_id, produced).values()) == {1}, "producers not recomputed"
    assert decision["reused"], "the rerun reads committed join partitions"
    _check_report(e2e, run_id, spark_connect)


@pytest.mark.extended
@pytest.mark.prefetch("retries")
def test_airflow_retries_of_a_step_are_not_failover_restarts(e2e: Any) -> None:
    """``c`` has ``retries=1``: c#0's first try fails and Airflow retries it (try 2 succeeds). The failover loop
    records nothing, spends no restart budget and clears nothing."""
    dag_id, run_id, state = e2e.finished("retries")
    assert state == "success", e2e.explain(dag_id, run_id)
    assert e2e.history(dag_id, run_id)["decisions"] == [], e2e.explain(dag_id, run_id)
    tries = e2e.tries(dag_id, run_id)
    assert tries["c.0"] == 2 and tries["d.0"] == 1, tries


@pytest.mark.extended
def test_data_objects_deleted_behind_a_committed_manifest_restart_their_producer(e2e: Any, tmp_path: Path) -> None:
    """b->c#1's manifest stays but its data objects are deleted; c#0 then fails reading them. Its producer region
    {a#1, b#1} must rerun (else c#0 fails again and again until the budget runs out)."""
    dag_id, gate = "rf_e2e_region", tmp_path / "gate"
    run_id = e2e.api.trigger(dag_id, {"hold": ["c#0"], "gate": str(gate)})
    e2e.wait_until(lambda: (gate / "c#0.started").exists(), 900, "c#0 at the gate")
    e2e.wait_until(lambda: e2e.states(dag_id, run_id).get("c.1") == "success", 900, "c#1 done")
    manifest = e2e.store.manifest(dag_id, run_id, PartitionId("b->c", 1))
    prefix = e2e.store.run_keys(dag_id, run_id).run_prefix
    e2e.store.objects.delete([prefix + o.key for o in manifest.objects])
    (gate / "go").touch()
    assert e2e.final_state(dag_id, run_id) == "success", e2e.explain(dag_id, run_id)
    decision = _the_decision(e2e, dag_id, run_id)
    assert _reasons(decision)["a#1+b#1"] == "producer-unavailable", e2e.explain(dag_id, run_id)
    assert _d_output(e2e, dag_id, run_id) == E2E_DAG["expected_d"]()


@pytest.mark.prefetch("marked")
def test_a_run_marked_failed_by_a_user_is_not_restarted(e2e: Any) -> None:
    """A person marks a running run failed (it hangs, say): Airflow fails its running tasks. That is the user's
    decision, not a task failure: nothing is restarted and the run stays failed. (a#0 is held at its gate.)"""
    dag_id, run_id = e2e.started("marked")
    e2e.wait_until(lambda: (e2e.gate("marked") / "a#0.started").exists(), 900, "a#0 at the gate")
    assert e2e.states(dag_id, run_id)["a.b.0"] == "running", e2e.explain(dag_id, run_id)
    _patch(e2e, f"/dags/{dag_id}/dagRuns/{run_id}", {"state": "failed"})
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        assert e2e.api.dag_run(dag_id, run_id)["state"] == "failed", e2e.explain(dag_id, run_id)
        time.sleep(1)
    applied = [d for d in e2e.history(dag_id, run_id)["decisions"] if d["status"] == "applied"]
    assert applied == [], e2e.explain(dag_id, run_id)
    assert e2e.tries(dag_id, run_id)["a.b.0"] == 1


@pytest.mark.extended
def test_a_manual_clear_after_a_code_change_recomputes(e2e: Any) -> None:
    """A user fixes ``scale``'s code and clears it: the cleared tries must run the new code, never keep the result
    the old code committed (its inputs did not change, but what it computes did)."""
    dag_id = "rf_e2e_code"
    run_id, state = e2e.run(dag_id)
    assert state == "success", e2e.explain(dag_id, run_id)
    assert _values(e2e, dag_id, run_id) == [2 * i for i in range(20)]
    source = e2e.dags / "rf_e2e_code.py"
    source.write_text(source.read_text().replace("FACTOR = 2", "FACTOR = 3"))
    _reparse(e2e, dag_id)
    _post(e2e, f"/dags/{dag_id}/clearTaskInstances", {
        "dag_run_id": run_id, "task_ids": ["scale.0", "scale.1"], "dry_run": False, "only_failed": False,
        "reset_dag_runs": True, "include_upstream": False, "include_downstream": True})
    assert e2e.final_state(dag_id, run_id) == "success", e2e.explain(dag_id, run_id)
    assert _values(e2e, dag_id, run_id) == [3 * i for i in range(20)], "the cleared task kept the old result"
    assert e2e.store.manifest(dag_id, run_id, PartitionId("scale", 0)).attempt == 2


@pytest.mark.extended
def test_clearing_a_whole_run_starts_a_fresh_restart_budget(e2e: Any) -> None:
    """fixed-delay attempts=1: c#0 fails twice, the budget is exhausted and the run fails. A user clears the whole
    run to re-run it: that is a new execution (Flink: a resubmitted job), with a fresh budget — c#0's third
    failure is restarted and its fourth try succeeds."""
    dag_id = "rf_e2e_budget"
    run_id, state = e2e.run(dag_id, {"fail": {"c#0": 3}})
    assert state == "failed", e2e.explain(dag_id, run_id)
    _post(e2e, f"/dags/{dag_id}/dagRuns/{run_id}/clear", {"dry_run": False, "only_failed": False})
    assert e2e.final_state(dag_id, run_id) == "success", e2e.explain(dag_id, run_id)
    assert e2e.tries(dag_id, run_id)["c.0"] == 4


@pytest.mark.extended
@pytest.mark.prefetch("region", "full", "delayed")
def test_every_decision_is_cleared_exactly_once_with_two_watchers(e2e: Any) -> None:
    """The scheduler's watcher and a second one (HA) see every failure of the session's runs: each applied
    decision is one clear in the API's audit log, by the failover loop's own API user."""
    for name in ("region", "full", "delayed"):
        dag_id, run_id, _state = e2e.finished(name)
        applied = [d for d in e2e.history(dag_id, run_id)["decisions"] if d["status"] == "applied"]
        clears = e2e.api.get("/eventLogs", dag_id=dag_id, run_id=run_id, event="post_clear_task_instances",
                             owner=e2e.stack.api_user)["event_logs"]
        assert len(clears) == len(applied) == 1, (name, clears, e2e.explain(dag_id, run_id))


@pytest.mark.prefetch("s3down")
def test_plugin_routes_require_a_user_with_access_to_the_dag(e2e: Any) -> None:
    """Anonymous callers get 401/403, a signed-in user who may not see the DAG 403, one who may 200 (a run of
    ``rf_e2e_region``, the DAG ``outsider`` may not see: the one the S3 outage test later ends)."""
    dag_id, run_id = e2e.started("s3down")
    routes = [f"/region-failover/history/{dag_id}/{run_id}", f"/region-failover/api/history/{dag_id}/{run_id}",
              f"/region-failover/run/{dag_id}/{run_id}", f"/region-failover/api/run/{dag_id}/{run_id}",
              f"/region-failover/plan/{dag_id}", f"/region-failover/api/plan/{dag_id}?failed=c%230"]
    url = e2e.stack.url
    with httpx.Client(base_url=url, timeout=30) as anonymous:
        assert [anonymous.get(r).status_code for r in routes] in ([401] * len(routes), [403] * len(routes))
    for user, expected in (("outsider", 403), ("viewer", 200)):
        from airflow_region_failover.plugins.rest import AirflowRestClient

        token = AirflowRestClient(e2e.stack.credentials(user)).token()
        with httpx.Client(base_url=url, timeout=30, headers={"Authorization": f"Bearer {token}"}) as client:
            assert [client.get(r).status_code for r in routes] == [expected] * len(routes), user


@pytest.mark.prefetch("s3down")
def test_zz_a_failure_handled_while_s3_is_down_is_applied_once_s3_is_back(e2e: Any) -> None:
    """S3 is away for 20 s exactly when c#0 fails (a throttling storm, a restarting endpoint): the worker cannot
    record the failure and neither can the watchers at first. The failure must not be dropped: once S3 is back it
    is recorded and applied, and the run succeeds. (Last in the session, once no other run is active: it takes S3
    away from every run. Its run started with the stack; c#0 waits at its gate.)"""
    dag_id, run_id = e2e.started("s3down")
    gate = e2e.gate("s3down")
    e2e.wait_until(lambda: (gate / "c#0.started").exists(), 900, "c#0 at the gate")
    others = ("a.b.0", "a.b.1", "c.1", "d.1", "side.0")  # only c#0 is at work during the outage
    e2e.wait_until(lambda: all(e2e.states(dag_id, run_id).get(t) == "success" for t in others), 900, "the rest")
    _wait_idle(e2e, but=(run_id,))
    with ThreadPoolExecutor(1) as pool:
        outage = pool.submit(e2e.s3.outage, 20.0)
        time.sleep(1.0)
        (gate / "go").touch()
        outage.result()  # S3 answers again (a server that could not come back fails here, saying why)
    # The run ended failed during the outage; the restart comes once a watcher has recorded and applied the
    # failure, however long S3 takes to answer again (a dropped failure never comes: the wait times out).
    back = time.monotonic()
    try:
        e2e.wait_until(lambda: _applied(e2e.history(dag_id, run_id)), 300, "the failure recorded and applied")
    except TimeoutError as exc:
        raise AssertionError(f"{exc}\n{e2e.explain(dag_id, run_id)}") from exc
    print(f"recorded and applied {time.monotonic() - back:.1f} s after S3 answered again")
    assert e2e.final_state(dag_id, run_id) == "success", e2e.explain(dag_id, run_id)
    assert _reasons(_the_decision(e2e, dag_id, run_id)) == {"c#0": "failed", "d#0": "consumer"}

"""The ``region_failover.*`` metrics (:mod:`airflow_region_failover.observability.metrics`): what a task's ledger
sends, and that both kinds reach a real StatsD listener on loopback through Airflow's Stats — also in a process
Airflow never initialised Stats in (a scheduler's watcher thread, a stand-alone watcher)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from airflow_region_failover.failover.run_log import Decision, DecisionStatus
from airflow_region_failover.observability import metrics
from airflow_region_failover.plugins import history
from airflow_region_failover.spark.ledger import TaskLedger
from tests.support.statsd import StatsdListener

RESTARTED = {
    "restart": {"decision": 1, "strategy": "region", "reason": "consumer"},
    "inputs": {"b->c#0": {"attempt": 2, "bytes": 100, "objects": 1, "reused": False},
               "b->c#1": {"attempt": 1, "bytes": 70, "objects": 2, "reused": True}},
    "outputs": {"c->d#0": {"attempt": 1, "rows": 5, "bytes": 40, "objects": 1, "kept": True},
                "c->e#0": {"attempt": 1, "rows": 5, "bytes": 30, "objects": 1, "kept": True}},
}


def test_a_restarted_try_that_kept_its_results_reports_them_kept_and_reused() -> None:
    assert metrics.task_values(TaskLedger.from_json(RESTARTED)) == {"results_kept": 2, "recomputed_bytes": 0,
                                                                    "reused_bytes": 70 + 40 + 30}


def test_a_restarted_try_that_recomputed_reports_the_bytes_it_wrote() -> None:
    summary = {**RESTARTED, "outputs": {"c->d#0": {"attempt": 2, "rows": 5, "bytes": 44, "objects": 1,
                                                   "kept": False}}}
    assert metrics.task_values(TaskLedger.from_json(summary)) == {"results_kept": 0, "recomputed_bytes": 44,
                                                                  "reused_bytes": 70}


def test_a_try_no_clear_of_ours_started_sends_nothing() -> None:
    assert metrics.task_values(TaskLedger.from_json({k: v for k, v in RESTARTED.items() if k != "restart"})) is None
    assert metrics.emit_task("d", "c", TaskLedger.from_json({"outputs": {}})) is None


@pytest.fixture
def statsd(monkeypatch: pytest.MonkeyPatch) -> Iterator[StatsdListener]:
    """A listener, ``[metrics]`` pointing at it, and the Task SDK's Stats as a process that never initialised it
    has them (restored afterwards)."""
    from airflow.sdk._shared.observability.metrics import stats as shared

    listener = StatsdListener().start()
    for key, value in {"STATSD_ON": "True", "STATSD_HOST": "127.0.0.1", "STATSD_PORT": str(listener.port),
                       "STATSD_PREFIX": "airflow", "STATSD_INFLUXDB_ENABLED": "True"}.items():
        monkeypatch.setenv(f"AIRFLOW__METRICS__{key}", value)
    monkeypatch.setattr(shared, "_factory", None)
    monkeypatch.setattr(shared, "_backend", None)
    try:
        yield listener
    finally:
        listener.stop()


def _values(listener: StatsdListener, name: str, **tags: str) -> list[tuple[float, str]]:
    return [(s.value, s.type) for s in listener.wait_for(f"region_failover.{name}", **tags)]


def test_decision_metrics_reach_statsd_in_a_process_airflow_did_not_initialise(statsd: StatsdListener) -> None:
    decision = Decision(id=1, status=DecisionStatus.APPLIED, created=0.0, failures=(), strategy="region",
                        restart=("c.0", "d.0"), reused=("b->c#1",), restarting_time_s=1.5)
    history.emit_metrics("rf", decision)
    tags = {"dag_id": "rf", "strategy": "region"}
    assert _values(statsd, "restarts", **tags) == [(1.0, "c")]
    assert _values(statsd, "tasks_restarted", **tags) == [(2.0, "c")]
    assert _values(statsd, "results_reused", **tags) == [(1.0, "c")]
    assert _values(statsd, "restarting_time", **tags) == [(1500.0, "ms")]


def test_task_metrics_reach_statsd_with_their_tags(statsd: StatsdListener) -> None:
    assert metrics.emit_task("rf", "c", TaskLedger.from_json(RESTARTED)) == {"results_kept": 2,
                                                                             "recomputed_bytes": 0,
                                                                             "reused_bytes": 140}
    tags = {"dag_id": "rf", "strategy": "region", "step": "c", "reason": "consumer"}
    assert _values(statsd, "results_kept", **tags) == [(2.0, "c")]
    assert _values(statsd, "reused_bytes", **tags) == [(140.0, "c")]
    assert _values(statsd, "recomputed_bytes", **tags) == [(0.0, "c")], "a zero is sent too"


def test_a_broken_stats_backend_never_raises(monkeypatch: pytest.MonkeyPatch) -> None:
    def broken() -> Any:
        raise RuntimeError("no stats")

    monkeypatch.setattr(metrics, "stats", broken)
    decision = Decision(id=1, status=DecisionStatus.APPLIED, created=0.0, failures=())
    metrics.emit_decision("rf", decision)
    assert metrics.emit_task("rf", "c", TaskLedger.from_json(RESTARTED)) is None


def test_a_decision_that_ends_the_run_is_tagged_with_its_status_and_the_failures_class() -> None:
    from airflow_region_failover.failover.error_class import ErrorClass
    from airflow_region_failover.failover.run_log import FailureRecord

    known = FailureRecord("c.0", -1, 2, "'price'", "worker", 1.0, error_class=ErrorClass.of(KeyError("price")))
    unknown = FailureRecord("c.0", -1, 2, "", "scheduler", 1.0)
    ended = Decision(2, DecisionStatus.NOT_RECOVERABLE, 1.0, (known,))
    assert metrics.ended_tags("d", ended) == {"dag_id": "d", "status": "not-recoverable", "error_class": "KeyError"}
    exhausted = Decision(2, DecisionStatus.EXHAUSTED, 1.0, (unknown,))
    assert metrics.ended_tags("d", exhausted)["error_class"] == "unknown"

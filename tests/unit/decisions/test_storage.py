"""The decision logs on the store's objects layer: compare-and-swap, the pending markers and the holds (in
memory)."""

from __future__ import annotations

from dataclasses import replace

from airflow_region_failover.decisions.storage import RunLogs, hold_name
from airflow_region_failover.failover.run_log import Decision, DecisionStatus, RunLog
from airflow_region_failover.store.gc import lifecycle
from tests.support.fakes import MemoryObjects

DAG, RUN = "etl", "r1"


def add_pending(doc: RunLog) -> tuple[RunLog, None]:
    decision = Decision(len(doc.decisions) + 1, DecisionStatus.PENDING, 0.0, ())
    return doc.with_decision(decision), None


def applied(doc: RunLog) -> tuple[RunLog, None]:
    return doc.with_decision(replace(doc.decision(1), status=DecisionStatus.APPLIED)), None


def test_a_decision_recorded_while_the_previous_one_is_marked_applied_keeps_its_marker() -> None:
    """The watcher marks decision #1 applied; between its log write and its marker clean-up a worker records
    decision #2. #2 must stay findable (its marker must survive), or it is never applied."""

    class Racing(MemoryObjects):
        def __init__(self) -> None:
            super().__init__()
            self.worker: RunLogs | None = None

        def delete(self, keys: list[str]) -> int:
            if self.worker is not None and any("/_pending/" in k for k in keys):
                worker, self.worker = self.worker, None
                worker.update(DAG, RUN, add_pending)  # the worker, meanwhile
            return super().delete(keys)

    objects = Racing()
    watcher, worker = RunLogs(objects), RunLogs(objects)  # type: ignore[arg-type]
    watcher.update(DAG, RUN, add_pending)
    assert list(watcher.pending_runs()) == [(DAG, RUN)]
    objects.worker = worker
    watcher.update(DAG, RUN, applied)
    assert [d.status.value for d in watcher.read(DAG, RUN).decisions] == ["applied", "pending"]
    assert list(watcher.pending_runs()) == [(DAG, RUN)], "decision #2 lost its pending marker"


def test_an_open_decision_holds_its_runs_results_until_it_is_applied() -> None:
    """The hold is the store's (:func:`.lifecycle.hold`): retention and release skip the run while it exists."""
    objects = MemoryObjects()
    logs = RunLogs(objects)  # type: ignore[arg-type]
    keys = objects.layout.run(DAG, RUN)
    logs.update(DAG, RUN, add_pending)
    assert lifecycle.holds(objects, keys) == (hold_name(1),)  # type: ignore[arg-type]
    logs.update(DAG, RUN, applied)
    assert lifecycle.holds(objects, keys) == ()  # type: ignore[arg-type]

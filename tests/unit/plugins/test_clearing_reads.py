"""The failure handler's deep check verifies what the failed subtask read first — every object of its input
partitions, each once, in one parallel batch — before the planner asks about partitions one by one (it sent
one HEAD per object, one after the other, in the failing task or the scheduler's single watcher thread) — on a
result store on moto's in-memory S3.

    a#0 -> b#0 ==+==> c#0 ==> d#0        rf_e2e_budget: c#0 fails; it read b->c#0 and b->c#1 (three objects
    a#1 -> b#1 ==+==> c#1 ==> d#1        each, one shared by both)
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from airflow_region_failover.decisions.storage import RunLogs
from airflow_region_failover.graph.ids import PartitionId
from airflow_region_failover.plugins.clearing import handle_failure
from airflow_region_failover.store import commit as protocol
from airflow_region_failover.store.content import put_content
from airflow_region_failover.store.manifest import Manifest
from airflow_region_failover.store.result_store import ResultStore
from tests.support.fakes import DAG, RUN, FakeApi, MemoryObjects, budget_spec, failure, services
from tests.support.store import HeadCounter, moto_store


@pytest.fixture
def store() -> Iterator[ResultStore]:
    with moto_store() as on_moto:
        yield on_moto


def test_what_the_failed_subtask_read_is_verified_each_object_once_several_at_a_time(store: ResultStore) -> None:
    common = put_content(store.objects, store.layout, b"rows both partitions hold").entry
    for index in (0, 1):
        own = tuple(put_content(store.objects, store.layout, f"b{index} part {k}".encode()).entry for k in range(2))
        manifest = Manifest(DAG, RUN, PartitionId("b->c", index), 1, "0123456789abcdef", "{}", 0, (common, *own),
                            protocol.now_iso())
        protocol.commit(store.objects, store.run_keys(DAG, RUN), manifest)
    counter = HeadCounter(store.objects.client)
    logs = RunLogs(MemoryObjects())  # type: ignore[arg-type]
    handle_failure(DAG, RUN, failure("c.0"), budget_spec(), services(logs, FakeApi(), store), now=lambda: 100.0)
    [decision] = logs.read(DAG, RUN).decisions
    assert "a.b.0" not in decision.restart and "a.b.1" not in decision.restart, decision.restart
    assert (counter.sent, counter.most > 1) == (5, True), \
        f"{counter.sent} HEADs for 5 distinct objects, at most {counter.most} at a time"


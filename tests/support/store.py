"""Test helpers on the result store for what the product does only inside a larger step: read the retirement
markers an attempt's *begin* wrote, and release one run (what retention does to the runs it no longer keeps)."""

from __future__ import annotations

from typing import Any

from airflow_region_failover.graph.ids import PartitionId
from airflow_region_failover.store import ResultStore, Retirement, lifecycle
from airflow_region_failover.store import commit as protocol


def retirements(store: ResultStore, dag_id: str, run_id: str, partition: PartitionId) -> tuple[Retirement, ...]:
    """Every retirement marker of ``partition`` in the run, oldest attempt first."""
    keys = store.run_keys(dag_id, run_id)
    markers = []
    for attempt in sorted(protocol.state_of(store.objects, keys, partition).retired):
        key = keys.retired(partition, attempt)
        data = store.objects.get(key)
        if data is not None:
            markers.append(Retirement.from_json(data, where=key))
    return tuple(markers)


def release(store: ResultStore, dag_id: str, run_id: str, **conditions: Any) -> int:
    """Release one run as retention does (:func:`.lifecycle.release_run`; both conditions default to met);
    returns the number of keys deleted, :class:`ReleaseRefused` naming why it may still be needed."""
    conditions = {"run_finished": True, "consumers_done": True, **conditions}
    return lifecycle.release_run(store.objects, store.run_keys(dag_id, run_id), **conditions)

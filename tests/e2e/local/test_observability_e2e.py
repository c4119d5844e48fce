"""What a metrics collector and a lineage backend see of a run with one failure, on the embedded stack
(``[metrics]`` StatsD to the test's UDP listener, the openlineage provider's file transport; see conftest.py).
It asserts on the keyed scenario the suite already runs (``tests/e2e/dags/rf_keyed.py``)::

    gen#0 ==+==> agg#0        agg#1 fails on its first try -> the decision restarts {agg#1} only, reusing the
    gen#1 ==+==> agg#1  X     committed gen->agg#0 and gen->agg#1 (agg#1 reads subpartition 1 of each)
             ==> agg#2
             ==> agg#3
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from airflow_region_failover.graph.ids import PartitionId
from airflow_region_failover.observability.lineage import RUN_FACET, dataset_name
from tests.e2e.scenarios import _the_decision
from tests.support.statsd import StatsdListener

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(1500)]
DAG_ID = "rf_e2e_keyed"


def _sum(statsd: StatsdListener, name: str, **tags: str) -> tuple[int, float]:
    """(samples, sum of values) of ``region_failover.<name>`` with ``tags``, waiting a little for the first."""
    samples = statsd.wait_for(f"region_failover.{name}", timeout=30, dag_id=DAG_ID, **tags)
    return len(samples), sum(s.value for s in samples)


@pytest.mark.prefetch("keyed")
def test_statsd_receives_every_documented_metric_with_the_values_of_the_failure(
        e2e: Any, statsd: StatsdListener) -> None:
    _, run_id, state = e2e.finished("keyed")
    assert state == "success", e2e.explain(DAG_ID, run_id)
    decision = _the_decision(e2e, DAG_ID, run_id)
    assert decision["restart"] == ["agg.1"] and sorted(decision["reused"]) == ["gen->agg#0", "gen->agg#1"]
    region = {"strategy": "region"}
    assert _sum(statsd, "restarts", **region) == (1, 1)
    assert _sum(statsd, "tasks_restarted", **region) == (1, len(decision["restart"]))
    assert _sum(statsd, "results_reused", **region) == (1, len(decision["reused"]))
    timings = statsd.samples("region_failover.restarting_time", dag_id=DAG_ID)
    assert [s.type for s in timings] == ["ms"]
    assert timings[0].value == pytest.approx(1000 * decision["restarting_time_s"], abs=1)
    # the restarted agg#1 (try 2, its region failed) recomputed its sink partition from subpartition 1 of both
    # reused gen partitions, and kept nothing
    task = {"strategy": "region", "step": "agg", "reason": "failed"}
    produced = [e2e.store.manifest(DAG_ID, run_id, PartitionId("gen->agg", i)) for i in (0, 1)]
    read = sum(m.partitioning.subpartitions[1].bytes for m in produced)
    written = e2e.store.manifest(DAG_ID, run_id, PartitionId("agg", 1))
    assert written.attempt == 2
    assert _sum(statsd, "results_kept", **task) == (1, 0)
    assert _sum(statsd, "recomputed_bytes", **task) == (1, written.total_bytes)
    assert _sum(statsd, "reused_bytes", **task) == (1, read)


def _events(folder: Path) -> list[dict[str, Any]]:
    return [json.loads(path.read_text()) for path in sorted(folder.glob("events-*.json"))]


@pytest.mark.prefetch("keyed")
def test_openlineage_events_list_every_blocking_result_written_and_read(e2e: Any, lineage_events: Path) -> None:
    _, run_id, state = e2e.finished("keyed")
    assert state == "success", e2e.explain(DAG_ID, run_id)
    layout, run_prefix = e2e.store.layout, e2e.store.run_keys(DAG_ID, run_id).run_prefix
    committed = {p for result in ("gen->agg", "agg") for p in e2e.store.partitions(DAG_ID, run_id, result)}
    assert len(committed) == 2 + 4
    names = {dataset_name(layout, DAG_ID, run_id, p): p for p in committed}
    complete: dict[tuple[str, int], dict[str, Any]] = {}
    e2e.wait_until(lambda: len(_completed(lineage_events, run_prefix)) >= 6, 60, "every step task's COMPLETE")
    for event in _completed(lineage_events, run_prefix):
        facet = event["run"]["facets"][RUN_FACET]
        complete[(event["job"]["name"].removeprefix(f"{DAG_ID}."), facet["attempt"])] = event
    written = {d["name"] for e in complete.values() for d in e["outputs"]}
    read = {d["name"] for e in complete.values() for d in e["inputs"]}
    assert {d["namespace"] for e in complete.values() for d in e["outputs"] + e["inputs"]} == {f"s3://{layout.bucket}"}
    assert written == set(names), "every committed BLOCKING partition (sinks included) is an output"
    gen = {n for n, p in names.items() if p.result == "gen->agg"}
    assert read == gen, "every partition read is an input"
    for j in range(4):
        tries = e2e.tries(DAG_ID, run_id)[f"agg.{j}"]
        event = complete[(f"agg.{j}", tries)]
        assert {d["name"] for d in event["inputs"]} == gen
        assert [names[d["name"]] for d in event["outputs"]] == [PartitionId("agg", j)]
    rerun = complete[("agg.1", 2)]["run"]["facets"][RUN_FACET]
    regions = {r["subtasks"][0]: r["region"] for r in _the_decision(e2e, DAG_ID, run_id)["regions"]}
    assert (rerun["region"], rerun["restartReason"], rerun["kept"]) == (regions["agg#1"], "failed", False)
    stats = complete[("agg.1", 2)]["outputs"][0]["outputFacets"]["outputStatistics"]
    assert stats["size"] == e2e.store.manifest(DAG_ID, run_id, PartitionId("agg", 1)).total_bytes


def _completed(folder: Path, run_prefix: str) -> list[dict[str, Any]]:
    """The COMPLETE events of step tasks whose datasets lie in the run (``run_prefix``)."""
    return [e for e in _events(folder) if e.get("eventType") == "COMPLETE" and RUN_FACET in e["run"]["facets"]
            and any(d["name"].startswith(run_prefix) for d in e.get("outputs", []))]

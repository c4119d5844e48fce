"""A keyed exchange end to end on the embedded stack (``tests/e2e/dags/rf_keyed.py``)::

    gen#0 ==+==> agg#0        gen (2) =BLOCKING ALL_TO_ALL keyed by k=> agg (4); agg#1 fails on its first try
    gen#1 ==+==> agg#1  X
             ==> agg#2
             ==> agg#3
"""

from __future__ import annotations

from typing import Any

import pytest

from airflow_region_failover.graph.ids import PartitionId
from tests.e2e.scenarios import _reasons, _the_decision, expected_rows

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(1500)]
DAG_ID = "rf_e2e_keyed"


@pytest.mark.prefetch("keyed")
def test_keyed_consumer_failure_reruns_its_region_only_and_each_consumer_reads_only_its_subpartitions(
        e2e: Any, spark_connect: str) -> None:
    """agg#1 fails -> only {agg#1} reruns (its producers' results are committed, it has no consumers); every
    agg subtask, the rerun included, read exactly subpartition j of both gen partitions (the store's read
    counters in its log), so the four together read each byte once; the output equals one Spark job's."""
    _, run_id, state = e2e.finished("keyed")
    assert state == "success", e2e.explain(DAG_ID, run_id)
    tries = e2e.tries(DAG_ID, run_id)
    assert tries == {"gen.0": 1, "gen.1": 1, "agg.0": 1, "agg.1": 2, "agg.2": 1, "agg.3": 1}, tries
    assert _reasons(_the_decision(e2e, DAG_ID, run_id)) == {"agg#1": "failed"}
    produced = [e2e.store.manifest(DAG_ID, run_id, PartitionId("gen->agg", i)) for i in (0, 1)]
    assert all(m.partitioning is not None and len(m.partitioning.subpartitions) == 4 for m in produced)
    total = sum(m.total_bytes for m in produced)
    read = 0
    for j in range(4):
        mine = sum(m.partitioning.subpartitions[j].bytes for m in produced)  # type: ignore[union-attr]
        log = e2e.stack.task_log(DAG_ID, run_id, f"agg.{j}", tries[f"agg.{j}"])
        assert f"read {mine} of the {total} bytes of its input partitions" in log, log[-3000:]
        read += mine
    assert read == total, "read amplification 1.0"
    got = sorted(tuple(r.values()) for j in range(4)
                 for r in e2e.store.read_arrow(e2e.store.manifest(DAG_ID, run_id, PartitionId("agg", j))).to_pylist())
    assert got == expected_rows("rf_keyed.py", spark_connect)


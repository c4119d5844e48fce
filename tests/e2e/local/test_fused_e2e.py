"""A fused region end to end on the embedded stack (``tests/e2e/dags/rf_fused.py``): the same AUTO job under
the plan that fuses its keyed exchange and under the one that commits it; agg#1 fails on its first try in both::

    gen#0,1 --AUTO keyed by k--> agg#0..3 ==BLOCKING==> report#0
    fused:    [gen#0,1 + agg#0..3] one task gen.agg.0      blocking: gen.0 gen.1 agg.0 .. agg.3
"""

from __future__ import annotations

from typing import Any

import pytest

from airflow_region_failover.graph.ids import PartitionId
from tests.e2e.scenarios import _the_decision, expected_rows

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(1500)]


def _report(e2e: Any, dag_id: str, run_id: str) -> list[tuple[Any, ...]]:
    manifest = e2e.store.manifest(dag_id, run_id, PartitionId("report", 0))
    return sorted(tuple(r.values()) for r in e2e.store.read_arrow(manifest).to_pylist())


@pytest.mark.prefetch("fused", "fused_blocking")
def test_each_plan_restarts_exactly_its_own_regions_and_both_equal_one_spark_job(
        e2e: Any, spark_connect: str) -> None:
    """Fused: the failure restarts the one region task (its six subtasks) and the report; nothing of gen->agg is
    committed. Blocking: only agg#1 and the report rerun, gen's committed partitions are read again. Both
    reports equal one Spark job's answer."""
    _, fused_run, state = e2e.finished("fused")
    assert state == "success", e2e.explain("rf_e2e_fused", fused_run)
    assert e2e.tries("rf_e2e_fused", fused_run) == {"gen.agg.0": 2, "report.0": 1}
    decision = _the_decision(e2e, "rf_e2e_fused", fused_run)
    assert decision["restart"] == ["gen.agg.0", "report.0"]
    first = decision["regions"][0]
    assert (first["reason"], first["cause"]) == ("failed", "agg#1 failed")  # the member that raised, not gen#0
    assert e2e.store.partitions("rf_e2e_fused", fused_run, "gen->agg") == ()
    assert sorted(p.index for p in e2e.store.partitions("rf_e2e_fused", fused_run, "agg->report")) == [0, 1, 2, 3]

    _, blocking_run, state = e2e.finished("fused_blocking")
    assert state == "success", e2e.explain("rf_e2e_fused_blocking", blocking_run)
    assert e2e.tries("rf_e2e_fused_blocking", blocking_run) == {
        "gen.0": 1, "gen.1": 1, "agg.0": 1, "agg.1": 2, "agg.2": 1, "agg.3": 1, "report.0": 1}

    expected = expected_rows("rf_fused.py", spark_connect)
    assert _report(e2e, "rf_e2e_fused", fused_run) == expected
    assert _report(e2e, "rf_e2e_fused_blocking", blocking_run) == expected


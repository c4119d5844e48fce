"""Fault test on the real stack (Airflow, Spark Connect, SeaweedFS): the last epoch's output object of a
checkpointed producer is corrupted after it committed (one byte flipped behind the store's back); its consumer
fails reading it, naming the partition, and moves it aside; region failover restarts the producer, whose next try
finds the checkpoints listing that object incomplete, resumes the one before them, recomputes the last epoch only
(writing the object again) — one decision, and the consumer's output is correct.

    make#0 ==> count#0 ==> sums#0     rf_heal_checkpointed (tests/e2e/dags/rf_heal_checkpointed.py)
               (3 epochs, every checkpoint retained; sums#0 held at a gate)
"""

from __future__ import annotations

import runpy
from pathlib import Path
from typing import Any

import pytest

from airflow_region_failover.graph.ids import PartitionId
from tests.e2e.conftest import E2E_DAGS
from tests.e2e.local.test_heal_e2e import flip_one_byte
from tests.e2e.scenarios import _the_decision

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(1500)]

DAG = runpy.run_path(str(E2E_DAGS / "rf_heal_checkpointed.py"))
DAG_ID = DAG["DAG_ID"]
OUTPUT = PartitionId("count->sums", 0)


def sums_output(e2e: Any, run_id: str) -> dict[int, tuple[int, int]]:
    rows = e2e.store.read_arrow(e2e.store.manifest(DAG_ID, run_id, PartitionId("sums", 0))).to_pylist()
    return {int(r["k"]): (int(r["n"]), int(r["epochs"])) for r in rows}


def test_a_corrupted_output_of_a_checkpointed_producer_heals_in_one_decision(e2e: Any, tmp_path: Path) -> None:
    gate = tmp_path / "gate"
    run_id = e2e.api.trigger(DAG_ID, {"gate": str(gate)})
    e2e.wait_until(lambda: (gate / "sums#0.started").exists(), 900, "sums#0 at its gate")
    committed = e2e.store.manifest(DAG_ID, run_id, OUTPUT)
    assert len(committed.objects) == DAG["EPOCHS"], committed.objects  # one object per epoch
    last = committed.objects[-1]  # the last epoch's: listed by checkpoint 3 only
    flip_one_byte(e2e, e2e.store.layout.cas_object(last.sha256))
    (gate / "go").touch()

    assert e2e.final_state(DAG_ID, run_id) == "success", e2e.explain(DAG_ID, run_id)
    decision = _the_decision(e2e, DAG_ID, run_id)
    assert sorted(decision["restart"]) == ["count.0", "sums.0"], e2e.explain(DAG_ID, run_id)
    assert [f["cause"] for f in decision["failures"]] == [str(OUTPUT)], decision["failures"]
    assert e2e.tries(DAG_ID, run_id) == {"make.0": 1, "count.0": 2, "sums.0": 2}, e2e.explain(DAG_ID, run_id)
    assert sums_output(e2e, run_id) == DAG["expected"](), e2e.explain(DAG_ID, run_id)

    failed = e2e.stack.task_log(DAG_ID, run_id, "sums.0", 1)
    assert f"input partition {OUTPUT} is unavailable" in failed, failed[-3000:]
    second = e2e.stack.task_log(DAG_ID, run_id, "count.0", 2)
    assert "checkpoint 3 of count#0 is not complete" in second and last.sha256 in second, second[-3000:]
    assert "count#0: resumed from checkpoint 2 (after epoch 1 of 3, taken by try 1)" in second, second[-3000:]
    healed = e2e.store.manifest(DAG_ID, run_id, OUTPUT)
    assert healed.attempt == 2 and healed.objects == committed.objects, "the same bytes, written again"
    assert e2e.store.checker(DAG_ID, run_id, "deep", verify_checksums=True).is_available(OUTPUT)

"""Fault test on the real stack (Airflow, Spark Connect, SeaweedFS): one shared object of a committed partition
that two runs list is corrupted (one byte flipped behind the store's back); both runs' consumers fail reading it
— in Spark's Python workers, the failure naming the partition — region failover restarts the producer in each
run (backtracking), the producer writes the object again, both runs' outputs are correct, and the next run
produces the same bytes (uploading nothing) without failing.

    make#0 ==> sums#0        rf_heal (tests/e2e/dags/rf_heal.py); runs r1, r2 (consumers held at gates), then r3
"""

from __future__ import annotations

import re
import runpy
from pathlib import Path
from typing import Any

import pytest

from airflow_region_failover.graph.ids import PartitionId
from tests.e2e.conftest import E2E_DAGS
from tests.e2e.scenarios import _the_decision

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(1500)]

DAG_ID = "rf_heal"
SHARED = PartitionId("make->sums", 0)
HEAL = runpy.run_path(str(E2E_DAGS / "rf_heal.py"))


def sums_output(e2e: Any, run_id: str) -> dict[int, tuple[int, int]]:
    rows = e2e.store.read_arrow(e2e.store.manifest(DAG_ID, run_id, PartitionId("sums", 0))).to_pylist()
    return {int(r["k"]): (int(r["total"]), int(r["n"])) for r in rows}


def flip_one_byte(e2e: Any, key: str) -> None:
    """What a disk, a person or a buggy tool may do to a stored object (a plain PUT of other bytes)."""
    body = bytearray(e2e.store.objects.get(key) or b"")
    body[len(body) // 2] ^= 0x01
    e2e.store.objects.client.put_object(Bucket=e2e.store.layout.bucket, Key=key, Body=bytes(body))


def test_a_corrupted_shared_object_two_runs_list_heals_by_restarting_its_producer(e2e: Any, tmp_path: Path) -> None:
    gates = {name: tmp_path / name for name in ("r1", "r2")}
    runs = {name: e2e.api.trigger(DAG_ID, {"gate": str(gate)}) for name, gate in gates.items()}
    for name, gate in gates.items():
        e2e.wait_until(lambda g=gate: (g / "sums#0.started").exists(), 900, f"{name}'s sums#0 at its gate")
    manifests = {name: e2e.store.manifest(DAG_ID, run_id, SHARED) for name, run_id in runs.items()}
    (entry,) = manifests["r1"].objects
    assert manifests["r2"].objects == (entry,), "both runs list the same shared object"
    flip_one_byte(e2e, e2e.store.layout.cas_object(entry.sha256))
    for gate in gates.values():
        (gate / "go").touch()

    expected = HEAL["expected"]()
    for name, run_id in runs.items():
        assert e2e.final_state(DAG_ID, run_id) == "success", e2e.explain(DAG_ID, run_id)
        decision = _the_decision(e2e, DAG_ID, run_id)
        assert sorted(decision["restart"]) == ["make.0", "sums.0"], e2e.explain(DAG_ID, run_id)
        assert [f["cause"] for f in decision["failures"]] == [str(SHARED)], decision["failures"]
        assert e2e.tries(DAG_ID, run_id) == {"make.0": 2, "sums.0": 2}
        assert sums_output(e2e, run_id) == expected, name
        assert e2e.store.checker(DAG_ID, run_id, "deep", verify_checksums=True).is_available(SHARED), name
    failed = e2e.stack.task_log(DAG_ID, runs["r1"], "sums.0", 1)
    assert f"input partition {SHARED} is unavailable" in failed, failed[-3000:]
    quarantined = [i.key for i in e2e.store.objects.listing(e2e.store.layout.quarantine_root + "/")]
    assert any(entry.sha256 in key for key in quarantined), quarantined

    later, state = e2e.run(DAG_ID, {})
    assert state == "success", e2e.explain(DAG_ID, later)
    assert e2e.history(DAG_ID, later).get("decisions", []) == [], e2e.explain(DAG_ID, later)
    assert e2e.store.manifest(DAG_ID, later, SHARED).objects == (entry,), "the same bytes again"
    assert sums_output(e2e, later) == expected
    log = e2e.stack.task_log(DAG_ID, later, "make.0", 1)
    found = re.search(r"committed make->sums#0 .*uploaded (\d+) of (\d+) bytes", log)
    assert found and found.group(1) == "0" and int(found.group(2)) == entry.size, log[-3000:]

"""Failure injection at the S3 boundary on the real stack (Airflow, Spark Connect, SeaweedFS behind the test's
fault proxy): for each fault — a lost object, a truncated one, a same-size corruption (all three behind the store's
back, once the producer committed), every GET of the object answered 5xx until it is written again, its PUT
answered 5xx (every attempt of one upload), its PUT held 20 s while a sweeper runs, the producer's first commit
PUT held past the gc grace while a sweeper runs at that grace — on an ordinary producer and a checkpointed one, the
run ends ``success`` with the rows of an undisturbed run (and of Python), and no decision of the run is
``exhausted``. All 16 runs (8 faults, "none" the undisturbed one, × 2 producers) overlap; the stack's grace floor
is :data:`~tests.e2e.faults.conftest.FLOOR_S` (``store_min_grace_seconds``), every sweep's grace.

Past the grace ("pastgrace"): the held PUT is the producer's first manifest — make's result manifest, count's
first checkpoint — because then every object it announced has landed and no visible manifest lists it yet: a
sweep at the grace, run once the hold has lasted longer than the grace, finds those objects older than the grace
and referenced only by the writer's announcements, which only its heartbeat keeps (a writer whose heartbeat
stopped loses them, and its late-landing check withdraws the commit: a restart). Holding an object's own PUT
instead (the "slow" cell) puts nothing at risk on make, whose one object is not there until the PUT lands.

    make#0 ==> sums#0                    rf_faults               (the fault hits make->sums#0's object)
    make#0 ==> count#0 ==> sums#0        rf_faults_checkpointed  (count checkpointed, 3 epochs: the fault hits
                                                                   count->sums#0's last object)
"""

from __future__ import annotations

import random
import runpy
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from airflow_region_failover.graph.ids import PartitionId
from airflow_region_failover.store.checkpoint_manifest import CheckpointManifest
from tests.e2e.conftest import E2E_DAGS
from tests.e2e.faults.conftest import FLOOR_S
from tests.support.s3_faults import Fault, FaultProxy

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(2700)]

DAGS = runpy.run_path(str(E2E_DAGS / "rf_faults.py"))
OUTPUT = {"rf_faults": PartitionId("make->sums", 0), "rf_faults_checkpointed": PartitionId("count->sums", 0)}
BEHIND_THE_BACK = ("lost", "truncated", "corrupt")
GATED = (*BEHIND_THE_BACK, "get5xx")
HELD = ("slow", "pastgrace")
FAULTS = ("none", *GATED, "put5xx", *HELD)
SLOW_S = 20.0  # under the clients' 60-s read timeout
PAST_S = 40.0  # longer than the grace (FLOOR_S), under the clients' 60-s read timeout
SWEEP_AFTER_S = FLOOR_S + 6.0  # how long the commit has been held when the sweeper runs
FIRST_COMMIT = {"rf_faults": "result manifest", "rf_faults_checkpointed": "checkpoint 1"}


@dataclass
class Cell:
    """One run of the matrix: its DAG, fault, run id and gate; what the test did to it."""

    dag_id: str
    fault: str
    run_id: str
    gate: Path | None
    armed: Fault | None = None
    done: list[str] = field(default_factory=list)
    held_since: float | None = None
    swept_held_s: float | None = None


class Announced:
    """Keys of the shared objects a run's producer announced under ``prefix`` (``uses-<h>.ref``), watched as the
    PUTs pass the proxy: a PUT of ``cas/v1/<h[:2]>/<h>.parquet`` for an announced ``h`` is the producer's upload."""

    def __init__(self, prefix: str, cas_root: str) -> None:
        self.prefix, self.cas_root, self.digests = prefix, cas_root, set[str]()

    def __call__(self, key: str) -> bool:
        if key.startswith(self.prefix) and key.rsplit("/", 1)[-1].startswith("uses-"):
            self.digests.add(key.rsplit("/", 1)[-1].removeprefix("uses-").removesuffix(".ref"))
            return False
        return key.startswith(self.cas_root + "/") and key.rsplit("/", 1)[-1].removesuffix(".parquet") in self.digests


def cas_key(e2e: Any, cell: Cell) -> str:
    """The shared object of the cell's producer output the fault hits (the last: count's last epoch)."""
    entry = e2e.store.manifest(cell.dag_id, cell.run_id, OUTPUT[cell.dag_id]).objects[-1]
    return str(e2e.store.layout.cas_object(entry.sha256))


def break_object(e2e: Any, proxy: FaultProxy, cell: Cell) -> None:
    """What the cell's gated fault does once the producer committed and the consumer waits at its gate."""
    key = cas_key(e2e, cell)
    client, bucket = e2e.store.objects.client, e2e.store.layout.bucket
    if cell.fault == "get5xx":
        cell.armed = proxy.add(Fault("GET", key.__eq__, status=503, until_put=True))
    elif cell.fault == "lost":
        client.delete_object(Bucket=bucket, Key=key)
    else:
        body = bytearray(e2e.store.objects.get(key) or b"")
        assert body, f"{key}: nothing to break"
        if cell.fault == "truncated":
            body = body[: len(body) // 2]
        else:
            body[len(body) // 2] ^= 0x01
        client.put_object(Bucket=bucket, Key=key, Body=bytes(body))
    cell.done.append(key)


def first_commit(e2e: Any, cell: Cell) -> str:
    """The key of the producer's first manifest: make's result manifest (attempt 1), count's checkpoint 1."""
    keys = e2e.store.layout.run(cell.dag_id, cell.run_id)
    if cell.dag_id == "rf_faults":
        return str(keys.manifest(OUTPUT[cell.dag_id], 1))
    return str(keys.checkpoint(PartitionId("count", 0), 1))


def arm_upload(e2e: Any, proxy: FaultProxy, cell: Cell) -> None:
    """A PUT fault on the producer's upload of its output's shared objects, or of its first manifest (armed before
    the run starts)."""
    if cell.fault == "pastgrace":
        cell.armed = proxy.add(Fault("PUT", first_commit(e2e, cell).__eq__, delay=PAST_S, times=1))
        return
    keys = Announced(e2e.store.layout.run(cell.dag_id, cell.run_id).data_prefix(OUTPUT[cell.dag_id].result),
                     e2e.store.layout.cas_root)
    retries = e2e.store.config.access.max_attempts + 1  # every attempt of one upload call (botocore's retries)
    cell.armed = proxy.add(Fault("PUT", keys, status=503, times=retries) if cell.fault == "put5xx"
                           else Fault("PUT", keys, delay=SLOW_S, times=1))


def held_for(cell: Cell, seconds: float) -> bool:
    """Whether the cell's held PUT has been held for ``seconds`` (noting when the proxy took it)."""
    if cell.held_since is None and cell.armed is not None and cell.armed.taken:
        cell.held_since = time.monotonic()
    return cell.held_since is not None and time.monotonic() - cell.held_since >= seconds


def drive(e2e: Any, proxy: FaultProxy, cells: list[Cell], timeout: float = 1800.0) -> None:
    """Break each gated cell's object when its consumer waits, then open its gate; run a sweeper at the grace
    writers rely on (the stack's floor) while a held cell's PUT is held: at once for the slow upload, once the
    commit held past the grace has been held longer than the grace."""
    todo: dict[str, Callable[[Cell], bool]] = {}
    for cell in cells:
        if cell.gate is not None:
            todo[cell.run_id] = lambda c: c.gate is not None and (c.gate / "sums#0.started").exists()
        elif cell.fault == "slow":
            todo[cell.run_id] = lambda c: held_for(c, 0.0)
        elif cell.fault == "pastgrace":
            todo[cell.run_id] = lambda c: held_for(c, SWEEP_AFTER_S)
    deadline = time.monotonic() + timeout
    while todo and time.monotonic() < deadline:
        for cell in cells:
            if cell.run_id in todo and todo[cell.run_id](cell):
                del todo[cell.run_id]
                if cell.gate is not None:
                    break_object(e2e, proxy, cell)
                    (cell.gate / "go").touch()
                else:
                    held = time.monotonic() - (cell.held_since or 0.0)
                    report = e2e.store.sweep(FLOOR_S, min_grace_seconds=FLOOR_S)
                    cell.swept_held_s = held
                    cell.done.append(f"swept while held ({held:.0f} s of {FLOOR_S:g} s grace): {report}")
        time.sleep(0.5)


@pytest.fixture(scope="module")
def matrix(e2e: Any, proxy: FaultProxy, tmp_path_factory: pytest.TempPathFactory) -> dict[tuple[str, str], Cell]:
    """Every cell triggered at once (their waits overlap), the faults applied as their runs reach them."""
    gates = tmp_path_factory.mktemp("gates")
    base = random.randrange(1, 10**6) * 100
    cells: dict[tuple[str, str], Cell] = {}
    for n, (dag_id, fault) in enumerate((d, f) for d in DAGS["DAG_IDS"] for f in FAULTS):
        run_id = f"faults__{fault}__{dag_id}__{base}"
        cell = Cell(dag_id, fault, run_id, gates / f"{dag_id}-{fault}" if fault in GATED else None)
        if fault in ("put5xx", *HELD):
            arm_upload(e2e, proxy, cell)
        conf = {"salt": base + n, "gate": str(cell.gate or "")}
        e2e.api.trigger(dag_id, conf, run_id=run_id)
        cells[(dag_id, fault)] = cell
    drive(e2e, proxy, list(cells.values()))
    return cells


def sums_output(e2e: Any, dag_id: str, run_id: str) -> dict[int, tuple[int, int]]:
    rows = e2e.store.read_arrow(e2e.store.manifest(dag_id, run_id, PartitionId("sums", 0))).to_pylist()
    return {int(r["k"]): (int(r["n"]), int(r["total"])) for r in rows}


def missing(e2e: Any, cell: Cell, entries: Any) -> list[str]:
    """The keys of ``entries`` (manifest objects of the cell's run) that are not in the store."""
    keys = e2e.store.layout.run(cell.dag_id, cell.run_id)
    wanted = [str(e2e.store.layout.cas_object(e.sha256)) if e.shared else keys.run_prefix + e.key for e in entries]
    return [key for key in wanted if e2e.store.objects.stat(key) is None]


def first_commit_stands(e2e: Any, cell: Cell) -> None:
    """The commit held past the grace landed and stands (not withdrawn, not superseded), and every object it lists
    and every object of the producer's result is there: nothing lost, nothing half-visible."""
    manifest = e2e.store.manifest(cell.dag_id, cell.run_id, OUTPUT[cell.dag_id])
    assert manifest.attempt == 1, manifest
    assert missing(e2e, cell, manifest.objects) == [], manifest
    if cell.dag_id == "rf_faults_checkpointed":
        key = first_commit(e2e, cell)
        body = e2e.store.objects.get(key)
        assert body is not None, f"{key}: checkpoint 1 was withdrawn or dropped"
        assert missing(e2e, cell, CheckpointManifest.from_json(body, where=key).objects()) == [], key


CELLS = [pytest.param(dag_id, fault, id=f"{fault}-{dag_id.removeprefix('rf_faults').strip('_') or 'ordinary'}")
         for dag_id in DAGS["DAG_IDS"] for fault in FAULTS]
PRODUCER = {"rf_faults": "make.0", "rf_faults_checkpointed": "count.0"}


@pytest.mark.parametrize(("dag_id", "fault"), CELLS)
def test_a_fault_at_the_s3_boundary_ends_in_success_with_the_undisturbed_rows(
        e2e: Any, matrix: dict[tuple[str, str], Cell], dag_id: str, fault: str) -> None:
    cell = matrix[(dag_id, fault)]
    state = e2e.final_state(dag_id, cell.run_id, timeout=1500)
    decisions = e2e.history(dag_id, cell.run_id).get("decisions", [])
    assert "exhausted" not in [d["status"] for d in decisions], e2e.explain(dag_id, cell.run_id)
    assert state == "success", e2e.explain(dag_id, cell.run_id)
    if fault != "none":
        assert cell.done or (cell.armed and cell.armed.taken), f"{fault}: the fault never hit {cell}"
    assert sums_output(e2e, dag_id, cell.run_id) == DAGS["expected"](dag_id), e2e.explain(dag_id, cell.run_id)
    undisturbed = matrix[(dag_id, "none")]
    if e2e.final_state(dag_id, undisturbed.run_id, timeout=1500) == "success":
        assert sums_output(e2e, dag_id, cell.run_id) == sums_output(e2e, dag_id, undisturbed.run_id)
    applied = [d for d in decisions if d["status"] == "applied"]
    if fault in ("none", *HELD):  # nothing failed: a held upload is a slow one, and no sweeper took its objects
        assert decisions == [], e2e.explain(dag_id, cell.run_id)
        assert e2e.tries(dag_id, cell.run_id)[PRODUCER[dag_id]] == 1, e2e.explain(dag_id, cell.run_id)
    if fault in HELD:
        assert [s for s in cell.done if s.startswith("swept while held")], cell
    if fault == "pastgrace":  # swept at the grace once the commit had been held longer, before it landed
        assert cell.swept_held_s is not None and FLOOR_S < cell.swept_held_s < PAST_S, cell
        first_commit_stands(e2e, cell)
    if fault in (*GATED, "put5xx"):  # one restart of the producer healed it
        assert len(applied) == 1 and PRODUCER[dag_id] in applied[0]["restart"], e2e.explain(dag_id, cell.run_id)
        assert e2e.tries(dag_id, cell.run_id)[PRODUCER[dag_id]] == 2, e2e.explain(dag_id, cell.run_id)
    if fault in (*GATED,):  # the consumer's failure named the object's partition
        assert [f["cause"] for f in applied[0]["failures"]] == [str(OUTPUT[dag_id])], applied[0]["failures"]

"""The epoch loop over a result store on moto's in-memory S3, with the Arrow engine of tests.support: resume,
start over and why, half-written checkpoints, retention and gc, incremental uploads.

    src#0 ==BLOCKING==> count#0      (6 input objects, one per epoch unless said otherwise)
"""

from __future__ import annotations

import random
import time
from dataclasses import replace
from typing import Any

import pyarrow as pa
import pytest

from airflow_region_failover.checkpoint.plan import Epoch
from airflow_region_failover.checkpoint.storage import CheckpointStorage
from airflow_region_failover.failover.checkpointing import CheckpointConfig
from airflow_region_failover.store.checkpoint_manifest import CheckpointManifest, TryRecord
from airflow_region_failover.store.gc.registry import derive_registry
from airflow_region_failover.store.result_store import ResultStore
from tests.support.checkpointing import OUTPUT, commit_input, counting, run_try

DAG = "d"


def clicks(n: int = 6, seed: int = 0) -> list[pa.Table]:
    return [pa.table({"k": pa.array([(i * 7 + j * 3 + seed) % 11 for j in range(12)], pa.int64())}) for i in range(n)]


class Flaky:
    """The counting step, failing once in epoch ``at``; counts the epochs it ran."""

    def __init__(self, at: int = -1) -> None:
        self.at, self.ran = at, []

    def __call__(self, rows: pa.Table, state: pa.Table, epoch: Epoch) -> Any:
        self.ran.append(epoch.index)
        if epoch.index == self.at:
            self.at = -1
            raise RuntimeError(f"injected failure in epoch {epoch.index}")
        return counting(rows, state, epoch)


def storage(store: ResultStore, run_id: str) -> CheckpointStorage:
    return CheckpointStorage(store.objects, store.run_keys(DAG, run_id), OUTPUT, 60)


def test_a_failed_try_resumes_from_its_last_checkpoint_and_commits_what_an_uninterrupted_run_does(
        store: ResultStore) -> None:
    source = commit_input(store, DAG, "input", clicks())
    reference, _ = run_try(store, source, "clean", 1, 6)
    step = Flaky(at=4)
    with pytest.raises(RuntimeError, match="epoch 4"):
        run_try(store, source, "r", 1, 6, step=step)
    assert step.ran == [0, 1, 2, 3, 4]
    events: list[Any] = []
    result, outcome = run_try(store, source, "r", 2, 6, step=step, listener=events.append)
    assert step.ran[5:] == [4, 5]  # only the epochs after checkpoint 4 (after epoch 3) are recomputed
    assert outcome.started.resumed_epoch == 3 and outcome.started.skipped == 4
    assert "resumed from checkpoint 4 (after epoch 3 of 6, taken by try 1)" in outcome.started.reason
    assert isinstance(events[0], TryRecord) and [e.epoch for e in events[1:]] == [4, 5]
    assert result.content_checksum == reference.content_checksum  # same bytes as an uninterrupted run
    assert result.row_count == reference.row_count and result.attempt == 2
    assert [t.resumed_seq for t in storage(store, "r").tries()] == [0, 4]


def test_a_try_with_other_inputs_starts_over_and_says_which_input_changed(store: ResultStore) -> None:
    source = commit_input(store, DAG, "input", clicks())
    with pytest.raises(RuntimeError):
        run_try(store, source, "r", 1, 6, step=Flaky(at=3))
    changed = commit_input(store, DAG, "input2", clicks(seed=1))
    changed = replace(changed, partition=source.partition)
    step = Flaky()
    _, outcome = run_try(store, changed, "r", 2, 6, step=step)
    assert step.ran == [0, 1, 2, 3, 4, 5]
    assert "starts from the first epoch of 6: checkpoint 3 (after epoch 2, try 1) was taken from other input " \
           "data: src->count#0 had checksum" in outcome.started.reason


def test_a_run_that_turned_reuse_off_resumes_nothing(store: ResultStore) -> None:
    source = commit_input(store, DAG, "input", clicks())
    with pytest.raises(RuntimeError):
        run_try(store, source, "r", 1, 6, step=Flaky(at=3))
    _, outcome = run_try(store, source, "r", 2, 6, opted_out=True)
    assert outcome.started.resumed_seq == 0 and "region_failover_reuse: false" in outcome.started.reason


def test_a_half_written_checkpoint_is_never_used(store: ResultStore) -> None:
    """State objects stored, manifest never written (a try killed during its checkpoint): the next try resumes
    from the checkpoint before it."""
    source = commit_input(store, DAG, "input", clicks())

    class Killed(Exception):
        pass

    original = CheckpointStorage.commit

    def dies_at_epoch_2(self: CheckpointStorage, manifest: CheckpointManifest) -> CheckpointManifest:
        if manifest.epoch == 2:
            raise Killed
        return original(self, manifest)

    CheckpointStorage.commit = dies_at_epoch_2  # type: ignore[method-assign]
    try:
        with pytest.raises(Killed):
            run_try(store, source, "r", 1, 6)
    finally:
        CheckpointStorage.commit = original  # type: ignore[method-assign]
    assert [c.epoch for c in (i.manifest for i in storage(store, "r").completed()) if c] == [1]
    _, outcome = run_try(store, source, "r", 2, 6)
    assert outcome.started.resumed_epoch == 1


def test_retention_keeps_num_retained_and_gc_keeps_every_file_they_reference(store: ResultStore) -> None:
    source = commit_input(store, DAG, "input", clicks(8))
    config = CheckpointConfig(num_retained=2, max_sorted_runs=3)
    result, outcome = run_try(store, source, "r", 1, 8, config)
    completed = [i.manifest for i in storage(store, "r").completed() if i.manifest]
    assert [c.seq for c in completed] == [8, 7]
    referenced = {o.sha256 for c in completed for o in c.objects()} | {o.sha256 for o in result.objects}
    dropped = {o.sha256 for c in outcome.checkpoints[:-2] for s in c.states for r in s.runs for o in r.objects}
    registry = derive_registry(store.objects, store.layout)
    assert all(registry.referenced(h) for h in referenced)
    report = store.sweep(grace_seconds=3600, now=time.time() + 7200, min_grace_seconds=60)
    assert report.shared.deleted >= len(dropped - referenced) > 0
    present = {k.rsplit("/", 1)[1].removesuffix(".parquet") for k in
               (i.key for i in store.objects.listing(store.layout.cas_root + "/"))}
    assert referenced <= present and not (dropped - referenced) & present
    _, again = run_try(store, source, "r", 2, 8, config)  # the retained state restores after the sweep
    assert again.started.resumed_epoch == 7 and not again.checkpoints


def test_incremental_checkpoints_upload_only_the_changed_keys(store: ResultStore) -> None:
    # scattered keys with varied counts: a state of 0..1999 all counted once is almost no information, so a
    # compressing codec stores it in about the bytes of a run of 50 of its keys (measured: 1.4 kB, both)
    ids = random.Random(24).sample(range(2**40), 2000)
    big = [pa.table({"k": pa.array([k for i, k in enumerate(ids) for _ in range(1 + i % 5)], pa.int64())})] + \
        [pa.table({"k": pa.array(ids[i * 50:i * 50 + 50], pa.int64())}) for i in range(1, 6)]

    def keep_all(rows: pa.Table, state: pa.Table, epoch: Epoch) -> Any:
        return counting(rows, state, epoch)[0], _all(rows, state)

    source = commit_input(store, DAG, "input", big)
    _, incremental = run_try(store, source, "r", 1, 6, step=keep_all)
    _, full = run_try(store, source, "f", 1, 6, CheckpointConfig(incremental=False), step=keep_all)
    first, later = incremental.checkpoints[0], incremental.checkpoints[1:]
    assert all(c.uploaded_bytes * 5 < first.uploaded_bytes for c in later)
    assert all(c.uploaded_bytes * 2 > first.uploaded_bytes for c in full.checkpoints[1:])
    assert [c.states[0].runs[-1].rows for c in later] == [50] * 5  # each uploads a run of its 50 changed keys


def _all(rows: pa.Table, state: pa.Table) -> pa.Table:
    """A state of every key seen, counting (no deletions)."""
    import pyarrow.compute as pc

    from airflow_region_failover.checkpoint import lsm

    seen = rows.group_by("k").aggregate([([], "count_all")]).rename_columns(["k", "d"])
    joined = state.select(["k", "n"]).join(seen, "k", join_type="full outer")
    n = pc.add(pc.fill_null(joined.column("n"), 0), pc.fill_null(joined.column("d"), 0)).cast(pa.int64())
    return pa.table({"k": joined.column("k"), "n": n,
                     lsm.KEY_GROUP: pc.cast(pc.bit_wise_and(joined.column("k"), 7), pa.int32())})


def test_without_checkpointing_a_try_runs_every_epoch_and_writes_no_checkpoint(store: ResultStore) -> None:
    source = commit_input(store, DAG, "input", clicks())
    reference, outcome = run_try(store, source, "r", 1, 6, enabled=False)
    assert not outcome.checkpoints and not storage(store, "r").completed()
    assert reference.content_checksum == run_try(store, source, "clean", 1, 6)[0].content_checksum


def test_an_interval_skips_boundaries_but_the_last_epoch_always_checkpoints(store: ResultStore) -> None:
    source = commit_input(store, DAG, "input", clicks())
    _, outcome = run_try(store, source, "r", 1, 6, CheckpointConfig(interval_ms=3_600_000))
    assert [c.epoch for c in outcome.checkpoints] == [5]

"""A checkpoint one of whose output objects is lost is not complete: a later try resumes the latest checkpoint
whose outputs and state are all there, re-producing what is missing — the heal path of a consumer that found the
object corrupt and moved it aside (:func:`~airflow_region_failover.store.content.quarantine`).

    src#0 ==BLOCKING==> count#0 ==> (a consumer, which moved one of count#0's objects aside)
                        6 epochs, one input object each; each epoch writes one output object
"""

from __future__ import annotations

import pytest

from airflow_region_failover.failover.checkpointing import CheckpointConfig
from airflow_region_failover.store.content import quarantine
from airflow_region_failover.store.manifest import ObjectEntry
from airflow_region_failover.store.result_store import ResultStore
from tests.support.checkpointing import commit_input, run_try
from tests.unit.checkpoint.test_runner import DAG, Flaky, clicks, storage


def move_aside(store: ResultStore, entry: ObjectEntry) -> str:
    """What a consumer that found ``entry`` corrupt does: move it aside (the product's own quarantine)."""
    key = store.layout.cas_object(entry.sha256)
    found = store.objects.stat(key)
    assert found is not None
    quarantine(store.objects, store.layout, entry, found.etag, "holds other bytes (the test's consumer)")
    assert store.objects.stat(key) is None
    return key


def test_a_lost_output_object_of_the_only_checkpoint_is_produced_again_from_the_first_epoch(
        store: ResultStore) -> None:
    """``num-retained: 1``: the checkpoint after the last epoch lists the lost object, and no older one is kept,
    so the try starts from the first epoch (Flink: no complete checkpoint) and heals the object."""
    source = commit_input(store, DAG, "input", clicks())
    first, _ = run_try(store, source, "r", 1, 6)
    lost = move_aside(store, first.objects[3])
    step = Flaky()
    healed, outcome = run_try(store, source, "r", 2, 6, step=step)
    assert step.ran == [0, 1, 2, 3, 4, 5]
    assert outcome.started.resumed_seq == 0
    assert f"checkpoint 6 is not complete: {lost} is missing" in outcome.started.reason, outcome.started.reason
    assert healed.content_checksum == first.content_checksum and healed.attempt == 2
    assert store.objects.stat(lost) is not None, "the producer's try wrote the object again"


def test_a_try_resumes_the_latest_checkpoint_that_does_not_list_the_lost_object(store: ResultStore) -> None:
    """Every checkpoint after epoch 3 lists epoch 3's object; the one after epoch 2 is complete: the try resumes
    it and recomputes epochs 3..5 only."""
    source = commit_input(store, DAG, "input", clicks())
    config = CheckpointConfig(num_retained=6)
    first, _ = run_try(store, source, "r", 1, 6, config)
    lost = move_aside(store, first.objects[3])
    step = Flaky()
    healed, outcome = run_try(store, source, "r", 2, 6, config, step=step)
    assert step.ran == [3, 4, 5]
    assert (outcome.started.resumed_seq, outcome.started.resumed_epoch) == (3, 2)
    assert healed.content_checksum == first.content_checksum
    assert store.objects.stat(lost) is not None
    again, later = run_try(store, source, "r", 3, 6, config, step=step)  # the new checkpoints are complete
    assert later.started.resumed_epoch == 5 and step.ran == [3, 4, 5]
    assert again.content_checksum == first.content_checksum


@pytest.mark.parametrize("change", ["missing", "resized"])
def test_an_object_the_store_finds_wrong_by_its_head_makes_the_checkpoint_incomplete(
        store: ResultStore, change: str) -> None:
    """The check is the store's (:func:`~airflow_region_failover.store.content.check_stored`): presence and size,
    and the SHA-256 where the server keeps one."""
    source = commit_input(store, DAG, "input", clicks())
    first, _ = run_try(store, source, "r", 1, 6)
    key = store.layout.cas_object(first.objects[5].sha256)
    if change == "missing":
        store.objects.delete([key])
    else:
        store.objects.client.put_object(Bucket=store.layout.bucket, Key=key, Body=b"short")
    healed, outcome = run_try(store, source, "r", 2, 6)
    assert outcome.started.resumed_seq == 0 and key in outcome.started.reason
    assert healed.content_checksum == first.content_checksum
    assert [t.resumed_seq for t in storage(store, "r").tries()] == [0, 0]

"""Checkpoint ids are unique per subtask across its tries, as Flink's checkpoint id counter is across restarts:
a checkpoint manifest deleted behind the store's back is skipped by the next try, whose own checkpoints take ids
above every id any try recorded — so the failover view's JSON, the task summary (XCom) and the task log name the
same checkpoints for the same try.

    src#0 ==BLOCKING==> count#0      (6 epochs; try 1 fails in epoch 4, its newest checkpoint's manifest deleted)
"""

from __future__ import annotations

import logging
import re

import pytest

from airflow_region_failover.checkpoint.storage import history
from airflow_region_failover.failover.checkpointing import CheckpointConfig
from airflow_region_failover.failover_view.page import checkpoint_events
from airflow_region_failover.graph.builder import JobGraphBuilder
from airflow_region_failover.job import JobSpec
from airflow_region_failover.spark.chain import Heard
from airflow_region_failover.store.result_store import ResultStore
from tests.support.checkpointing import OUTPUT, commit_input, run_try
from tests.unit.checkpoint.test_runner import DAG, Flaky, clicks, storage

SPEC = JobSpec(JobGraphBuilder().step("src").step("count").edge("src", "count", exchange="BLOCKING").build(), {})


def test_a_retry_numbers_its_checkpoints_above_a_deleted_one_and_every_view_agrees(
        store: ResultStore, caplog: pytest.LogCaptureFixture) -> None:
    source = commit_input(store, DAG, "input", clicks())
    config = CheckpointConfig(num_retained=2)
    with pytest.raises(RuntimeError, match="epoch 4"):
        run_try(store, source, "r", 1, 6, config, step=Flaky(at=4))
    assert storage(store, "r").sequence_numbers() == [3, 4]
    store.objects.delete([store.run_keys(DAG, "r").checkpoint(OUTPUT, 4)])  # behind the store's back

    heard = Heard()
    # only the retry's lines: where an earlier test left the runner's logger at INFO, try 1's lines are captured too
    caplog.clear()
    with caplog.at_level(logging.INFO, logger="airflow_region_failover.checkpoint.runner"):
        run_try(store, source, "r", 2, 6, config, listener=heard)
    assert heard.started is not None and (heard.started.resumed_seq, heard.started.resumed_epoch) == (3, 2)
    logged = [int(n) for n in re.findall(r"count#0: checkpoint (\d+) after epoch", caplog.text)]
    assert logged == [c.seq for c in heard.checkpoints] == [5, 6, 7], caplog.text

    events = checkpoint_events(SPEC, history(store.objects, store.run_keys(DAG, "r")))
    taken = {t: [e["checkpoint"] for e in events if e["event"] == "checkpoint" and e["try_number"] == t]
             for t in (1, 2)}
    assert taken == {1: [1, 2, 3, 4], 2: [5, 6, 7]}, events
    entry = heard.entry()
    assert entry is not None and (entry.resumed_from, entry.checkpoints) == (3, len(taken[2]))
    resumed = [e for e in events if e["event"] == "resumed"]
    assert [(e["try_number"], e["checkpoint"]) for e in resumed] == [(2, 3)]


def test_ids_stay_unique_when_every_manifest_was_deleted(store: ResultStore) -> None:
    """Nothing left to resume: the try starts over, and still numbers above the ids of the tries before it."""
    source = commit_input(store, DAG, "input", clicks())
    with pytest.raises(RuntimeError):
        run_try(store, source, "r", 1, 6, step=Flaky(at=2))
    keys = store.run_keys(DAG, "r")
    store.objects.delete([keys.checkpoint(OUTPUT, seq) for seq in storage(store, "r").sequence_numbers()])
    _, outcome = run_try(store, source, "r", 2, 6)
    assert outcome.started.resumed_seq == 0
    assert [c.seq for c in outcome.checkpoints] == [3, 4, 5, 6, 7, 8]

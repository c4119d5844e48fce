"""Starting a run from an earlier run's final checkpoints (``execution.state-recovery.path``), rescaled by
key-group range (VLDB'17): the old run's two subtasks' states become the new run's three subtasks' states, each key
in the subtask owning its key group, none lost or doubled; a state not keyed like the input needs equal
parallelism.

    run a:  src#0, src#1 ==keyed by k (8 key groups)==> count#0, count#1
    run b:                                             count#0, count#1, count#2   (initial state from run a)
"""

from __future__ import annotations

import pyarrow as pa
import pytest

from airflow_region_failover.checkpoint import lsm
from airflow_region_failover.checkpoint.declared import chain_checkpoint
from airflow_region_failover.checkpoint.resume import recover
from airflow_region_failover.checkpoint.storage import CheckpointStorage
from airflow_region_failover.exceptions import GraphError
from airflow_region_failover.failover.checkpointing import Checkpoint
from airflow_region_failover.graph.builder import JobGraphBuilder
from airflow_region_failover.graph.ids import PartitionId
from airflow_region_failover.graph.keygroups import key_group_range
from airflow_region_failover.job import StepImpl
from airflow_region_failover.store.result_store import ResultStore
from tests.support.checkpointing import SCHEMA, commit_input, run_try

DAG = "d"
DECL = Checkpoint(["k"], "k long, n long", epochs=3)


def chain(keyed: bool) -> object:
    graph = (JobGraphBuilder().step("src").step("count", parallelism=3)
             .edge("src", "count", exchange="BLOCKING", partition_by=["k"] if keyed else (),
                   max_parallelism=8 if keyed else 0)
             .build())
    return chain_checkpoint(graph, ["count"], {"src": StepImpl("src", fn=print),
                                               "count": StepImpl("count", fn=print, checkpoint=DECL)})


def old_run(store: ResultStore) -> list[dict[str, int]]:
    """Run ``a``: two subtasks, each counting the keys of its key groups (k & 7); their final states."""
    states = []
    for index in (0, 1):
        groups = key_group_range(8, 2, index)
        rows = [pa.table({"k": pa.array([k for k in range(40) if (k & 7) in groups] * (i + 1), pa.int64())})
                for i in range(3)]
        source = commit_input(store, DAG, f"input{index}", rows)
        run_try(store, source, "a", 1, 3, index=index)
        final = CheckpointStorage(store.objects, store.run_keys(DAG, "a"), PartitionId("count", index), 60)
        manifest = final.completed()[0].manifest
        assert manifest is not None and manifest.epoch == 2
        state = lsm.restore([final.load_run(r) for r in manifest.states[0].runs], ("k",))
        states.append({r["k"]: r["n"] for r in state.to_pylist()})
    return states


def test_three_subtasks_start_from_two_subtasks_state_by_key_group_range(store: ResultStore) -> None:
    before = old_run(store)
    everything = {**before[0], **before[1]}
    assert everything and not set(before[0]) & set(before[1])
    checkpointed = chain(keyed=True)
    recovered = {}
    for index in range(3):
        groups = key_group_range(8, 3, index)
        storage = CheckpointStorage(store.objects, store.run_keys(DAG, "b"), PartitionId("count", index), 60)
        got = recover(store.objects, storage, "a", checkpointed, index, {"count": groups},  # type: ignore[arg-type]
                      lambda step: SCHEMA.empty_table())
        rows = got.states["count"].to_pylist()
        assert all(r[lsm.KEY_GROUP] in groups for r in rows)
        assert got.source.startswith("a:0/") and got.states["count"].schema == SCHEMA
        recovered.update({r["k"]: r["n"] for r in rows})
    assert recovered == everything
    latest = recover(store.objects, CheckpointStorage(store.objects, store.run_keys(DAG, "b"),
                                                      PartitionId("count", 0), 60),
                     "latest", checkpointed, 0, {"count": key_group_range(8, 3, 0)},  # type: ignore[arg-type]
                     lambda step: SCHEMA.empty_table())
    assert latest.source.startswith("a:")


def test_a_state_not_keyed_like_its_input_needs_equal_parallelism(store: ResultStore) -> None:
    old_run(store)
    storage = CheckpointStorage(store.objects, store.run_keys(DAG, "b"), PartitionId("count", 2), 60)
    with pytest.raises(GraphError, match="cannot take subtask 2's state from 2 old subtask"):
        recover(store.objects, storage, "a", chain(keyed=False), 2, {"count": range(0, 128)},  # type: ignore[arg-type]
                lambda step: SCHEMA.empty_table())
    with pytest.raises(GraphError, match="no retained final checkpoint of step 'count' in run 'zzz'"):
        recover(store.objects, storage, "zzz", chain(keyed=True), 2, {"count": range(0, 8)},  # type: ignore[arg-type]
                lambda step: SCHEMA.empty_table())

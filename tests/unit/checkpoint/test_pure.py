"""The pure parts of checkpointing on their own: epoch plans, the compaction and retention policy, and that they
(and the LSM rules) import neither boto3, Spark nor Airflow.

    src#0 ==BLOCKING==> count#0        (the input's objects are cut into epochs)
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

import airflow_region_failover.checkpoint as package
from airflow_region_failover.checkpoint.plan import Piece, cut_points, plan_key_groups, plan_objects
from airflow_region_failover.checkpoint.policy import due, plan_compaction, retained
from airflow_region_failover.graph.ids import PartitionId
from airflow_region_failover.store.manifest import ObjectEntry


def entry(n: int, size: int = 10) -> ObjectEntry:
    digest = f"{n:064x}"
    return ObjectEntry(f"{digest[:2]}/{digest}.parquet", size, digest, shared=True)


@pytest.mark.parametrize("module", ["plan", "lsm", "policy"])
def test_pure_modules_import_no_boto3_spark_or_airflow(module: str) -> None:
    source = Path(package.__path__[0], f"{module}.py").read_text()
    for node in ast.walk(ast.parse(source)):
        names = [a.name for a in node.names] if isinstance(node, ast.Import) else \
            [node.module or ""] if isinstance(node, ast.ImportFrom) else []
        for name in names:
            assert name.split(".")[0] not in {"boto3", "botocore", "pyspark", "airflow"}, (module, name)


@given(st.lists(st.integers(0, 1000), min_size=1, max_size=40), st.integers(1, 50))
def test_every_object_is_in_exactly_one_epoch_in_manifest_order(sizes: list[int], epochs: int) -> None:
    a = PartitionId("a->b", 0)
    b = PartitionId("a->b", 1)
    objects = [entry(i, s) for i, s in enumerate(sizes)]
    half = len(objects) // 2
    plan = plan_objects([Piece(a, tuple(objects[:half])), Piece(b, tuple(objects[half:]))], epochs)
    assert len(plan) == min(epochs, len(objects))
    flat = [o for e in plan.epochs for p in e.pieces for o in p.objects]
    assert flat == objects
    assert all(e.pieces for e in plan.epochs)  # no empty epoch
    assert [e.index for e in plan.epochs] == list(range(len(plan))) and plan.epochs[-1].last
    again = plan_objects([Piece(a, tuple(objects[:half])), Piece(b, tuple(objects[half:]))], epochs)
    assert again.fingerprint == plan.fingerprint  # deterministic


def test_epochs_balance_bytes() -> None:
    assert cut_points([10] * 10, 5) == [2, 4, 6, 8, 10]
    assert cut_points([100, 1, 1, 1, 1], 2) == [1, 5]
    assert cut_points([], 3) == [0]


def test_an_input_without_objects_is_one_empty_epoch() -> None:
    plan = plan_objects([Piece(PartitionId("a->b", 0), ())], 20)
    assert len(plan) == 1 and plan.epochs[0].pieces == () and plan.epochs[0].last


def test_the_plan_changes_with_the_objects_or_the_declaration() -> None:
    piece = Piece(PartitionId("a->b", 0), (entry(1), entry(2)))
    plan = plan_objects([piece], 2, {"count": {"epochs": 2}})
    assert plan_objects([Piece(piece.partition, (entry(1), entry(3)))], 2, {"count": {"epochs": 2}}).fingerprint \
        != plan.fingerprint
    assert plan_objects([piece], 2, {"count": {"epochs": 3}}).fingerprint != plan.fingerprint


@given(st.integers(0, 100), st.integers(1, 128), st.integers(1, 200))
def test_key_group_epochs_tile_the_range(start: int, length: int, epochs: int) -> None:
    groups = range(start, start + length)
    plan = plan_key_groups(groups, epochs)
    covered = [g for e in plan.epochs for g in (e.key_groups or range(0))]
    assert covered == list(groups) and all(e.key_groups for e in plan.epochs)
    assert len(plan) == min(epochs, length)


def test_size_amplification_triggers_a_full_compaction() -> None:
    assert plan_compaction([100, 50, 60], 8, 100) is not None
    full = plan_compaction([100, 50, 60], 8, 100)
    assert full is not None and full.full
    assert plan_compaction([100, 50, 40], 8, 100) is None


def test_too_many_runs_merge_the_newest_of_similar_size() -> None:
    # base 1000, deltas of 50: 5 runs > 4 -> the newest two must merge; 50 <= 1.01 * 100 pulls in the next ...
    compaction = plan_compaction([1000, 50, 50, 50, 50], 4, 200)
    assert compaction is not None and compaction.start == 1 and not compaction.full
    # ... but a much bigger older run stays out of the merge
    compaction = plan_compaction([1000, 400, 10, 10, 10], 4, 200)
    assert compaction is not None and compaction.start == 2


@given(st.lists(st.integers(1, 10**6), min_size=2, max_size=30), st.integers(2, 10), st.integers(1, 500))
def test_a_compaction_leaves_at_most_max_runs(sizes: list[int], max_runs: int, amplification: int) -> None:
    compaction = plan_compaction(sizes, max_runs, amplification)
    after = len(sizes) if compaction is None else compaction.start + 1
    assert after <= max_runs or (compaction is None and len(sizes) <= max_runs)


def test_retention_keeps_the_newest() -> None:
    assert retained([1, 2, 3, 4], 2) == ((3, 4), (1, 2))
    assert retained([5], 3) == ((5,), ())
    assert retained([], 1) == ((), ())


def test_a_checkpoint_is_due_after_the_interval_and_always_after_the_last_epoch() -> None:
    assert due(1000, 0, 0, False)
    assert not due(1000, 500, 600, False)
    assert due(1100, 500, 600, False)
    assert due(600, 500, 10**9, True)

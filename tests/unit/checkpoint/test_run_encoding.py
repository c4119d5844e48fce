"""How a state run is stored (:func:`~airflow_region_failover.checkpoint.storage.run_codec`): zstd and delta-packed
sorted keys, read back row for row (tombstones, key groups and nulls included), the same state as the same bytes,
and fewer bytes per changed key than the result objects' codec — on moto's in-memory S3, no Spark.

    (no graph: state runs put and loaded through CheckpointStorage of count#0)
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from airflow_region_failover.checkpoint import lsm
from airflow_region_failover.checkpoint.storage import SMALL_RUN_ROWS, CheckpointStorage, run_codec
from airflow_region_failover.store.checkpoint_manifest import StateRun
from airflow_region_failover.store.dataplane.encoding import RESULTS, encode_objects
from airflow_region_failover.store.dataplane.reading import fetch
from airflow_region_failover.store.keys import AttemptId
from airflow_region_failover.store.result_store import ResultStore
from tests.support.checkpointing import OUTPUT

KEYS = 40_000


def state(seed: int, changed: float = 0.0) -> pa.Table:
    """``KEYS`` keys with a count and a sum, the values of a ``changed`` share of them moved by ``seed``."""
    keys = np.arange(KEYS, dtype=np.int64)
    rng = np.random.default_rng(seed)
    bump = (rng.random(KEYS) < changed).astype(np.int64)
    total = (keys % 997 + bump * rng.integers(1, 9000, KEYS)).astype(float)
    table = pa.table({"k": keys, "n": 3 + bump, "total": total,
                      lsm.KEY_GROUP: pa.array((keys * 2654435761 % 2**32 % 128).astype(np.int32))})
    return lsm.normalise(table, ["k"], "test")


def put(store: ResultStore, table: pa.Table) -> tuple[StateRun, int, bytes]:
    storage = CheckpointStorage(store.objects, store.run_keys("d", "r"), OUTPUT, 60)
    run, sent = storage.put_run(table, store.target(AttemptId("d", "r", OUTPUT, 1)), base=False,
                                deletes=lsm.deletes(table), key_groups=range(0, 128))
    body = bytes(fetch(store.objects, storage.keys, run.objects[0], True, OUTPUT))
    return run, sent, body


def test_a_state_run_is_stored_with_zstd_and_delta_packed_keys_and_results_keep_snappy(store: ResultStore) -> None:
    run = lsm.diff(state(0), state(1, 0.05), ["k"])
    _, _, body = put(store, run)
    meta = pq.ParquetFile(pa.BufferReader(body)).metadata.row_group(0)
    columns = {meta.column(i).path_in_schema: meta.column(i) for i in range(meta.num_columns)}
    assert {c.compression for c in columns.values()} == {"ZSTD"}
    assert "DELTA_BINARY_PACKED" in columns["k"].encodings
    result_body, _ = next(encode_objects(iter(run.to_batches()), 2**24))
    assert pq.ParquetFile(pa.BufferReader(result_body)).metadata.row_group(0).column(0).compression == "SNAPPY"


def test_a_run_reads_back_row_for_row_with_tombstones_and_key_groups(store: ResultStore) -> None:
    previous, current = state(0), state(2, 0.05)
    current = current.filter(pc.not_equal(pc.bit_wise_and(current.column("k"), 31), 5))  # deletions
    run = lsm.diff(previous, current, ["k"])
    assert lsm.deletes(run) > 0
    stored, _, _ = put(store, run)
    loaded = CheckpointStorage(store.objects, store.run_keys("d", "r"), OUTPUT, 60).load_run(stored)
    assert loaded.equals(run)
    assert lsm.restore([lsm.base_run(previous), loaded], ["k"]).equals(current)


def test_the_same_state_is_stored_as_the_same_bytes_whatever_its_buffers(store: ResultStore) -> None:
    whole = lsm.base_run(state(3))
    again = pa.concat_tables([whole.slice(0, 1000), whole.slice(1000)]).filter(pc.is_valid(whole.column("k")))
    first, sent, _ = put(store, whole)
    second, sent_again, _ = put(store, again)
    assert sent > 0 and sent_again == 0
    assert first.objects == second.objects


def test_an_incremental_run_takes_half_the_bytes_per_changed_key_of_the_results_codec(store: ResultStore) -> None:
    run = lsm.diff(state(0), state(4, 0.05), ["k"])
    _, ours, _ = put(store, run)
    results = sum(b.size for b, _ in encode_objects(iter(run.to_batches()), 2**24, RESULTS))
    assert ours * 2 <= results, (ours / run.num_rows, results / run.num_rows)


def test_small_runs_are_compressed_harder_than_whole_states() -> None:
    assert run_codec(state(0).slice(0, SMALL_RUN_ROWS // 8)).level == 9
    big = pa.concat_tables([state(0)] * (SMALL_RUN_ROWS // KEYS + 1))
    assert run_codec(big).level == 3

"""Content-defined chunking of a sorted (sub)partition and its deterministic Parquet encoding (pure pyarrow)."""

from __future__ import annotations

import hashlib
import io

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from airflow_region_failover.store.dataplane.chunking import (
    ChunkPolicy,
    chunk_batches,
    cut_points,
    encode,
    key_hashes,
    sort_order,
)

POLICY = ChunkPolicy(rows=256)  # mean 256 rows, min 64, max 1024


def rows(keys: np.ndarray, salt: int = 0) -> pa.Table:
    """Rows keyed ``k`` with a value column derived from the key (``salt`` changes every value)."""
    return pa.table({"k": pa.array(keys, pa.int64()), "v": pa.array((keys * 31 + salt) % 1000, pa.int64()),
                     "name": pa.array([f"n{k % 97}" for k in keys.tolist()])})


def digests(table: pa.Table, batch_rows: int = 1000) -> list[str]:
    return [hashlib.sha256(encode(c)).hexdigest()
            for c in chunk_batches(table.to_batches(max_chunksize=batch_rows), ["k"], POLICY)]


def changed(before: list[str], after: list[str]) -> int:
    """Chunks of ``after`` whose bytes are not among ``before``'s."""
    return len(set(after) - set(before))


BASE = np.arange(0, 40_000, 2)  # 20,000 sorted keys


def test_cut_points_follow_hashes_with_min_and_max() -> None:
    # bits=2 (cut where hash % 4 == 0), min 2, max 5 rows
    hashes = np.array([4, 4, 1, 8, 1, 1, 1, 1, 1, 12, 3], dtype=np.uint64)
    # row 1 repeats row 0's key: no cut; row 3 is a cut point (3 rows >= min); rows 4..8 are no cut points, so
    # the chunk starting at 3 is forced to end at 3 + 5 = 8; row 9 is a cut point but only 1 row after 8 (< min).
    assert cut_points(hashes, None, 0, (2, 2, 5)) == ([3, 8], 3)
    # a chunk carried over from the batch before: 4 rows already, so a cut point at 0 is taken
    assert cut_points(np.array([8, 1], dtype=np.uint64), 5, 4, (2, 2, 5)) == ([0], 2)
    # ... unless row 0 continues the previous batch's key
    assert cut_points(np.array([8, 1], dtype=np.uint64), 8, 4, (2, 2, 5)) == ([1], 1)


def test_chunks_cover_every_row_in_order_within_min_and_max() -> None:
    table = rows(BASE)
    chunks = list(chunk_batches(table.to_batches(max_chunksize=777), ["k"], POLICY))
    sizes = [c.num_rows for c in chunks]
    assert pa.concat_tables(chunks).equals(table)
    assert all(64 <= s <= 1024 for s in sizes[:-1]) and sizes[-1] <= 1024
    assert 40 < len(chunks) < 120  # mean ~ 64 + 256 rows


def test_max_rows_is_forced_when_no_key_ends() -> None:
    table = rows(np.full(5000, 7))  # one key: no row starts a new key
    assert [c.num_rows for c in chunk_batches(table.to_batches(max_chunksize=300), ["k"], POLICY)] == [
        1024, 1024, 1024, 1024, 904]


def test_chunks_do_not_depend_on_the_batch_layout() -> None:
    table = rows(BASE)
    assert digests(table, 1000) == digests(table, 37) == digests(table, 20_000)


def test_updated_rows_change_only_the_chunks_holding_them() -> None:
    before = digests(rows(BASE))
    values = rows(BASE).column("v").to_numpy().copy()
    touched = [100, 7_000, 15_000]
    values[touched] += 1
    after = digests(rows(BASE).set_column(1, "v", pa.array(values)))
    assert len(after) == len(before)
    assert changed(before, after) == 3


@pytest.mark.parametrize("edit", ["insert", "delete"])
def test_inserted_or_deleted_rows_change_only_the_chunks_around_them(edit: str) -> None:
    before = digests(rows(BASE))
    inserted = np.sort(np.concatenate([BASE, [3, 14_001, 30_001]]))
    keys = inserted if edit == "insert" else np.delete(BASE, [1, 7_000, 15_000])
    after = digests(rows(keys))
    assert 3 <= changed(before, after) <= 6  # one chunk per edit, two when the edit is a cut point itself
    assert abs(len(after) - len(before)) <= 3


def test_hashes_see_only_the_key_columns() -> None:
    a, b = rows(BASE[:100]), rows(BASE[:100], salt=5)
    assert (key_hashes(a, ["k"]) == key_hashes(b, ["k"])).all()
    assert not (key_hashes(a, ["k", "v"]) == key_hashes(b, ["k", "v"])).all()


def test_encoding_is_deterministic_and_round_trips() -> None:
    table = rows(BASE[:3000])
    body = encode(table)
    assert body == encode(pa.Table.from_batches(table.to_batches(max_chunksize=7)))
    assert body == encode(rows(BASE[:3000]))
    assert pq.read_table(io.BytesIO(body)).equals(table)
    assert pq.ParquetFile(io.BytesIO(body)).metadata.num_row_groups == 1
    assert encode(rows(BASE[:3000], salt=1)) != body


def test_the_total_order_is_the_key_then_every_other_column() -> None:
    assert sort_order(["z", "k", "a", "day"], ["day", "k"]) == ["day", "k", "a", "z"]


def test_policy_rounds_the_mean_to_a_power_of_two() -> None:
    assert ChunkPolicy(target_bytes=1 << 20).bounds(24.0) == (15, 8192, 131072)
    assert ChunkPolicy(target_bytes=1 << 20).bounds(25.0)[0] == 15  # a small change in row size: same mask
    with pytest.raises(ValueError, match="target_bytes >= 1"):
        ChunkPolicy(target_bytes=0)


def test_a_chunk_with_a_null_struct_whose_field_is_never_null_on_its_own_is_encoded() -> None:
    """The clustered writer's chunks too store a field below a nullable struct as optional (pyarrow refused the
    nulls Spark puts in its slots where the struct is null: "Column 'q' is declared non-nullable but contains
    nulls")."""
    inner = pa.struct([pa.field("q", pa.int64(), nullable=False)])
    values = pa.StructArray.from_arrays([pa.array([1, None], pa.int64())], fields=list(inner),
                                        mask=pa.array([False, True]))
    table = pa.table({"k": [1, 2], "maybe": values})
    assert pq.read_table(io.BytesIO(encode(table))).to_pylist() == table.to_pylist()

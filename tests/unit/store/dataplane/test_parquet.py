"""How a partition becomes Parquet: row groups gathered from Spark's small batches, dictionary encoding only where
the first batch repeats values (pure pyarrow; the upload end-to-end is in tests/integration)."""

from __future__ import annotations

import io

import boto3
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from moto import mock_aws

from airflow_region_failover.graph.ids import PartitionId
from airflow_region_failover.store.config import StoreConfig
from airflow_region_failover.store.dataplane.chunking import dictionary_columns
from airflow_region_failover.store.dataplane.encoding import row_groups
from airflow_region_failover.store.keys import AttemptId
from airflow_region_failover.store.result_store import ResultStore
from airflow_region_failover.store.s3.clients import S3Access


def batch(start: int, n: int) -> pa.RecordBatch:
    return pa.record_batch({
        "id": pa.array(range(start, start + n), pa.int64()),
        "country": pa.array([["de", "fr", "it"][i % 3] for i in range(n)]),
        "tags": pa.array([[i, i + 1] for i in range(n)]),
        "nothing": pa.nulls(n),
    })


def test_dictionary_only_for_flat_columns_that_repeat() -> None:
    assert dictionary_columns(batch(0, 1000)) == ["country"]


def test_dictionary_threshold_is_half_distinct() -> None:
    half = pa.record_batch({"x": pa.array([i // 2 for i in range(100)])})  # 50 distinct of 100
    more = pa.record_batch({"x": pa.array([i if i < 51 else 0 for i in range(100)])})  # 51 distinct
    assert (dictionary_columns(half), dictionary_columns(more)) == (["x"], [])


def test_row_groups_gather_batches_up_to_the_limit() -> None:
    batches = [batch(i * 100, 100) for i in range(7)]
    groups = list(row_groups(iter(batches), batches[0].nbytes * 3))
    assert [g.num_rows for g in groups] == [300, 300, 100]
    assert pa.concat_tables(groups).column("id").to_pylist() == list(range(700))
    assert list(row_groups(iter([]), 10)) == []


def test_written_object_has_few_row_groups_and_dictionary_only_where_chosen() -> None:
    batches = [batch(i * 1000, 1000) for i in range(10)]
    table = pa.Table.from_batches(batches)
    with mock_aws():
        client = boto3.client("s3", region_name="us-east-1")
        client.create_bucket(Bucket="bkt")
        store = ResultStore(StoreConfig("bkt", "pre", S3Access()), client=client)
        manifest, _ = store.write_arrow(table, AttemptId("etl", "run1", PartitionId("r", 0), 1))
        [entry] = manifest.objects
        key = store.run_keys("etl", "run1").object_key(entry.key, entry.shared)
        body = client.get_object(Bucket="bkt", Key=key)["Body"].read()
    meta = pq.ParquetFile(io.BytesIO(body)).metadata
    assert meta.num_row_groups == 1 and meta.num_rows == 10_000  # not one row group per batch
    encodings = {meta.row_group(0).column(i).path_in_schema: meta.row_group(0).column(i).encodings
                 for i in range(meta.num_columns)}
    assert any("DICTIONARY" in e for e in encodings["country"])
    assert not any("DICTIONARY" in e for e in encodings["id"])
    assert pq.read_table(io.BytesIO(body)).equals(table)


def test_objects_are_bounded_even_from_one_huge_batch_and_the_same_rows_give_the_same_bytes() -> None:
    from airflow_region_failover.store.dataplane.encoding import encode_objects

    rows = 200_000
    big = pa.record_batch({"id": pa.array(range(rows), pa.int64()),
                           "s": pa.array([f"{i:032x}" for i in range(rows)])})  # ~9 MB of Arrow data, one batch
    limit = 1024 * 1024
    first = list(encode_objects(iter([big]), limit))
    again = list(encode_objects(iter([big]), limit))
    assert len(first) > 1 and sum(n for _, n in first) == rows
    assert all(body.size < 2 * limit for body, _ in first)
    assert [body.to_pybytes() for body, _ in first] == [body.to_pybytes() for body, _ in again]
    back = pa.concat_tables(pq.read_table(pa.BufferReader(body)) for body, _ in first)
    assert back.equals(pa.Table.from_batches([big]))


def tagged(start: int, n: int) -> pa.RecordBatch:
    """Rows tagged with a subpartition (``id * 7 % 3``) in no order, as a keyed Spark task hands them over."""
    from airflow_region_failover.store.dataplane.encoding import SUBPARTITION_COLUMN

    rows = batch(start, n)
    return rows.append_column(SUBPARTITION_COLUMN, pa.array([i * 7 % 3 for i in range(start, start + n)],
                                                            pa.int32()))


def _split_objects(store: ResultStore, run: str) -> list[tuple[int, list[int], str]]:
    """Each object a keyed task writes from unsorted tagged batches: (subpartition, its ids, its SHA-256)."""
    from airflow_region_failover.store.dataplane.parquet import write_split

    target = store._begin(AttemptId("etl", run, PartitionId("r", 0), 1))
    pieces = write_split(target, iter([tagged(i * 1000, 1000) for i in range(6)]), 0)
    out = []
    for piece in sorted(pieces, key=lambda p: p.order):
        entry = piece.stored.entry
        body = store.objects.get(store.layout.cas_object(entry.sha256))
        assert body is not None
        table = pq.read_table(io.BytesIO(body))
        assert table.num_rows == piece.rows and "__region_failover_subpartition" not in table.column_names
        out.append((entry.subpartition, table.column("id").to_pylist(), entry.sha256))
    return out


def test_a_keyed_task_writes_each_subpartition_through_its_own_encoder_without_a_sort(
        store: ResultStore, monkeypatch: pytest.MonkeyPatch) -> None:
    """No sort of the task's rows: each subpartition's rows keep their input order, one subpartition per object,
    the same bytes again; with what the open encoders may hold made tiny, objects close early and still hold
    exactly their subpartition's rows, in order."""
    from airflow_region_failover.store.dataplane import parquet

    objects = _split_objects(store, "run")
    assert [sub for sub, _, _ in objects] == [0, 1, 2]
    for sub, ids, _ in objects:
        assert ids == [i for i in range(6000) if i * 7 % 3 == sub]
    assert [sha for _, _, sha in _split_objects(store, "again")] == [sha for _, _, sha in objects]
    monkeypatch.setattr(parquet, "SPLIT_HELD_BYTES", 1)
    small = _split_objects(store, "bounded")
    assert len(small) > 3
    for sub in range(3):
        assert [i for s, ids, _ in small if s == sub for i in ids] == [i for i in range(6000) if i * 7 % 3 == sub]


def test_a_nullable_struct_with_a_field_that_is_never_null_on_its_own_is_written(store: ResultStore) -> None:
    """Spark hands a null struct over as nulls in each of its fields' slots, also where a field is declared
    non-nullable (``IF(id % 7 = 0, NULL, named_struct('q', id))``): Parquet must store those fields as optional
    (pyarrow refused with "Column 'q' is declared non-nullable but contains nulls")."""
    inner = pa.struct([pa.field("q", pa.int64(), nullable=False)])
    values = pa.StructArray.from_arrays([pa.array([1, None, 3], pa.int64())], fields=list(inner),
                                        mask=pa.array([False, True, False]))
    table = pa.table({"maybe": values, "items": pa.array([[{"q": 1}], [None], []], pa.list_(inner))})
    manifest, _ = store.write_arrow(table, AttemptId("etl", "structs", PartitionId("r", 0), 1))
    back = store.read_arrow(store.manifest("etl", "structs", PartitionId("r", 0)))
    assert manifest.row_count == 3 and back.to_pylist() == table.to_pylist()


def test_a_cuts_integer_keys_are_delta_encoded_without_a_dictionary() -> None:
    """The Python path writes a keyed result's integer keys as the JVM path does (store/dataplane/local_write.py,
    ``integer_key_paths``): ``DELTA_BINARY_PACKED``, never a dictionary, even where the sample would pick one (7 rows
    per key: 1/7 distinct); a string key, and a column that is not a key, keep the sample's choice."""
    from airflow_region_failover.store.dataplane.encoding import ObjectEncoder
    from airflow_region_failover.store.dataplane.types import Cut

    day = pa.array(range(7_000), pa.int32()).cast(pa.date32())
    batch = pa.record_batch({"k": pa.array([i // 7 for i in range(7_000)], pa.int64()), "day": day,
                             "code": pa.array([i % 3 for i in range(7_000)], pa.int64()),
                             "name": pa.array([str(i % 5) for i in range(7_000)])})
    encoder = ObjectEncoder(1 << 30, Cut(("k", "day", "name"), 128, 4).codec)
    encoder.add(batch)
    [(body, rows)] = encoder.finish()
    meta = pq.read_metadata(pa.BufferReader(body))
    found = {meta.row_group(0).column(i).path_in_schema: set(meta.row_group(0).column(i).encodings)
             for i in range(meta.num_columns)}
    for key in ("k", "day"):
        assert "DELTA_BINARY_PACKED" in found[key] and not found[key] & {"PLAIN_DICTIONARY", "RLE_DICTIONARY"}, found
    assert {"RLE_DICTIONARY"} <= found["code"] and {"RLE_DICTIONARY"} <= found["name"], found
    assert rows == 7_000 and pq.read_table(pa.BufferReader(body)).equals(pa.Table.from_batches([batch]))

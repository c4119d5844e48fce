"""Content-defined chunks of a sorted (sub)partition, and a deterministic Parquet encoding of each chunk.

Rules (pure: pyarrow, numpy and pandas only — no S3, no Spark):

* Input: the record batches of one (sub)partition sorted by its cluster key, ties broken by the remaining columns
  (:func:`sort_order`), so the row sequence is a function of the set of rows alone.
* Every row gets a 64-bit hash of its cluster-key values only (:func:`key_hashes`): it depends neither on the
  row's position nor on its other columns. A chunk ends before row ``i`` when ``hash_i & mask == 0``, row ``i``
  starts a new key (its hash differs from row ``i-1``'s: equal keys stay together), and the chunk already has
  ``min_rows`` rows; a chunk is cut at ``max_rows`` rows whatever the hashes say (:func:`cut_points`).
  Hence cut points follow the key values: an *updated* row (same key, other columns changed) changes only the
  chunk holding it; an inserted or deleted row changes the chunk around it (two when it is a cut point itself);
  a cut moved by ``min_rows``/``max_rows`` falls back in step at the next hash cut point.
* The mask has ``bits = round(log2(target_bytes / row_bytes))`` bits (:meth:`ChunkPolicy.bounds`), ``row_bytes``
  being the Arrow bytes per row of the first batch (or ``ChunkPolicy.rows`` given directly): a power of two, so
  a small change of mean row size between runs keeps the same mask (a change across a rounding step cuts every
  chunk anew once). ``min_rows = mean/4``, ``max_rows = 4*mean`` with ``mean = 2**bits`` rows.
* :func:`encode`: one Parquet file per chunk with fixed writer settings (:data:`WRITER_SETTINGS`, one row group,
  the table's chunks combined first so the input batch layout cannot move page boundaries, dictionary encoding
  chosen from the chunk's own values): the same rows and schema give the same bytes under the same pyarrow
  version (whose ``created_by`` string is in the footer: an upgrade re-encodes every chunk once).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import numpy as np
    import pyarrow as pa

DEFAULT_TARGET_BYTES = 8 * 1024 * 1024
"""Mean Arrow (uncompressed) bytes of a chunk; its Parquet file is smaller by the compression ratio."""

WRITER_SETTINGS: dict[str, Any] = {
    "compression": "snappy", "version": "2.6", "data_page_version": "1.0", "data_page_size": 1024 * 1024,
    "write_statistics": True, "write_page_index": False, "write_page_checksum": False, "store_schema": True,
}
"""Fixed Parquet writer settings of a chunk (Snappy like the plain path); nothing in them depends on time."""

DICTIONARY_MAX_DISTINCT = 0.5
"""A column is dictionary-encoded only if at most this share of its sampled values is distinct."""

DICTIONARY_SAMPLE_ROWS = 4096
"""Rows of a chunk (its first) the dictionary choice looks at: counting distinct values over a whole chunk cost
more than encoding it (measured: 4.2 of 4.8 s on 64 MB)."""


@dataclass(frozen=True)
class ChunkPolicy:
    """How big chunks are: ``target_bytes`` mean Arrow bytes, or ``rows`` mean rows when set (> 0)."""

    target_bytes: int = DEFAULT_TARGET_BYTES
    rows: int = 0

    def __post_init__(self) -> None:
        if self.target_bytes < 1 or self.rows < 0:
            raise ValueError(f"chunk policy needs target_bytes >= 1 and rows >= 0, got {self}")

    def bounds(self, row_bytes: float) -> tuple[int, int, int]:
        """``(bits, min_rows, max_rows)`` for rows of ``row_bytes`` Arrow bytes (module rule)."""
        mean = self.rows or self.target_bytes / max(row_bytes, 1e-9)
        bits = max(0, min(40, round(math.log2(max(mean, 1.0)))))
        rows = 1 << bits
        return bits, max(1, rows // 4), rows * 4


def sort_order(columns: Sequence[str], cluster_by: Sequence[str]) -> list[str]:
    """The total order of a clustered (sub)partition: the cluster key, then every other column by name order."""
    return [*cluster_by, *sorted(c for c in columns if c not in cluster_by)]


def key_hashes(batch: pa.RecordBatch | pa.Table, cluster_by: Sequence[str]) -> np.ndarray:
    """A ``uint64`` per row hashing only its ``cluster_by`` values (pandas' ``hash_pandas_object``: a fixed-key
    SipHash for strings and objects, a fixed integer mix for numbers — the same in every process and run)."""
    import pandas as pd

    frame = batch.select(list(cluster_by)).to_pandas()
    hashes: np.ndarray = pd.util.hash_pandas_object(frame, index=False).to_numpy(dtype="uint64")
    return hashes


def cut_points(hashes: np.ndarray, previous: int | None, carried: int, bounds: tuple[int, int, int]) -> tuple[
        list[int], int]:
    """Where to cut a batch whose rows hash to ``hashes``: positions ``i`` (a chunk ends before row ``i``) and the
    rows left in the open chunk. ``previous`` is the last hash of the batch before (``None``: none), ``carried``
    the rows the open chunk already holds from earlier batches (module rule)."""
    import numpy as np

    bits, min_rows, max_rows = bounds
    n = len(hashes)
    mask = np.uint64((1 << bits) - 1)
    starts_key = np.empty(n, dtype=bool)
    starts_key[0] = previous is None or int(hashes[0]) != previous
    starts_key[1:] = hashes[1:] != hashes[:-1]
    candidates = np.flatnonzero(((hashes & mask) == 0) & starts_key)
    cuts: list[int] = []
    start = -carried
    while True:
        at = int(np.searchsorted(candidates, start + min_rows))
        natural = int(candidates[at]) if at < len(candidates) else n
        forced = start + max_rows
        if natural < n and natural <= forced:
            start = natural
        elif forced < n:
            start = forced
        else:
            return cuts, n - start
        cuts.append(start)


def chunk_batches(batches: Iterable[pa.RecordBatch], cluster_by: Sequence[str],
                  policy: ChunkPolicy = ChunkPolicy()) -> Iterator[pa.Table]:
    """The rows of ``batches`` (sorted, module rule) as consecutive chunk tables cut at content-defined points."""
    import pyarrow as pa

    bounds: tuple[int, int, int] | None = None
    pending: list[pa.RecordBatch] = []
    carried = 0
    previous: int | None = None
    for batch in batches:
        if batch.num_rows == 0:
            continue
        if bounds is None:
            bounds = policy.bounds(batch.nbytes / batch.num_rows)
        hashes = key_hashes(batch, cluster_by)
        cuts, carried_after = cut_points(hashes, previous, carried, bounds)
        begin = 0
        for cut in cuts:
            if cut > begin:
                pending.append(batch.slice(begin, cut - begin))
            if pending:
                yield pa.Table.from_batches(pending)
            pending, begin = [], cut
        pending.append(batch.slice(begin))
        carried, previous = carried_after, int(hashes[-1])
    if pending:
        yield pa.Table.from_batches(pending)


def dictionary_columns(table: pa.Table | pa.RecordBatch) -> list[str]:
    """Flat columns worth dictionary encoding: at most :data:`DICTIONARY_MAX_DISTINCT` of their values distinct
    among the first :data:`DICTIONARY_SAMPLE_ROWS` rows (ids, measures and hashes are mostly unique: encoding them
    as a dictionary first only costs CPU before Parquet falls back to plain; a function of the rows, so
    deterministic). Nested columns are written plain. Used for chunks and for the plain writer's first batch."""
    import pyarrow.compute as pc

    chosen = []
    sample = table.slice(0, DICTIONARY_SAMPLE_ROWS)
    for column_field, column in zip(sample.schema, sample.columns, strict=True):
        if column_field.type.num_fields or len(column) == 0:
            continue
        try:
            distinct = pc.count_distinct(column, mode="all").as_py()
        except Exception:  # a type without hashing support: plain encoding
            continue
        if distinct <= DICTIONARY_MAX_DISTINCT * len(column):
            chosen.append(column_field.name)
    return chosen


def encode(table: pa.Table) -> bytes:
    """One chunk as a complete Parquet file body (module rule: same rows and schema -> same bytes)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    whole = table.combine_chunks()
    schema = storable(whole.schema)
    if schema != whole.schema:
        whole = whole.cast(schema)
    sink = pa.BufferOutputStream()
    pq.write_table(whole, sink, row_group_size=max(1, whole.num_rows), use_dictionary=dictionary_columns(whole),
                   **WRITER_SETTINGS)
    return bytes(sink.getvalue().to_pybytes())


def storable(schema: pa.Schema) -> pa.Schema:
    """``schema`` with every field below a nullable struct (or a struct below one) made nullable: Spark hands a null
    struct over with nulls in each of its fields' slots, also in a field declared never null on its own, which
    Parquet must then store as optional (every writer of the store encodes with this schema)."""
    import pyarrow as pa

    return pa.schema([_relaxed(f, False) for f in schema], metadata=schema.metadata)


def _relaxed(field: pa.Field, forced: bool) -> pa.Field:
    import pyarrow as pa

    nullable = field.nullable or forced
    kind = field.type
    if pa.types.is_struct(kind):
        kind = pa.struct([_relaxed(kind.field(i), nullable) for i in range(kind.num_fields)])
    elif pa.types.is_list(kind) or pa.types.is_large_list(kind):
        maker = pa.list_ if pa.types.is_list(kind) else pa.large_list
        kind = maker(_relaxed(kind.value_field, False))
    elif pa.types.is_map(kind):
        kind = pa.map_(kind.key_field, _relaxed(kind.item_field, False))
    return field.with_type(kind).with_nullable(nullable)


def as_schema(batch: pa.RecordBatch, schema: pa.Schema) -> pa.RecordBatch:
    """``batch`` as ``schema`` (the same types up to nullability)."""
    import pyarrow as pa

    return pa.RecordBatch.from_arrays([column.cast(f.type) for column, f in zip(batch.columns, schema, strict=True)],
                                      schema=schema)

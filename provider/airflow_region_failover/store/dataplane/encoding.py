"""How Arrow record batches become bounded Parquet object bodies, and how a keyed task's batches are split by
subpartition.

Rules (:class:`ObjectEncoder`, :func:`encode_objects`): batches (sliced when one alone holds more than the row-group
limit) are gathered into row groups of about :data:`ROW_GROUP_BYTES` Arrow bytes (at most ``max_object_bytes``); an
object is closed after the row group that brings it to ``max_object_bytes``; dictionary encoding is used only for
the columns :func:`.chunking.dictionary_columns` picks from the first batch; compression and column encodings as the
:class:`Codec` says (results: Snappy, Spark's default; checkpoint state runs:
:func:`~airflow_region_failover.checkpoint.storage.run_codec`); a field below a nullable struct is stored as optional
even where the schema says it is never null on its own (:func:`.chunking.storable`: a null struct comes with nulls in
each of its fields' slots). Only the object being encoded is held in memory. Every cut is made at Arrow/Parquet byte
counts of the rows, so the same rows in the same order give the same bytes.

Splitting (:func:`split_batch`): a batch tagged with :data:`SUBPARTITION_COLUMN` becomes one slice per
subpartition, rows in their input order (a stable sort of the batch by its tag, in Arrow; none for a batch already
in tag order), the tag column dropped.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from airflow_region_failover.store.dataplane.chunking import as_schema, dictionary_columns, storable

if TYPE_CHECKING:
    import pyarrow as pa

SUBPARTITION_COLUMN = "__region_failover_subpartition"
"""The column a keyed write tags rows with (never stored)."""
ROW_GROUP_BYTES = 64 * 1024 * 1024
"""Arrow bytes gathered into one Parquet row group (Spark hands over batches of ~10k-65k rows; one row group per
batch would restart dictionary encoding and statistics every few MB: measured 1.3x the encoding CPU)."""

Encoded = tuple["pa.Buffer", int]
"""One finished object: its Parquet body and its row count."""


@dataclass(frozen=True)
class Codec:
    """How an object's pages are compressed (``compression`` at ``level``: ``None`` is the codec's default); with
    ``delta_integers``, every integer column not dictionary-encoded is written ``DELTA_BINARY_PACKED`` (a sorted
    key column becomes small differences, bit-packed; an unsorted one costs about what plain does); the
    ``delta_keys`` (a keyed write's ``partition_by``) that Parquet stores as integers are written
    ``DELTA_BINARY_PACKED`` without a dictionary, as the JVM path writes them (:func:`.local_write.integer_key_paths`:
    a key in its producer's order takes fewer bytes as deltas than as a dictionary's ids); without ``statistics``, no
    min/max per page and column chunk (for objects always read whole). Fixed settings and choices made from the
    schema and the first batch only: the same rows give the same bytes."""

    compression: str = "snappy"
    level: int | None = None
    delta_integers: bool = False
    statistics: bool = True
    delta_keys: tuple[str, ...] = ()

    def writer_options(self, schema: pa.Schema, dictionary: list[str]) -> dict[str, Any]:
        """The :class:`pyarrow.parquet.ParquetWriter` options for ``schema`` with ``dictionary`` columns (less the
        integer ``delta_keys``)."""
        import pyarrow as pa

        keys = [f.name for f in schema if f.name in self.delta_keys and arrow_integer_stored(f.type)]
        dictionary = [name for name in dictionary if name not in keys]
        options: dict[str, Any] = {"compression": self.compression, "use_dictionary": dictionary,
                                   "write_statistics": self.statistics}
        if self.level is not None:
            options["compression_level"] = self.level
        delta = dict.fromkeys(keys, "DELTA_BINARY_PACKED")
        if self.delta_integers:
            delta.update({f.name: "DELTA_BINARY_PACKED" for f in schema
                          if pa.types.is_integer(f.type) and f.name not in dictionary})
        if delta:
            options["column_encoding"] = delta
        return options


def arrow_integer_stored(kind: pa.DataType) -> bool:
    """Whether pyarrow's Parquet writer stores an Arrow type as an INT32 or INT64 (integers, dates, timestamps)."""
    import pyarrow as pa

    return bool(pa.types.is_integer(kind) or pa.types.is_date(kind) or pa.types.is_timestamp(kind))


RESULTS = Codec()
"""Result objects: Snappy, dictionary where it pays (what Spark writes and every reader expects)."""


class ObjectEncoder:
    """Encodes one stream of batches, pushed one at a time, into bounded Parquet objects (module rule)."""

    def __init__(self, max_object_bytes: int, codec: Codec = RESULTS) -> None:
        self.max_object_bytes, self.codec = max_object_bytes, codec
        self.limit = min(ROW_GROUP_BYTES, max_object_bytes)
        self._pending: list[pa.RecordBatch] = []
        self.pending_bytes = 0
        self._chosen: list[str] | None = None
        self._schema: pa.Schema | None = None
        self._sink: pa.BufferOutputStream | None = None
        self._writer: object = None
        self._rows = 0

    @property
    def held_bytes(self) -> int:
        """Arrow bytes waiting for the next row group plus the encoded bytes of the open object."""
        return self.pending_bytes + (self._sink.tell() if self._sink is not None else 0)

    def add(self, batch: pa.RecordBatch) -> list[Encoded]:
        """Take ``batch``; returns the objects it completed."""
        if self._chosen is None:
            self._schema, self._chosen = storable(batch.schema), dictionary_columns(batch)
        if batch.schema != self._schema:
            batch = as_schema(batch, self._schema)
        done: list[Encoded] = []
        for piece in _sliced(batch, self.limit):
            self._pending.append(piece)
            self.pending_bytes += piece.nbytes
            if self.pending_bytes >= self.limit:
                done.extend(self.flush())
        return done

    def flush(self) -> list[Encoded]:
        """Write the pending batches as one row group; returns the object if that closed it."""
        import pyarrow as pa
        import pyarrow.parquet as pq

        if not self._pending:
            return []
        group = pa.Table.from_batches(self._pending)
        self._pending, self.pending_bytes = [], 0
        if self._sink is None:
            self._sink = pa.BufferOutputStream()
            assert self._schema is not None and self._chosen is not None
            self._writer = pq.ParquetWriter(self._sink, self._schema,
                                            **self.codec.writer_options(self._schema, self._chosen))
        self._writer.write_table(group, row_group_size=group.num_rows)  # type: ignore[attr-defined]
        self._rows += group.num_rows
        return [self.close()] if self._sink.tell() >= self.max_object_bytes else []

    def close(self) -> Encoded:
        """Finish the open object (its pending batches stay for the next one)."""
        assert self._sink is not None, "no object is open"
        self._writer.close()  # type: ignore[attr-defined]
        done = (self._sink.getvalue(), self._rows)
        self._sink, self._writer, self._rows = None, None, 0
        return done

    def finish(self) -> list[Encoded]:
        """The last objects: pending batches as a row group, then the open object closed."""
        done = self.flush()
        if self._sink is not None:
            done.append(self.close())
        return done


def encode_objects(batches: Iterator[pa.RecordBatch], max_object_bytes: int,
                   codec: Codec = RESULTS) -> Iterator[Encoded]:
    """``batches`` encoded as Parquet bodies of about ``max_object_bytes`` each: ``(body, rows)`` (module rule)."""
    encoder = ObjectEncoder(max_object_bytes, codec)
    for batch in batches:
        yield from encoder.add(batch)
    yield from encoder.finish()


def _sliced(batch: pa.RecordBatch, limit: int) -> Iterator[pa.RecordBatch]:
    """``batch``, cut into slices of about ``limit`` Arrow bytes when it holds more."""
    if batch.nbytes <= limit or batch.num_rows < 2:
        yield batch
        return
    step = max(1, batch.num_rows * limit // batch.nbytes)
    for start in range(0, batch.num_rows, step):
        yield batch.slice(start, step)


def row_groups(batches: Iterator[pa.RecordBatch], limit: int) -> Iterator[pa.Table]:
    """Consecutive batches gathered into tables of at least ``limit`` Arrow bytes (the last may be smaller)."""
    import pyarrow as pa

    pending: list[pa.RecordBatch] = []
    size = 0
    for batch in batches:
        pending.append(batch)
        size += batch.nbytes
        if size >= limit:
            yield pa.Table.from_batches(pending)
            pending, size = [], 0
    if pending:
        yield pa.Table.from_batches(pending)


def split_batch(batch: pa.RecordBatch) -> list[tuple[int, pa.RecordBatch]]:
    """``batch`` as ``(subpartition, slice without the tag column)`` in subpartition order (module rule)."""
    import numpy as np
    import pyarrow.compute as pc

    if batch.num_rows == 0:
        return []
    subs = batch.column(SUBPARTITION_COLUMN).to_numpy(zero_copy_only=False)
    if np.any(subs[1:] < subs[:-1]):
        order = pc.sort_indices(batch.column(SUBPARTITION_COLUMN))  # stable: rows keep their order
        batch, subs = batch.take(order), subs[order.to_numpy()]
    body = batch.drop_columns([SUBPARTITION_COLUMN])
    starts = [0, *(np.flatnonzero(np.diff(subs)) + 1).tolist()]
    return [(int(subs[begin]), body.slice(begin, end - begin))
            for begin, end in zip(starts, [*starts[1:], batch.num_rows], strict=True)]


def split_batches(batches: Iterator[pa.RecordBatch]) -> Iterator[tuple[int, pa.RecordBatch]]:
    """Every batch split (:func:`split_batch`), in order: batches sorted by tag give its runs in order."""
    for batch in batches:
        yield from split_batch(batch)

"""Keyed state as immutable sorted runs, in the manner of an LSM tree: what changed, and how runs merge. Arrow only
(no boto3, Spark or Airflow): every rule here is tested on its own.

Flink's incremental checkpoints on RocksDB: "each checkpoint contains only the state change since the
previous checkpoint ... we also must record changes that delete state in an incremental checkpoint"; RocksDB
writes "all entries sorted by their key" into immutable sstables, and "the newer mappings ... overwrite mappings
for keys that also existed in [older tables]. For key 7, we can also see a delete (or antimatter) entry that, when
merged, results in omitting key 7 in the merge result."

Rules:

* A state table has the declared state columns plus :data:`KEY_GROUP` (the row's key group, computed by the
  engine from the key: VLDB'17's "atomic unit for re-allocation"); its key columns identify a row: never null, never
  twice (:func:`normalise` refuses either, naming the step). Tables are kept sorted by ``(key group, key)``.
* A *run* is a state table plus :data:`DELETED`: a tombstone row carries the key and nulls. :func:`diff` of the
  previous and the current state is one run with the changed keys only: rows whose key is new or whose values
  differ (upserts) and a tombstone per key that disappeared (deletions). A *base* run (:func:`base_run`) is a
  whole state without tombstones.
* :func:`merge` of runs, oldest first, keeps for each key its row from the newest run holding it; with
  ``drop_tombstones`` (a merge that includes the base, so nothing older remains) deleted keys vanish, otherwise
  their tombstones stay (a merge of newer runs must still shadow the older ones). :func:`restore` merges every run
  of a checkpoint and returns the live state.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from airflow_region_failover.exceptions import StepOutputError

if TYPE_CHECKING:
    import pyarrow as pa

KEY_GROUP = "__rf_key_group"
"""The column holding each state row's key group (never a user column)."""
DELETED = "__rf_deleted"
"""The column marking tombstones in a run."""
_SEQ = "__rf_seq"


def normalise(table: pa.Table, key: Sequence[str], where: str) -> pa.Table:
    """``table`` sorted by ``(key group, key)``; :class:`StepOutputError` naming ``where`` when a key column is
    missing or null, or a key occurs twice."""
    import pyarrow.compute as pc

    missing = [c for c in (*key, KEY_GROUP) if c not in table.column_names]
    if missing:
        raise StepOutputError(f"{where}: the state has no column {missing[0]!r}; return every state_key column")
    for column in key:
        if table.column(column).null_count:
            raise StepOutputError(f"{where}: state_key column {column!r} is null in {table.column(column).null_count} "
                                  "rows; every state row needs a key")
    ordered = table.sort_by([(KEY_GROUP, "ascending"), *((c, "ascending") for c in key)])
    if ordered.num_rows > 1:
        same = None  # a key twice has one key group, so its rows are neighbours once sorted
        for column in key:
            values = ordered.column(column)
            equal = pc.equal(values.slice(1), values.slice(0, ordered.num_rows - 1))
            same = equal if same is None else pc.and_(same, equal)
        if same is not None and pc.any(same).as_py():
            raise StepOutputError(f"{where}: the state holds a state_key more than once; return one row per key")
    return ordered


def base_run(state: pa.Table) -> pa.Table:
    """The whole ``state`` as a run (no tombstones)."""
    import pyarrow as pa

    return state.append_column(DELETED, pa.array([False] * state.num_rows, pa.bool_()))


def diff(previous: pa.Table, current: pa.Table, key: Sequence[str]) -> pa.Table:
    """The run of the keys that changed from ``previous`` to ``current`` (both normalised, same schema): upserts
    and tombstones (module rule), sorted by ``(key group, key)``. Rows are matched by key (:func:`_positions`),
    then their values compared column by column."""
    import numpy as np
    import pyarrow as pa
    import pyarrow.compute as pc

    keys = list(key)
    if previous.num_rows == 0:
        return base_run(current)
    values = [c for c in current.column_names if c not in (*keys, KEY_GROUP)]
    old = _positions(current, previous, keys)
    known = pc.is_valid(old)
    changed = _changed(current, previous.take(pc.fill_null(old, 0)), values, known)
    upserts = current.filter(changed)
    matched = np.zeros(previous.num_rows, dtype=bool)
    matched[pc.drop_null(old).to_numpy()] = True
    gone = previous.filter(pa.array(~matched))
    run = pa.concat_tables([base_run(upserts), _tombstones(gone, current.schema, keys)])
    return run.sort_by([(KEY_GROUP, "ascending"), *((c, "ascending") for c in keys)])


def _positions(current: pa.Table, previous: pa.Table, keys: Sequence[str]) -> pa.Array:
    """For each row of ``current``, the number of the row of ``previous`` with its key, or null: row ``i`` when both
    hold the same keys in the same order (sorted, so the usual case of a state whose keys did not change), else a
    hash lookup for one key column, a join (carrying only keys and row numbers) for several."""
    import pyarrow as pa
    import pyarrow.compute as pc

    if current.num_rows == previous.num_rows and all(
            current.column(k).equals(previous.column(k)) for k in keys):
        return pa.array(range(current.num_rows), pa.int64())
    if len(keys) == 1:
        return pc.index_in(current.column(keys[0]), value_set=previous.column(keys[0]).combine_chunks())
    now = _numbered(current, keys, _SEQ)
    then = _numbered(previous, keys, "\0old")
    joined = now.join(then, keys, join_type="left outer", use_threads=False).sort_by(_SEQ)
    return joined.column("\0old").combine_chunks()


def _numbered(table: pa.Table, keys: Sequence[str], name: str) -> pa.Table:
    """The key columns of ``table`` and each row's number as ``name``."""
    import pyarrow as pa

    return table.select(list(keys)).append_column(name, pa.array(range(table.num_rows), pa.int64()))


def _changed(now: pa.Table, then: pa.Table, values: Sequence[str], known: pa.Array) -> pa.Array:
    """Per row: its key is new (not ``known``), or one of its ``values`` differs from the old row's (nulls equal
    nulls)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    changed = pc.invert(known)
    for column in values:
        new, old = now.column(column), then.column(column)
        try:
            same = pc.fill_null(pc.equal(new, old), False)
        except (pa.ArrowNotImplementedError, pa.ArrowInvalid):  # nested types: compare as Python values
            same = pa.array([a == b for a, b in zip(new.to_pylist(), old.to_pylist(), strict=True)], pa.bool_())
        both_null = pc.and_(pc.is_null(new), pc.is_null(old))
        changed = pc.or_(changed, pc.invert(pc.or_(same, both_null)))
    return changed


def _tombstones(gone: pa.Table, schema: pa.Schema, keys: Sequence[str]) -> pa.Table:
    """A tombstone per row of ``gone``: its key and key group, nulls elsewhere, :data:`DELETED` true."""
    import pyarrow as pa

    columns = [gone.column(f.name) if f.name in (*keys, KEY_GROUP) else pa.nulls(gone.num_rows, f.type)
               for f in schema]
    table = pa.Table.from_arrays(columns, schema=schema)
    return table.append_column(DELETED, pa.array([True] * gone.num_rows, pa.bool_()))


def merge(runs: Sequence[pa.Table], key: Sequence[str], drop_tombstones: bool) -> pa.Table:
    """One run holding, for each key, its row from the newest of ``runs`` (oldest first) that has it; deleted keys
    dropped when ``drop_tombstones`` (module rule)."""
    import pyarrow.compute as pc

    keys = list(key)
    if not runs:
        raise ValueError("merge needs at least one run")
    kept = _newest(runs, keys[0]) if len(keys) == 1 else _newest_by_join(runs, keys)
    if drop_tombstones:
        kept = kept.filter(pc.invert(kept.column(DELETED)))
    return kept.sort_by([(KEY_GROUP, "ascending"), *((c, "ascending") for c in keys)])


def _newest(runs: Sequence[pa.Table], key: str) -> pa.Table:
    """Newest run first, each older run's rows whose key no newer run holds (one key column: hash lookups)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    kept: list[pa.Table] = []
    seen: pa.Array | None = None
    for run in reversed(runs):
        run = run.select(runs[0].column_names)
        part = run if seen is None else run.filter(pc.invert(pc.is_in(run.column(key), value_set=seen)))
        kept.append(part)
        keys = part.column(key).combine_chunks()
        seen = keys if seen is None else pa.concat_arrays([seen, keys])
    return pa.concat_tables(kept)


def _newest_by_join(runs: Sequence[pa.Table], keys: Sequence[str]) -> pa.Table:
    """:func:`_newest` for several key columns: the newest run number per key by aggregation, rows by a join that
    carries only keys and row numbers."""
    import pyarrow as pa

    every = pa.concat_tables([run.select(runs[0].column_names) for run in runs])
    which = pa.concat_arrays([pa.array([i] * run.num_rows, pa.int32()) for i, run in enumerate(runs)])
    index = _numbered(every, keys, "\0row").append_column(_SEQ, which)
    newest = index.group_by(list(keys), use_threads=False).aggregate([(_SEQ, "max")]).rename_columns([*keys, _SEQ])
    rows = index.join(newest, [*keys, _SEQ], join_type="inner", use_threads=False).column("\0row")
    return every.take(rows)


def restore(runs: Sequence[pa.Table], key: Sequence[str]) -> pa.Table:
    """The live state a checkpoint's ``runs`` (oldest first) hold: their merge without tombstones or the
    :data:`DELETED` column."""
    return merge(runs, key, drop_tombstones=True).drop_columns([DELETED])


def deletes(run: pa.Table) -> int:
    """The number of tombstones in ``run``."""
    import pyarrow.compute as pc

    return int(pc.sum(run.column(DELETED).cast("int64")).as_py() or 0)

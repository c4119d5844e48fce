"""The LSM rules of keyed state on their own (Arrow only): a diff holds exactly the changed keys, and merging a
base with its deltas gives back the state — for any sequence of states (hypothesis).

    state_0 --diff--> delta_1 --diff--> delta_2 ...   restore(base_0, delta_1, ..., delta_n) == state_n
"""

from __future__ import annotations

import itertools

import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from airflow_region_failover.checkpoint import lsm
from airflow_region_failover.exceptions import StepOutputError

KEY = ("k", "j")
SCHEMA = pa.schema([("k", pa.int64()), ("j", pa.string()), ("v", pa.int64()), ("tags", pa.list_(pa.int64())),
                    (lsm.KEY_GROUP, pa.int32())])


def state(rows: dict[tuple[int, str], int | None]) -> pa.Table:
    keys = sorted(rows)
    table = pa.table({"k": [k for k, _ in keys], "j": [j for _, j in keys], "v": [rows[k] for k in keys],
                      "tags": [[rows[k]] if rows[k] is not None else None for k in keys],
                      lsm.KEY_GROUP: [k % 4 for k, _ in keys]}, schema=SCHEMA)
    return lsm.normalise(table, KEY, "step 's'")


states = st.dictionaries(st.tuples(st.integers(0, 20), st.sampled_from(["a", "b"])),
                         st.one_of(st.none(), st.integers(0, 3)), max_size=30)


def test_a_diff_holds_upserts_and_tombstones_only() -> None:
    before = state({(1, "a"): 1, (2, "a"): 2, (3, "a"): 3})
    after = state({(1, "a"): 1, (2, "a"): 5, (4, "b"): None})
    delta = lsm.diff(before, after, KEY)
    rows = {(r["k"], r["j"]): (r["v"], r[lsm.DELETED]) for r in delta.to_pylist()}
    assert rows == {(2, "a"): (5, False), (3, "a"): (None, True), (4, "b"): (None, False)}
    assert lsm.deletes(delta) == 1


@settings(max_examples=60, deadline=None)
@given(st.lists(states, min_size=1, max_size=6))
def test_restoring_a_base_and_its_deltas_gives_the_last_state(sequence: list[dict]) -> None:
    tables = [state(s) for s in sequence]
    runs = [lsm.base_run(tables[0])] + [lsm.diff(a, b, KEY) for a, b in itertools.pairwise(tables)]
    assert lsm.restore(runs, KEY).to_pylist() == tables[-1].to_pylist()
    # merging the newest deltas (tombstones kept) first changes nothing (a partial compaction)
    if len(runs) > 2:
        merged = lsm.merge(runs[1:], KEY, drop_tombstones=False)
        assert lsm.restore([runs[0], merged], KEY).to_pylist() == tables[-1].to_pylist()


def test_a_merge_keeps_tombstones_unless_it_includes_the_base() -> None:
    before = state({(1, "a"): 1})
    delta = lsm.diff(before, state({}), KEY)
    assert lsm.merge([delta], KEY, drop_tombstones=False).num_rows == 1
    assert lsm.merge([lsm.base_run(before), delta], KEY, drop_tombstones=True).num_rows == 0


def test_a_state_needs_unique_non_null_keys() -> None:
    table = pa.table({"k": [1, 1], "j": ["a", "a"], lsm.KEY_GROUP: pa.array([0, 0], pa.int32())})
    with pytest.raises(StepOutputError, match=r"step 's'.*more than once"):
        lsm.normalise(table, KEY, "step 's'")
    nulls = pa.table({"k": [1, None], "j": ["a", "b"], lsm.KEY_GROUP: pa.array([0, 0], pa.int32())})
    with pytest.raises(StepOutputError, match="'k' is null"):
        lsm.normalise(nulls, KEY, "step 's'")
    with pytest.raises(StepOutputError, match="no column 'j'"):
        lsm.normalise(table.drop_columns(["j"]), KEY, "step 's'")


def single(rows: dict[int, int | None]) -> pa.Table:
    keys = sorted(rows)
    table = pa.table({"k": keys, "v": [rows[k] for k in keys], lsm.KEY_GROUP: [k % 4 for k in keys]},
                     schema=pa.schema([("k", pa.int64()), ("v", pa.int64()), (lsm.KEY_GROUP, pa.int32())]))
    return lsm.normalise(table, ("k",), "step 's'")


@settings(max_examples=60, deadline=None)
@given(st.lists(st.dictionaries(st.integers(0, 30), st.one_of(st.none(), st.integers(0, 3)), max_size=30),
                min_size=1, max_size=6))
def test_one_key_column_takes_the_hash_lookup_path_with_the_same_results(sequence: list[dict]) -> None:
    tables = [single(s) for s in sequence]
    runs = [lsm.base_run(tables[0])] + [lsm.diff(a, b, ("k",)) for a, b in itertools.pairwise(tables)]
    assert lsm.restore(runs, ("k",)).to_pylist() == tables[-1].to_pylist()
    if len(runs) > 2:
        merged = lsm.merge(runs[1:], ("k",), drop_tombstones=False)
        assert lsm.restore([runs[0], merged], ("k",)).to_pylist() == tables[-1].to_pylist()

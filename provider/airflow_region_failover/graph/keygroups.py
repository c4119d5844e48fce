"""Key groups: how the keys of a keyed exchange are assigned to consumer subtasks, stably across parallelisms.

Flink's ``KeyGroupRangeAssignment`` (the VLDB'17 state-management paper, "rescaling"): a row's key hashes into one
of ``max_parallelism`` *key groups* — here Spark's own ``pmod(hash(key columns), max_parallelism)``, the
expression behind ``df.repartition(max_parallelism, *keys)``, so a key group is exactly the Spark partition that
repartitioning would put the row in. Consumer subtask ``i`` of ``parallelism`` owns the contiguous key-group
range :func:`key_group_range`; key group ``g`` belongs to subtask :func:`operator_index` ``g * parallelism //
max_parallelism``. The ranges of one parallelism tile ``[0, max_parallelism)`` without overlap, so a result
written for one consumer parallelism can be read by another: each consumer reads the subpartitions whose ranges
overlap its own and keeps the rows of its key groups.
"""

from __future__ import annotations

from airflow_region_failover.graph.errors import GraphError

DEFAULT_MAX_PARALLELISM = 128
"""Key groups of a keyed exchange unless the edge says otherwise (Flink's default lower bound)."""
UPPER_MAX_PARALLELISM = 32768
"""The largest ``max_parallelism`` (Flink's ``UPPER_BOUND_MAX_PARALLELISM``)."""


def key_group_range(max_parallelism: int, parallelism: int, index: int) -> range:
    """The key groups consumer subtask ``index`` of ``parallelism`` owns (Flink's
    ``computeKeyGroupRangeForOperatorIndex``)."""
    _check(max_parallelism, parallelism)
    if not 0 <= index < parallelism:
        raise GraphError(f"subtask index {index} is outside parallelism {parallelism}")
    start = (index * max_parallelism + parallelism - 1) // parallelism
    end = ((index + 1) * max_parallelism - 1) // parallelism
    return range(start, end + 1)


def operator_index(max_parallelism: int, parallelism: int, key_group: int) -> int:
    """The consumer subtask that owns ``key_group`` (Flink's ``computeOperatorIndexForKeyGroup``)."""
    _check(max_parallelism, parallelism)
    if not 0 <= key_group < max_parallelism:
        raise GraphError(f"key group {key_group} is outside max_parallelism {max_parallelism}")
    return key_group * parallelism // max_parallelism


def _check(max_parallelism: int, parallelism: int) -> None:
    if not 1 <= parallelism <= max_parallelism <= UPPER_MAX_PARALLELISM:
        raise GraphError(f"parallelism {parallelism} and max_parallelism {max_parallelism} need "
                         f"1 <= parallelism <= max_parallelism <= {UPPER_MAX_PARALLELISM}")

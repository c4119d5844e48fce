"""The main demo's aggregate subtasks each get an even share of the join's rows, on real Spark.

    join#0..1 ==BLOCKING, keyed==> aggregate#0..P-1 ==BLOCKING, BROADCAST==> report#0

A keyed exchange sends a row to the subtask that owns its key group (``pmod(hash(keys), max_parallelism)``,
``graph/keygroups.py``). When the key has few values, a subtask may own most of them: the unit of loss of a failure
in it is then most of the step, and its siblings wait for it. The demo's rows are a pure function of their keys, spread
evenly over them at every size, so the shares at the DAG's tiny default size are (about) the shares at any size.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from airflow_region_failover.graph.keygroups import operator_index
from tests.support.examples import example_module
from tests.support.spark import embedded

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def spark() -> Iterator[Any]:
    yield from embedded(shuffle_partitions=2)


def test_each_aggregate_subtask_gets_an_even_share_of_the_join_steps_rows(spark: Any) -> None:
    from pyspark.sql import functions as F

    from airflow_region_failover.job import job_of

    module = example_module("tpch_etl")
    spec = job_of(module.dag)
    assert spec is not None
    edge = next(e for e in spec.graph.edges if (e.source, e.target) == ("join", "aggregate"))
    parallelism = spec.graph.step("aggregate").parallelism
    joined = module.step_join(spark, {"gen_customer": module.customers(spark, 0, module.CUSTOMERS),
                                      "clean_orders": module.clean_orders(module.orders(spark, 0, module.ORDERS)),
                                      "clean_lineitem": module.clean_lineitems(module.lineitems(spark, 0,
                                                                                               module.ORDERS))},
                              None)
    key_group = F.expr(f"pmod(hash({', '.join(edge.partition_by)}), {edge.max_parallelism})")
    counts = {row["g"]: row["n"] for row in joined.groupBy(key_group.alias("g")).agg(F.count("*").alias("n"))
              .collect()}
    per_subtask = [0] * parallelism
    for group, rows in counts.items():
        per_subtask[operator_index(edge.max_parallelism, parallelism, group)] += rows
    shares = [rows / sum(per_subtask) for rows in per_subtask]
    assert max(shares) <= 1.1 / parallelism, (
        f"aggregate's subtasks get {[round(s, 3) for s in shares]} of the rows keyed by {list(edge.partition_by)}")

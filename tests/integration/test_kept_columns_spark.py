"""The columns a persisted result keeps (``columns`` on its edges), on real Spark and a real S3 store (SeaweedFS):
the producer's other columns are never written, its key still cuts the result, a consumer reads the kept columns,
and a declared column the step did not return fails the try naming it.

    p#0 ==BLOCKING, keyed by [k], columns [k, v]==> c(2)
"""

from __future__ import annotations

import secrets
from collections.abc import Iterator
from types import SimpleNamespace
from typing import Any

import pytest

from airflow_region_failover import JobGraphBuilder, PartitionId
from airflow_region_failover.exceptions import StepOutputError
from airflow_region_failover.graph.chains import compute_chains
from airflow_region_failover.job import StepImpl
from airflow_region_failover.spark.compute import compute
from airflow_region_failover.spark.run import SubtaskRun, chain_contexts, current_inputs, input_versions
from airflow_region_failover.spark.store_io import StoreIO
from airflow_region_failover.standalone.seaweedfs import S3Endpoint
from airflow_region_failover.store.result_store import ResultStore
from tests.support.spark import embedded
from tests.support.store import on_server

pytestmark = pytest.mark.integration

DAG, RUN = "kept", "run"


def graph(columns: tuple[str, ...]) -> Any:
    return (JobGraphBuilder().step("p").step("c", parallelism=2)
            .edge("p", "c", exchange="BLOCKING", result="r", partition_by=["k"], columns=columns).build())


@pytest.fixture(scope="module")
def spark() -> Iterator[Any]:
    yield from embedded(shuffle_partitions=2)


@pytest.fixture
def store(s3_server: S3Endpoint) -> ResultStore:
    return on_server(s3_server, f"kept-{secrets.token_hex(4)}")


def produce(spark: Any, store: ResultStore, columns: tuple[str, ...], run_id: str) -> Any:
    """Run producer p#0 of ``graph(columns)``: 20,000 rows of k, v and a wide text column; its manifest."""
    job = graph(columns)
    members = compute_chains(job).of("p").subtasks(0)

    def p(spark: Any, inputs: Any, context: Any) -> Any:
        return spark.range(0, 20_000, 1, 2).selectExpr("id % 97 AS k", "id AS v",
                                                       "repeat(cast(id AS string), 20) AS wide")

    ti = SimpleNamespace(dag_id=DAG, run_id=run_id, try_number=1)
    contexts = chain_contexts(job, members, {}, {"ti": ti, "params": {}})
    io = StoreIO(store)
    current = current_inputs(io, {})
    run = SubtaskRun(job, members, (StepImpl("p", fn=p),), contexts, {}, io, current,
                     input_versions(current, job, members[0], {}), "code")
    (written,) = compute(spark, run)
    return store.manifest(DAG, run_id, PartitionId("r", 0)), written


def test_a_result_keeps_only_its_declared_columns_and_is_still_cut_by_its_key(spark: Any,
                                                                               store: ResultStore) -> None:
    kept, written = produce(spark, store, ("v", "k"), "narrow")
    whole, _ = produce(spark, store, (), "whole")
    assert written.rows == 20_000 == kept.row_count == whole.row_count
    frame = store.read(spark, DAG, "narrow", PartitionId("r", 0))
    assert frame.columns == ["v", "k"]  # the declared order
    assert store.read(spark, DAG, "whole", PartitionId("r", 0)).columns == ["k", "v", "wide"]
    assert kept.total_bytes < whole.total_bytes / 3  # the wide text column was never written (3.5x smaller)
    assert {o.subpartition for o in kept.objects} == {0, 1}  # cut by k for c's two subtasks
    rows = sorted((r.k, r.v) for r in frame.collect())
    assert rows == sorted((v % 97, v) for v in range(20_000))


def test_a_declared_column_the_step_did_not_return_fails_naming_it(spark: Any, store: ResultStore) -> None:
    with pytest.raises(StepOutputError, match=r"step 'p': result 'r' keeps columns \['k', 'nope'\], but the step "
                                              r"returned no column 'nope' \(columns: k, v, wide\); fix "
                                              r"columns=\[\.\.\.\] on the result's edges or the step's output"):
        produce(spark, store, ("k", "nope"), "bad")

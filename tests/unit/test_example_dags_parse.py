"""Parse-time checks of the dags folder: no import errors, every example DAG is a rendered region-failover job,
and parsing is stable (the scheduler and every worker parse the file and must get the same DAG)."""

from __future__ import annotations

import pytest
from airflow.dag_processing.dagbag import DagBag

from airflow_region_failover.job import job_of
from airflow_region_failover.naming import JOB_PARAM, subtask_of
from tests.support.examples import DAGS, example_module

EXAMPLES = {"tpch_etl", "shard_pipeline", "daily_sales", "clickstream_sessions"}


@pytest.fixture(scope="module")
def bag() -> DagBag:
    return DagBag(str(DAGS))


def test_dags_folder_has_no_import_errors(bag: DagBag) -> None:
    assert bag.import_errors == {}
    assert set(bag.dags) >= EXAMPLES


@pytest.mark.parametrize("dag_id", sorted(EXAMPLES))
def test_every_task_is_a_subtask_in_its_region_group(bag: DagBag, dag_id: str) -> None:
    dag = bag.dags[dag_id]
    spec = job_of(dag)
    assert spec is not None and JOB_PARAM in dag.params
    chain_subtasks = sum(spec.graph.step(chain.head).parallelism for chain in spec.chains.chains)
    assert len(dag.tasks) == chain_subtasks <= spec.graph.subtask_count
    for task in dag.tasks:
        assert subtask_of(task.task_id) is not None
        members = spec.names.subtasks(task.task_id)
        assert members is not None and [spec.names.task_id(m) for m in members] == [task.task_id] * len(members)
        assert task.task_group is not None and task.task_group.group_id.startswith("r")


def test_main_demo_documents_fail_once(bag: DagBag) -> None:
    dag = bag.dags["tpch_etl"]
    assert dag.params["fail_once"] is False
    assert "fail_once" in (dag.doc_md or "")
    groups = {gid: sorted(g.children) for gid, g in dag.task_group_dict.items()}
    assert ["aggregate.0"] in groups.values() and ["report.0"] in groups.values()


def test_shard_pipeline_has_one_region_per_shard(bag: DagBag) -> None:
    dag = bag.dags["shard_pipeline"]
    shard_groups = [sorted(g.children) for g in dag.task_group_dict.values() if "summary.0" not in g.children]
    assert shard_groups == [[f"ingest.parse.enrich.{i}"] for i in range(4)]  # each shard's chain: one task


def test_parsing_twice_gives_the_same_serialized_dags(bag: DagBag) -> None:
    from airflow.serialization.serialized_objects import DagSerialization

    again = DagBag(str(DAGS))
    for dag_id in EXAMPLES:
        first = DagSerialization.to_dict(bag.dags[dag_id])["dag"]
        second = DagSerialization.to_dict(again.dags[dag_id])["dag"]
        for volatile in ("fileloc", "relative_fileloc", "last_loaded"):
            first.pop(volatile, None)
            second.pop(volatile, None)
        assert first == second, dag_id


def test_fail_once_fails_aggregate_0_on_its_first_try_only() -> None:
    """The documented demo switch: only ``aggregate#0``, only on try 1, only when ``fail_once`` is true."""
    from airflow_region_failover import StepContext, SubtaskId

    module = example_module("tpch_etl")

    def context(index: int, try_number: int, fail_once: bool) -> StepContext:
        return StepContext(SubtaskId("aggregate", index), 2, False, {}, "tpch_etl", "r", try_number,
                           {"fail_once": fail_once})

    with pytest.raises(RuntimeError, match="injected failure"):
        module.step_aggregate(None, {}, context(0, 1, True))
    for index, try_number, fail_once in ((0, 2, True), (1, 1, True), (0, 1, False)):
        with pytest.raises(Exception) as info:  # no Spark here: it gets past the switch and needs Spark
            module.step_aggregate(None, {}, context(index, try_number, fail_once))
        assert "injected failure" not in str(info.value)


def test_daily_prices_publishes_its_summary_after_both_its_subtasks(bag: DagBag) -> None:
    """catalog#0, catalog#1 ==> summary#0 -> summary.publish (Delta table, append, once per logical date)."""
    dag = bag.dags["daily_prices"]
    spec = job_of(dag)
    assert spec is not None and [p.to_dict() for p in spec.publications] == [
        {"step": "summary", "table": "daily_price_summary", "mode": "append"}]
    assert sorted(dag.get_task("summary.publish").upstream_task_ids) == ["summary.0"]
    assert dag.timetable.expression == "0 0 * * *"

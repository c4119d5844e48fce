"""Rendering a job graph into a DAG: groups, task ids, dependencies and the job document — no scheduler."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from airflow.sdk import DAG

from airflow_region_failover import RegionJob, RegionStepOperator, SubtaskId
from airflow_region_failover.job import JobSpec, job_of
from airflow_region_failover.naming import JOB_PARAM, subtask_of, subtasks_of, task_id_of

ROOT = Path(__file__).resolve().parents[3]


def noop(spark: Any, inputs: Any, context: Any) -> None:
    return None


def build(declare: Callable[[RegionJob], None], **job_kwargs: Any) -> DAG:
    with DAG("render_test", schedule=None) as dag:
        job = RegionJob(**job_kwargs)
        declare(job)
        job.render()
    return dag


def etl(job: RegionJob) -> None:
    """gen -(PIPELINED, POINTWISE)-> clean -(BLOCKING, BROADCAST)-> join -(BLOCKING)-> report."""
    job.step("gen", noop, parallelism=3)
    job.step("clean", noop, parallelism=3)
    job.step("join", noop, parallelism=2)
    job.step("report", noop)
    job.edge("gen", "clean", exchange="PIPELINED", distribution="POINTWISE")
    job.edge("clean", "join", exchange="BLOCKING")
    job.edge("join", "report", exchange="BLOCKING")


def groups(dag: DAG) -> dict[str, list[str]]:
    return {gid: sorted(group.children) for gid, group in dag.task_group_dict.items()}


def upstream(dag: DAG) -> dict[str, list[str]]:
    return {t.task_id: sorted(t.upstream_task_ids) for t in dag.tasks}


def test_one_group_per_region_and_one_task_per_chain_subtask() -> None:
    """gen -> clean (PIPELINED, POINTWISE, 3 = 3) is chained: one task per chain subtask, in its region's group.

        gen#0 -> clean#0 ==+==> join#0 ==+==> report#0       task gen.clean.i runs gen#i and clean#i
        gen#1 -> clean#1 ==+==> join#1 ==/
        gen#2 -> clean#2 ==/
    """
    dag = build(etl)
    assert groups(dag) == {
        "r0": ["gen.clean.0"], "r1": ["gen.clean.1"], "r2": ["gen.clean.2"],
        "r3": ["join.0"], "r4": ["join.1"], "r5": ["report.0"],
    }
    assert all(isinstance(t, RegionStepOperator) for t in dag.tasks)
    assert len(dag.tasks) == 3 + 2 + 1


def test_without_chaining_one_task_per_subtask() -> None:
    dag = build(etl, chaining=False)
    assert groups(dag) == {
        "r0": ["clean.0", "gen.0"], "r1": ["clean.1", "gen.1"], "r2": ["clean.2", "gen.2"],
        "r3": ["join.0"], "r4": ["join.1"], "r5": ["report.0"],
    }
    assert all(isinstance(t, RegionStepOperator) for t in dag.tasks)
    assert len(dag.tasks) == 3 + 3 + 2 + 1


def test_dependencies_of_chain_tasks_mirror_the_edges_outside_the_chain() -> None:
    dag = build(etl)
    assert upstream(dag) == {
        "gen.clean.0": [], "gen.clean.1": [], "gen.clean.2": [],
        "join.0": ["gen.clean.0", "gen.clean.1", "gen.clean.2"],
        "join.1": ["gen.clean.0", "gen.clean.1", "gen.clean.2"],
        "report.0": ["join.0", "join.1"],
    }
    assert all(t.task_id not in t.upstream_task_ids for t in dag.tasks)  # no self-dependency


def test_dependencies_mirror_edges_at_subtask_level() -> None:
    assert upstream(build(etl, chaining=False)) == {
        "gen.0": [], "gen.1": [], "gen.2": [],
        "clean.0": ["gen.0"], "clean.1": ["gen.1"], "clean.2": ["gen.2"],
        "join.0": ["clean.0", "clean.1", "clean.2"], "join.1": ["clean.0", "clean.1", "clean.2"],
        "report.0": ["join.0", "join.1"],
    }


def test_pointwise_fan_in_and_fan_out_follow_flink_mapping() -> None:
    def declare(job: RegionJob) -> None:
        job.step("a", noop, parallelism=4)
        job.step("b", noop, parallelism=2)
        job.step("c", noop, parallelism=4)
        job.edge("a", "b", exchange="BLOCKING", distribution="POINTWISE")
        job.edge("b", "c", exchange="BLOCKING", distribution="POINTWISE")

    deps = upstream(build(declare))
    assert deps["b.0"] == ["a.0", "a.1"] and deps["b.1"] == ["a.2", "a.3"]
    assert [deps[f"c.{i}"] for i in range(4)] == [["b.0"], ["b.0"], ["b.1"], ["b.1"]]


def test_group_tooltip_and_doc_name_steps_and_reason() -> None:
    dag = build(etl)
    pipelined = dag.task_group_dict["r0"]
    assert "steps gen, clean" in pipelined.tooltip and "PIPELINED" in pipelined.tooltip
    assert "gen -> clean (POINTWISE)" in pipelined.tooltip
    single = dag.task_group_dict["r5"]
    assert "report" in single.tooltip and "BLOCKING" in single.tooltip
    assert "`join->report` (BLOCKING, BROADCAST) from `join`" in (single.doc_md or "")


def test_group_labels_say_what_each_region_holds_without_renaming_ids() -> None:
    """The graph view shows ``r0 · gen#0 + clean#0`` instead of a bare ``r0``; ids stay ``r<n>`` / task ids."""
    dag = build(etl)
    labels = {gid: g.group_display_name for gid, g in dag.task_group_dict.items() if gid}
    assert labels == {"r0": "r0 · gen#0 + clean#0", "r1": "r1 · gen#1 + clean#1", "r2": "r2 · gen#2 + clean#2",
                      "r3": "r3 · join#0", "r4": "r4 · join#1", "r5": "r5 · report#0"}
    assert groups(dag)["r0"] == ["gen.clean.0"]


def test_a_region_label_compresses_indices_into_ranges_and_is_cut() -> None:
    from airflow_region_failover.graph.ids import SubtaskId
    from airflow_region_failover.graph.regions import Region
    from airflow_region_failover.naming import region_label

    region = Region(8, (*(SubtaskId("join", i) for i in (0, 1, 2, 3, 7)), SubtaskId("aggregate", 0)))
    assert region_label(region) == "r8 · join#0-3,7 + aggregate#0"
    long = Region(1, tuple(SubtaskId(f"step_{n}", 0) for n in range(20)))
    assert len(region_label(long)) == 80 and region_label(long).endswith("…")


def test_region_ids_and_task_ids_are_deterministic() -> None:
    first, second = build(etl), build(etl)
    assert groups(first) == groups(second)
    assert [t.task_id for t in first.tasks] == [t.task_id for t in second.tasks]


def test_task_id_mapping_round_trips_and_ignores_other_tasks() -> None:
    for subtask in (SubtaskId("clean", 0), SubtaskId("a-b_c", 12)):
        assert subtask_of(task_id_of(subtask)) == subtask
    assert task_id_of(SubtaskId("join", 1)) == "join.1"
    for other in ("join", "join.01", "join.-1", "join.x", ".1", "-x.1", "a..b.1", "a.b.01"):
        assert subtask_of(other) is None
    assert subtasks_of("a.b.3") == (SubtaskId("a", 3), SubtaskId("b", 3))  # graph-free: a chain's head first


def test_job_document_survives_dag_serialization() -> None:
    from airflow.serialization.serialized_objects import DagSerialization

    dag = build(etl, restart_strategy="exponential-delay")
    spec = job_of(dag)
    assert spec is not None
    assert spec.options["restart-strategy.type"] == "exponential-delay"
    assert "restart-strategy.fixed-delay.attempts" not in spec.options
    serialized = DagSerialization.from_dict(DagSerialization.to_dict(dag))
    restored = job_of(serialized)
    assert restored == spec
    assert JobSpec.from_document(serialized.params[JOB_PARAM]) == spec
    assert set(serialized.task_group.children) == {"r0", "r1", "r2", "r3", "r4", "r5"}


def test_operators_do_not_copy_the_job_document() -> None:
    dag = build(etl)
    assert JOB_PARAM in dag.params
    assert all(JOB_PARAM not in t.params for t in dag.tasks)


def test_dag_without_job_has_no_spec() -> None:
    with DAG("plain", schedule=None) as dag:
        pass
    assert job_of(dag) is None


def test_options_default_from_airflow_cfg(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AIRFLOW__REGION_FAILOVER__FAILOVER_STRATEGY", "full")
    monkeypatch.setenv("AIRFLOW__REGION_FAILOVER__RESTART_STRATEGY", "failure-rate")
    monkeypatch.setenv("AIRFLOW__REGION_FAILOVER__RESTART_STRATEGY_OPTIONS",
                       '{"restart-strategy.failure-rate.max-failures-per-interval": 5}')
    monkeypatch.setenv("AIRFLOW__REGION_FAILOVER__NON_RECOVERABLE_ERRORS", "KeyError, NameError")
    spec = job_of(build(etl))
    assert spec is not None
    assert spec.options == {
        "jobmanager.execution.failover-strategy": "full",
        "restart-strategy.failure-rate.max-failures-per-interval": "5",
        "restart-strategy.type": "failure-rate",
        "restart-strategy.non-recoverable-errors": "KeyError;NameError",
    }
    overridden = job_of(build(etl, failover_strategy="region"))
    assert overridden is not None and overridden.options["jobmanager.execution.failover-strategy"] == "region"


def test_from_json_renders_the_same_graph() -> None:
    path = ROOT / "examples" / "etl.json"
    if not path.exists():
        pytest.skip("examples/etl.json not present")
    from airflow_region_failover.graph import jsonformat

    graph = jsonformat.load(str(path))
    with DAG("from_json", schedule=None) as dag:
        RegionJob.from_json(path, {s.id: noop for s in graph.steps}).render()
    spec = job_of(dag)
    assert spec is not None and spec.graph == graph
    assert len(dag.tasks) == graph.subtask_count - 8  # gen_orders -> clean_orders, gen_lineitem -> clean_lineitem


def test_step_kwargs_reach_the_operators() -> None:
    def declare(job: RegionJob) -> None:
        job.step("only", noop, parallelism=2, pool="spark", retries=0)

    dag = build(declare)
    assert {t.pool for t in dag.tasks} == {"spark"}
    assert {t.retries for t in dag.tasks} == {0}


def test_decorator_form_declares_steps_named_after_functions() -> None:
    def declare(job: RegionJob) -> None:
        @job.task(parallelism=2, deterministic=True)
        def extract(spark: Any, inputs: Any, context: Any) -> None:
            return None

        @job.task("load_step")
        def load(spark: Any, inputs: Any, context: Any) -> None:
            return None

        job.edge("extract", "load_step", exchange="BLOCKING")

    dag = build(declare)
    assert sorted(t.task_id for t in dag.tasks) == ["extract.0", "extract.1", "load_step.0"]
    spec = job_of(dag)
    assert spec is not None and spec.graph.step("extract").deterministic


def test_demo_etl_renders_its_gen_clean_chains_as_one_task_per_chain_subtask() -> None:
    """examples/etl.json: gen_orders -> clean_orders and gen_lineitem -> clean_lineitem (PIPELINED POINTWISE, 4 = 4)
    chain; join -> aggregate (PIPELINED POINTWISE, 4 -> 2) does not (its tasks read scratch partitions).

        gen_orders#i -> clean_orders#i ====+==> join#j -> aggregate#j/2 ==> report#0
        gen_lineitem#i -> clean_lineitem#i =/
    """
    from airflow_region_failover.graph import jsonformat

    graph = jsonformat.load(str(ROOT / "examples" / "etl.json"))
    with DAG("etl_chains", schedule=None) as dag:
        rendered = RegionJob.from_json(ROOT / "examples" / "etl.json", {s.id: noop for s in graph.steps}).render()
    ids = sorted(t.task_id for t in dag.tasks)
    assert ids == sorted([*(f"gen_orders.clean_orders.{i}" for i in range(4)),
                          *(f"gen_lineitem.clean_lineitem.{i}" for i in range(4)),
                          *(f"join.{i}" for i in range(4)), "aggregate.0", "aggregate.1", "report.0"])
    assert len(dag.tasks) == 15 < graph.subtask_count == 23
    deps = upstream(dag)
    assert deps["gen_orders.clean_orders.2"] == [] and deps["gen_lineitem.clean_lineitem.2"] == []
    assert deps["join.1"] == sorted([*(f"gen_orders.clean_orders.{i}" for i in range(4)),
                                     *(f"gen_lineitem.clean_lineitem.{i}" for i in range(4))])
    assert deps["aggregate.1"] == ["join.2", "join.3"] and deps["report.0"] == ["aggregate.0", "aggregate.1"]
    assert all(t.task_id not in t.upstream_task_ids for t in dag.tasks)
    chain_task = rendered.task("gen_orders#3")
    assert chain_task is rendered.task("clean_orders#3") and chain_task.task_id == "gen_orders.clean_orders.3"
    assert chain_task.chain == ["gen_orders#3", "clean_orders#3"]
    assert "`gen_orders` -> `clean_orders`" in (chain_task.doc_md or "")
    spec = rendered.spec
    assert spec.names.subtasks("gen_orders.clean_orders.3") == (SubtaskId("gen_orders", 3),
                                                                SubtaskId("clean_orders", 3))
    assert spec.names.subtasks("clean_orders.3") is None and spec.names.subtasks("join.3") == (SubtaskId("join", 3),)
    for subtask in (SubtaskId("gen_orders", 1), SubtaskId("clean_lineitem", 0), SubtaskId("aggregate", 1)):
        members = spec.names.subtasks(spec.names.task_id(subtask))  # round trip
        assert members is not None and subtask in members
    region = rendered.regions.region_of(SubtaskId("gen_orders", 3))
    assert chain_task.task_group is not None and chain_task.task_group.group_id == region.id


def test_script_steps_other_connections_and_other_operator_arguments_are_not_chained(tmp_path: Path) -> None:
    script = tmp_path / "job.py"
    script.write_text("")

    def declare(job: RegionJob) -> None:
        job.step("a", noop, parallelism=2)
        job.step("b", script=str(script), parallelism=2)
        job.step("c", noop, parallelism=2, spark_conn_id="other")
        job.step("d", noop, parallelism=2, spark_conn_id="other", pool="p")
        job.step("e", noop, parallelism=2, spark_conn_id="other", pool="p")
        for s, t in ("ab", "bc", "cd", "de"):
            job.edge(s, t, exchange="PIPELINED", distribution="POINTWISE")

    dag = build(declare)
    assert sorted(t.task_id for t in dag.tasks) == ["a.0", "a.1", "b.0", "b.1", "c.0", "c.1", "d.e.0", "d.e.1"]
    spec = job_of(dag)
    assert spec is not None
    assert spec.chain_breaks == {("a", "b"): "script step 'b' runs in its own Spark application",
                                 ("b", "c"): "script step 'b' runs in its own Spark application",
                                 ("c", "d"): "operator arguments differ"}
    edge_ab = spec.graph.inputs("b")[0]
    assert spec.chains.why_not(edge_ab) == "script step 'b' runs in its own Spark application"
    from airflow.serialization.serialized_objects import DagSerialization

    restored = job_of(DagSerialization.from_dict(DagSerialization.to_dict(dag)))
    assert restored == spec and restored is not None and restored.names.task_id(SubtaskId("e", 1)) == "d.e.1"

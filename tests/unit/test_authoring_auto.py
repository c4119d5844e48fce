"""AUTO edges in a DAG file: the job default, the plan a render follows, and the edges no plan may fuse.

    (gen#0) --AUTO--> (clean#0) --AUTO--> (sink#0)
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from airflow.sdk import DAG

from airflow_region_failover import GraphError, RegionJob
from airflow_region_failover.authoring import unfusable
from airflow_region_failover.failover.checkpointing import Checkpoint
from airflow_region_failover.graph.auto import Choice, ExchangePlan
from airflow_region_failover.graph.elements import Exchange
from airflow_region_failover.job import JobSpec, job_of


def noop(spark: Any, inputs: Any, context: Any) -> None:
    return None


def _job(**kwargs: Any) -> RegionJob:
    job = RegionJob(default_exchange="AUTO", **kwargs)
    job.step("gen", noop)
    job.step("clean", noop)
    job.step("sink", noop)
    job.edge("gen", "clean", distribution="POINTWISE").edge("clean", "sink", distribution="POINTWISE")
    return job


def test_the_job_default_makes_edges_auto() -> None:
    assert [e.exchange for e in _job().graph().edges] == [Exchange.AUTO, Exchange.AUTO]
    job = RegionJob()  # the default stays BLOCKING
    job.step("a", noop)
    job.step("b", noop)
    assert job.edge("a", "b").graph().edges[0].exchange is Exchange.BLOCKING


def test_a_bad_default_exchange_is_named() -> None:
    with pytest.raises(GraphError, match=r"RegionJob\(default_exchange=...\): exchange 'SOMETIMES' is unknown; use "
                                         "PIPELINED or BLOCKING or AUTO"):
        RegionJob(default_exchange="SOMETIMES")


def test_render_without_a_plan_persists_every_auto_result() -> None:
    with DAG("auto_default", schedule=None) as dag:
        _job().render()
    spec = job_of(dag)
    assert spec is not None and [e.exchange for e in spec.graph.edges] == [Exchange.BLOCKING, Exchange.BLOCKING]
    assert len(spec.topology.regions.regions) == 3


def test_render_follows_the_plan() -> None:
    with DAG("auto_fused", schedule=None) as dag:
        _job().render(plan=ExchangePlan({"gen->clean": Choice.FUSED}))
    spec = job_of(dag)
    assert spec is not None and [e.exchange for e in spec.graph.edges] == [Exchange.PIPELINED, Exchange.BLOCKING]
    assert [r.steps for r in spec.topology.regions.regions] == [("gen", "clean"), ("sink",)]


def test_an_unfusable_result_stays_blocking_whatever_the_plan(tmp_path: Path) -> None:
    script = tmp_path / "sink.py"
    script.write_text("")
    job = RegionJob(default_exchange="AUTO")
    job.step("gen", noop)
    job.step("clean", noop, spark_conn_id="other")
    job.step("sink", script=str(script))
    job.edge("gen", "clean", distribution="POINTWISE").edge("clean", "sink", distribution="POINTWISE")
    reasons = unfusable(job.graph(), job._impls)
    assert reasons == {"gen->clean": "Spark connections differ (None vs 'other'): one fused region runs in one Spark "
                                     "application",
                       "clean->sink": "script step 'sink' runs in its own Spark application"}
    with DAG("auto_pinned", schedule=None) as dag:
        job.render(plan=ExchangePlan({"gen->clean": Choice.FUSED, "clean->sink": Choice.FUSED}))
    spec = job_of(dag)
    assert spec is not None and {e.exchange for e in spec.graph.edges} == {Exchange.BLOCKING}


def test_a_checkpointed_consumer_pins_its_input() -> None:
    def stateful(spark: Any, inputs: Any, state: Any, context: Any) -> None:
        return None

    job = RegionJob(default_exchange="AUTO")
    job.step("gen", noop)
    job.step("sessions", stateful, checkpoint=Checkpoint(state_key=["user"], state_schema="user string",
                                                          epochs=2, cut="objects"))
    job.edge("gen", "sessions")
    assert "checkpointed" in unfusable(job.graph(), job._impls)["gen->sessions"]


def test_a_job_spec_refuses_an_unresolved_graph() -> None:
    with pytest.raises(GraphError, match=r"result 'gen->clean' is still AUTO: a job runs a concrete graph"):
        JobSpec(_job().graph(), {})


def test_the_rendered_job_keeps_what_it_declared_auto_through_its_document(tmp_path: Path) -> None:
    """What ``advise DAG_ID`` and the dry-run tab read: the job document names the AUTO results, the pinned ones
    with why, and the plan rendered; the declared graph comes back with those edges AUTO."""
    job = RegionJob(default_exchange="AUTO")
    job.step("gen", noop)
    job.step("clean", noop, spark_conn_id="other")
    job.step("sink", noop, spark_conn_id="other")
    job.edge("gen", "clean", distribution="POINTWISE").edge("clean", "sink", distribution="POINTWISE")
    with DAG("auto_declared", schedule=None) as dag:
        job.render(plan=ExchangePlan({"clean->sink": Choice.FUSED}))
    spec = job_of(dag)
    assert spec is not None
    again = JobSpec.from_document(spec.to_document())
    assert again.auto == spec.auto
    assert again.auto.results == ("gen->clean", "clean->sink")
    assert list(again.auto.pinned) == ["gen->clean"] and again.auto.plan.fused == ("clean->sink",)
    assert [e.exchange for e in again.declared_graph.edges] == [Exchange.AUTO, Exchange.AUTO]
    assert "auto" not in JobSpec(spec.graph, {}).to_document()


def test_a_declaration_naming_a_result_the_graph_lacks_is_refused() -> None:
    from airflow_region_failover.graph.auto import AutoDeclaration

    with DAG("auto_stale", schedule=None) as dag:
        _job().render()
    spec = job_of(dag)
    assert spec is not None
    with pytest.raises(GraphError, match=r"AUTO result 'gone' is not a result of the rendered graph; re-render"):
        JobSpec(spec.graph, {}, auto=AutoDeclaration(("gone",)))
    with pytest.raises(GraphError, match=r"AUTO declaration .* must be"):
        AutoDeclaration.from_json({"results": "gen->clean"})


def _keyed_job(**step_kwargs: Any) -> RegionJob:
    job = RegionJob()
    job.step("src", noop, parallelism=2)
    job.step("gen", noop, parallelism=2)
    job.step("agg", noop, parallelism=2, **step_kwargs)
    job.step("sink", noop)
    job.edge("src", "gen", exchange="BLOCKING", distribution="POINTWISE")
    job.edge("gen", "agg", exchange="AUTO", partition_by=["k"])
    job.edge("agg", "sink", exchange="BLOCKING", distribution="BROADCAST")
    return job


def test_a_fused_region_renders_as_one_task_wired_to_what_it_reads_and_what_reads_it() -> None:
    #   src#0,1 ==B==> [gen#0,1 --FUSED keyed--> agg#0,1] ==B==> sink#0
    with DAG("auto_region", schedule=None) as dag:
        rendered = _keyed_job().render(plan=ExchangePlan({"gen->agg": Choice.FUSED}))
    assert sorted(dag.task_dict) == ["gen.agg.0", "sink.0", "src.0", "src.1"]
    task = dag.task_dict["gen.agg.0"]
    assert task.upstream_task_ids == {"src.0", "src.1"} and task.downstream_task_ids == {"sink.0"}
    assert task.chain == ["gen#0", "gen#1", "agg#0", "agg#1"] and "Fused failover region" in task.doc_md
    assert rendered.task("agg#1") is task and task.task_group.group_id == "r2"


def test_a_plan_fusing_a_checkpointed_producer_is_refused_with_the_reason() -> None:
    #   src ==B==> gen --AUTO--> agg(checkpointed)   the consumer pins it; here the producer is the checkpointed one
    def stateful(spark: Any, inputs: Any, state: Any, context: Any) -> None:
        return None

    job = RegionJob()
    job.step("src", noop, parallelism=2)
    job.step("gen", stateful, parallelism=2, checkpoint=Checkpoint(state_key=["k"], state_schema="k string",
                                                                    epochs=2, cut="objects"))
    job.step("agg", noop, parallelism=2)
    job.edge("src", "gen", exchange="BLOCKING", distribution="POINTWISE")
    job.edge("gen", "agg", exchange="AUTO", partition_by=["k"])
    with DAG("auto_refused", schedule=None) as dag:
        job.render(plan=ExchangePlan({"gen->agg": Choice.FUSED}))
    spec = job_of(dag)
    assert spec is not None and spec.auto.plan.fused == () and spec.names.fused == ()
    assert spec.auto.pinned["gen->agg"] == ("fusing it would run step 'gen' in fused task 'gen.agg.0', but a "
                                            "checkpointed step commits objects per epoch in its own task")
    assert "gen.0" in dag.task_dict and "gen.agg.0" not in dag.task_dict


def test_steps_with_other_operator_arguments_do_not_fuse() -> None:
    with DAG("auto_kwargs", schedule=None) as dag:
        _keyed_job(pool="other").render(plan=ExchangePlan({"gen->agg": Choice.FUSED}))
    spec = job_of(dag)
    assert spec is not None and "operator arguments differ" in spec.auto.pinned["gen->agg"]

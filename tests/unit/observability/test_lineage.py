"""OpenLineage of the step operator (:mod:`airflow_region_failover.observability.lineage`): datasets named
``s3://<bucket>`` + the partition's key prefix, with statistics and the ``regionFailover`` run facet; partitions
dropped by retention; and the operator without the openlineage provider (lazy imports: it runs, no lineage)."""

from __future__ import annotations

import json
import sys
from typing import Any

import pytest

from airflow_region_failover import JobGraphBuilder, PartitionId, SubtaskId
from airflow_region_failover.decisions.try_log import LogState, TryLog
from airflow_region_failover.failover.run_log import RunLog
from airflow_region_failover.job import JobRuntime, JobSpec, StepImpl
from airflow_region_failover.observability import lineage
from airflow_region_failover.operators import step
from airflow_region_failover.spark.ledger import TaskLedger, TaskSummary
from airflow_region_failover.store.keys import Layout

LAYOUT = Layout("results", "team/rf")
SUMMARY = {
    "subtask": "c#0", "attempt": 2, "rows": {"c->d": 5}, "read": {"bytes": 170, "objects": 3, "partition_bytes": 170},
    "restart": {"decision": 3, "strategy": "region", "reason": "consumer"},
    "inputs": {"b->c#0": {"attempt": 2, "bytes": 100, "objects": 1, "reused": False},
               "b->c#1": {"attempt": 1, "bytes": 70, "objects": 2, "reused": True}},
    "outputs": {"c->d#0": {"attempt": 1, "rows": 5, "bytes": 40, "objects": 1, "checksum": "ab12", "kept": True}},
}
#:  b#0 ==+==> c#0 ==> d#0
#:  b#1 ==+
GRAPH = (JobGraphBuilder().step("b", parallelism=2).step("c").step("d")
         .edge("b", "c", exchange="BLOCKING").edge("c", "d", exchange="BLOCKING").build())


def _event_json(value: Any) -> Any:
    from openlineage.client.serde import Serde

    return json.loads(Serde.to_json(value))


def test_a_partition_is_named_by_the_key_prefix_its_commits_live_under() -> None:
    name = lineage.dataset_name(LAYOUT, "rf", "run 1", PartitionId("b->c", 1))
    assert name == "team/rf/v1/rf/run.201/b.to.c/manifests/p00001"
    for attempt in (1, 2, 17):
        assert LAYOUT.run("rf", "run 1").manifest(PartitionId("b->c", 1), attempt).startswith(name + "/")
    assert lineage.namespace(LAYOUT) == "s3://results"


def test_a_tasks_lineage_lists_what_it_read_and_committed_with_statistics_and_its_run_facet() -> None:
    got = lineage.task_lineage(LAYOUT, "rf", "r", "c#0+d#0", 2, TaskLedger.from_json(SUMMARY))
    inputs = [_event_json(d) for d in got.inputs]
    outputs = [_event_json(d) for d in got.outputs]
    prefix = "team/rf/v1/rf/r/"
    assert [(d["namespace"], d["name"]) for d in inputs] == [("s3://results", prefix + "b.to.c/manifests/p00000"),
                                                           ("s3://results", prefix + "b.to.c/manifests/p00001")]
    assert inputs[1]["inputFacets"]["inputStatistics"]["size"] == 70
    assert inputs[1]["facets"]["version"]["datasetVersion"] == "a1"
    assert [d["name"] for d in outputs] == [prefix + "c.to.d/manifests/p00000"]
    assert outputs[0]["outputFacets"]["outputStatistics"]["rowCount"] == 5
    assert outputs[0]["outputFacets"]["outputStatistics"]["size"] == 40
    assert outputs[0]["facets"]["version"]["datasetVersion"] == "a1-ab12"
    facet = _event_json(got.run_facets[lineage.RUN_FACET])
    assert {k: facet[k] for k in ("region", "attempt", "restartReason", "decision", "kept")} == {
        "region": "c#0+d#0", "attempt": 2, "restartReason": "consumer", "decision": 3, "kept": True}


def test_before_the_task_ran_or_when_it_failed_only_the_run_facet_is_reported() -> None:
    got = lineage.task_lineage(LAYOUT, "rf", "r", "c#0", 1, None)
    assert got.inputs == [] and got.outputs == []
    facet = _event_json(got.run_facets[lineage.RUN_FACET])
    assert facet["restartReason"] == "" and facet["kept"] is False


def test_partitions_released_by_retention_are_reported_dropped() -> None:
    outputs = lineage.dropped_lineage(LAYOUT, [lineage.dataset_name(LAYOUT, "rf", "r", p)
                                               for p in (PartitionId("c->d", 0), PartitionId("b->c", 1))])
    got = [_event_json(d) for d in outputs]
    assert [d["name"] for d in got] == ["team/rf/v1/rf/r/b.to.c/manifests/p00001",
                                       "team/rf/v1/rf/r/c.to.d/manifests/p00000"]
    assert {d["facets"]["lifecycleStateChange"]["lifecycleStateChange"] for d in got} == {"DROP"}


def _operator() -> step.RegionStepOperator:
    impls = {s: StepImpl(s, fn=lambda spark, inputs, ctx: None) for s in ("b", "c", "d")}
    return step.RegionStepOperator(task_id="c.0", subtask="c#0", runtime=JobRuntime(JobSpec(GRAPH, {}), impls))


class _TI:
    dag_id, run_id, try_number, task_id = "rf", "r", 2, "c.0"


def test_the_operator_reports_its_lineage_through_the_providers_methods(monkeypatch: pytest.MonkeyPatch) -> None:
    op = _operator()
    monkeypatch.setattr(step, "run_chain", lambda *args, **kwargs: TaskSummary.from_json(SUMMARY))
    monkeypatch.setattr(step, "read_try_log", lambda ti: TryLog("c.0", 2, LogState.READ, RunLog("rf", "r")))
    monkeypatch.setenv("AIRFLOW__REGION_FAILOVER__STORE_BUCKET", LAYOUT.bucket)
    monkeypatch.setenv("AIRFLOW__REGION_FAILOVER__STORE_PREFIX", LAYOUT.prefix)
    assert lineage.configured_layout() == LAYOUT
    assert op.execute({"ti": _TI()}) == SUMMARY  # type: ignore[arg-type]
    got = op.get_openlineage_facets_on_complete(_TI())
    assert [d.name.rsplit("/", 3)[-3] for d in got.outputs] == ["c.to.d"]
    region = op.runtime.spec.topology.regions.region_of(SubtaskId("c", 0)).id
    assert _event_json(got.run_facets[lineage.RUN_FACET])["region"] == region
    assert op.get_openlineage_facets_on_failure(_TI()).outputs == []


def test_without_the_openlineage_provider_the_operator_runs_and_reports_no_lineage(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """The provider is optional: its modules cannot be imported, the task still runs and sends its metrics."""
    for name in ("openlineage", "openlineage.client", "openlineage.client.event_v2", "openlineage.client.facet_v2",
                 "airflow.providers.openlineage", "airflow.providers.openlineage.extractors"):
        monkeypatch.setitem(sys.modules, name, None)
    sent: list[Any] = []
    monkeypatch.setattr(step, "run_chain", lambda *args, **kwargs: TaskSummary.from_json(SUMMARY))
    monkeypatch.setattr(step, "read_try_log", lambda ti: TryLog("c.0", 2, LogState.READ, RunLog("rf", "r")))
    monkeypatch.setattr(step.metrics, "emit_task", lambda *args: sent.append(args))
    op = _operator()
    assert not lineage.available()
    assert op.execute({"ti": _TI()}) == SUMMARY  # type: ignore[arg-type]
    assert sent == [("rf", "c", TaskLedger.from_json(SUMMARY))]
    assert op.get_openlineage_facets_on_start() is None
    assert op.get_openlineage_facets_on_complete(_TI()) is None


def test_dropped_partitions_are_sent_through_the_configured_transport(tmp_path: Any,
                                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    """The openlineage provider's file transport receives one run of job ``region_failover.gc``: its START, then
    its COMPLETE listing the dropped partitions."""
    monkeypatch.setenv("AIRFLOW__OPENLINEAGE__TRANSPORT",
                       json.dumps({"type": "file", "log_file_path": str(tmp_path / "events")}))
    monkeypatch.setenv("AIRFLOW__OPENLINEAGE__NAMESPACE", "rf-test")
    name = lineage.dataset_name(LAYOUT, "rf", "r", PartitionId("c->d", 0))
    assert lineage.emit_dropped(LAYOUT, [name]) is True
    events = {e["eventType"]: e for e in (json.loads(p.read_text()) for p in tmp_path.glob("events-*.json"))}
    assert sorted(events) == ["COMPLETE", "START"]
    event = events["COMPLETE"]
    assert (event["job"]["namespace"], event["job"]["name"]) == ("rf-test", "region_failover.gc")
    assert [(d["namespace"], d["name"], d["facets"]["lifecycleStateChange"]["lifecycleStateChange"])
            for d in event["outputs"]] == [("s3://results", name, "DROP")]
    assert lineage.emit_dropped(LAYOUT, []) is False, "nothing to report"


def test_a_per_run_jobs_try_names_the_failover_region_of_its_runs_plan(monkeypatch: pytest.MonkeyPatch) -> None:
    """src#0 ==B==> gen#0 --AUTO--> agg#0 --AUTO--> fin#0 ==B==> sink#0, rendered PER_RUN (gen.agg.fin.0 in r1, sink
    in r2): with no decision stored the run persists every AUTO result, gen#0, agg#0 and fin#0 are regions of their
    own and sink#0's is r4 — the id its decisions and Failover tab name, not the rendered r2; the plan the facets read
    is the one the run fixes."""
    from types import SimpleNamespace

    from airflow_region_failover.decisions.plans import Plans
    from airflow_region_failover.graph.auto import ExchangePlan
    from tests.support.fakes import MemoryObjects
    from tests.unit.test_authoring_per_run import _spec

    objects = MemoryObjects()
    monkeypatch.setattr("airflow_region_failover.store.result_store.default_store",
                        lambda: SimpleNamespace(objects=objects))
    monkeypatch.setattr(step, "read_try_log", lambda ti: TryLog("sink.0", 1, LogState.READ, RunLog("rf", "r")))
    monkeypatch.setenv("AIRFLOW__REGION_FAILOVER__STORE_BUCKET", LAYOUT.bucket)
    spec = _spec()
    impls = {s.id: StepImpl(s.id, fn=lambda spark, inputs, ctx: None) for s in spec.graph.steps}
    op = step.RegionStepOperator(task_id="sink.0", subtask="sink#0", runtime=JobRuntime(spec, impls))
    ti = SimpleNamespace(dag_id="per_run", run_id="r1", try_number=1, task_id="sink.0")
    facet = _event_json(op._lineage(ti, None).run_facets[lineage.RUN_FACET])
    sink = SubtaskId("sink", 0)
    assert (spec.topology.regions.region_of(sink).id, facet["region"]) == ("r2", "r4")
    assert spec.for_run(ExchangePlan()).topology.regions.region_of(sink).id == "r4"
    fixed = Plans(objects).of_run("per_run", "r1")  # type: ignore[arg-type]
    assert fixed is not None and fixed.plan.fused == ()

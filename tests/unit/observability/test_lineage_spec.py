"""Every OpenLineage event this provider emits keeps the spec's rules: valid against the official schemas
(vendored, ``tests/support/openlineage_schemas``) and our facet against its own schema (shipped in the package);
the custom facet keyed ``{prefix}_{name}``, pointing at its schema, produced by us (versioned); one try's START,
COMPLETE and FAIL tell the same story; gc's report is a run (START, then COMPLETE); and the publishing task
reports the Delta table as its output with the sink partitions it publishes as inputs, on every try.

    b#0 ==+==> c#0 ==> d#0 --> d.publish --> Delta table s3://results/team/rf/tables/totals
    b#1 ==+
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from airflow_region_failover import __version__
from airflow_region_failover.decisions.try_log import LogState, TryLog
from airflow_region_failover.failover.run_log import RunLog
from airflow_region_failover.graph.ids import PartitionId
from airflow_region_failover.observability import lineage
from airflow_region_failover.operators import step
from airflow_region_failover.spark import run as spark_run
from airflow_region_failover.spark.ledger import TaskLedger, TaskSummary
from tests.support.openlineage import OURS, validate_event
from tests.unit.observability.test_lineage import LAYOUT, SUMMARY, _operator

TI = SimpleNamespace(dag_id="rf", run_id="r", try_number=2, task_id="c.0", map_index=-1)


def event_json(kind: str, got: Any, job: str = "rf.c.0") -> dict[str, Any]:
    """The run event the openlineage provider builds around an ``OperatorLineage`` (its JSON form)."""
    from openlineage.client.event_v2 import Job, Run, RunEvent, RunState
    from openlineage.client.serde import Serde

    event = RunEvent(eventType=RunState[kind], eventTime="2026-12-02T01:00:00+00:00",
                     run=Run(runId="01932f43-0a3c-7cc4-a1f0-1a2b3c4d5e6f", facets=got.run_facets),
                     job=Job(namespace="rf-test", name=job), inputs=got.inputs, outputs=got.outputs,
                     producer=lineage.PRODUCER)
    body: dict[str, Any] = json.loads(Serde.to_json(event))
    return body


def restarted(monkeypatch: pytest.MonkeyPatch) -> list[Any]:
    """This try (2) of ``c.0`` was started by decision 3's clear, its region a ``consumer``; returns the reads of
    the decision log."""
    decision = SimpleNamespace(id=3, strategy="region", reasons={"c.0": "consumer"})
    reads: list[Any] = []
    monkeypatch.setattr(step, "restart_of", lambda ti, logs=None, known=None: decision)
    monkeypatch.setattr(spark_run, "restart_of", lambda ti, logs=None, known=None: decision)
    monkeypatch.setattr(step, "read_try_log", lambda ti: reads.append(ti) or TryLog("c.0", 2, LogState.READ,
                                                                                     RunLog("rf", "r")))
    monkeypatch.setattr(step, "current_ti", lambda: TI)
    monkeypatch.setenv("AIRFLOW__REGION_FAILOVER__STORE_BUCKET", LAYOUT.bucket)
    monkeypatch.setenv("AIRFLOW__REGION_FAILOVER__STORE_PREFIX", LAYOUT.prefix)
    return reads


def test_the_custom_facet_is_named_schemad_and_produced_by_us() -> None:
    got = lineage.task_lineage(LAYOUT, "rf", "r", "c#0+d#0", 2, TaskLedger.from_json(SUMMARY))
    (key,) = got.run_facets
    assert re.fullmatch(r"[a-z][A-Za-z0-9]*_[a-z][A-Za-z0-9]*", key), key
    facet = event_json("COMPLETE", got)["run"]["facets"][key]
    schema = json.loads((OURS / "RegionFailoverTaskRunFacet.json").read_text())
    assert facet["_schemaURL"] == f"{schema['$id']}#/$defs/RegionFailoverTaskRunFacet"
    assert f"/{__version__}/" in schema["$id"] and facet["_producer"] == lineage.PRODUCER
    assert lineage.PRODUCER.endswith(f"/tree/{__version__}") and "apache/airflow" not in lineage.PRODUCER


def test_a_tries_start_complete_and_fail_events_are_valid_and_tell_the_same_story(
        monkeypatch: pytest.MonkeyPatch) -> None:
    reads = restarted(monkeypatch)
    op = _operator()
    monkeypatch.setattr(step, "run_chain", lambda *args, **kwargs: TaskSummary.from_json(SUMMARY))
    events = {"START": event_json("START", op.get_openlineage_facets_on_start())}
    op.execute({"ti": TI})  # type: ignore[arg-type]
    events["COMPLETE"] = event_json("COMPLETE", op.get_openlineage_facets_on_complete(TI))
    events["FAIL"] = event_json("FAIL", op.get_openlineage_facets_on_failure(TI))
    for event in events.values():
        validate_event(event)
    facets = {kind: event["run"]["facets"][lineage.RUN_FACET] for kind, event in events.items()}
    story = {kind: {k: f[k] for k in ("region", "attempt", "restartReason", "decision")} for kind, f in facets.items()}
    assert story["START"] == story["COMPLETE"] == story["FAIL"], story
    assert story["START"]["attempt"] == 2 and story["START"]["restartReason"] == "consumer"
    assert story["START"]["decision"] == 3
    assert len(reads) == 1, "the decision log is read once per try, by START's lineage or by execute"


def test_gc_reports_a_run_start_then_complete_from_our_versioned_producer(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AIRFLOW__OPENLINEAGE__TRANSPORT",
                       json.dumps({"type": "file", "log_file_path": str(tmp_path / "events")}))
    monkeypatch.setenv("AIRFLOW__OPENLINEAGE__NAMESPACE", "rf-test")
    assert lineage.emit_dropped(LAYOUT, [lineage.dataset_name(LAYOUT, "rf", "r", PartitionId("c->d", 0))])
    events = [json.loads(p.read_text()) for p in sorted(tmp_path.glob("events-*.json"))]
    events.sort(key=lambda e: ["START", "COMPLETE"].index(e["eventType"]))
    assert [e["eventType"] for e in events] == ["START", "COMPLETE"]
    assert len({e["run"]["runId"] for e in events}) == 1 and {e["producer"] for e in events} == {lineage.PRODUCER}
    for event in events:
        validate_event(event)


def publisher(partitions: int = 2) -> Any:
    from airflow_region_failover.publication.declaration import Publication
    from airflow_region_failover.publication.operator import RegionPublishOperator

    return RegionPublishOperator(task_id="d.publish", partitions=partitions, publication=Publication("d", "totals"))


@pytest.mark.parametrize("kind", ["START", "COMPLETE", "FAIL"])
def test_the_publishing_task_reports_its_table_with_the_partitions_it_publishes_on_every_try(
        monkeypatch: pytest.MonkeyPatch, kind: str) -> None:
    monkeypatch.setenv("AIRFLOW__REGION_FAILOVER__STORE_BUCKET", LAYOUT.bucket)
    monkeypatch.setenv("AIRFLOW__REGION_FAILOVER__STORE_PREFIX", LAYOUT.prefix)
    monkeypatch.delenv("AIRFLOW__REGION_FAILOVER__PUBLISH_ROOT", raising=False)
    monkeypatch.setattr("airflow_region_failover.publication.operator.current_ti", lambda: TI, raising=False)
    op = publisher()
    got = {"START": lambda: op.get_openlineage_facets_on_start(),
           "COMPLETE": lambda: op.get_openlineage_facets_on_complete(TI),
           "FAIL": lambda: op.get_openlineage_facets_on_failure(TI)}[kind]()
    event = event_json(kind, got, "rf.d.publish")
    validate_event(event)
    assert [(d["namespace"], d["name"]) for d in event["outputs"]] == [("s3://results", "team/rf/tables/totals")]
    assert [d["name"] for d in event["inputs"]] == [lineage.dataset_name(LAYOUT, "rf", "r", PartitionId("d", i))
                                                    for i in range(2)]
    assert event["inputs"][1]["name"] == "team/rf/v1/rf/r/d/manifests/p00001"


def test_the_facets_schema_in_the_docs_is_the_one_shipped() -> None:
    doc = (Path(__file__).parents[3] / "docs" / "operator" / "observability.md").read_text()
    block = doc.split("```json\n", 1)[1].split("\n```", 1)[0]
    assert json.loads(block) == json.loads((OURS / "RegionFailoverTaskRunFacet.json").read_text())
    assert json.loads(block)["$id"] == lineage.SCHEMA_URL.split("#", 1)[0]

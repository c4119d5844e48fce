"""Every way Airflow's docs let a consumer name a published table's Asset triggers it: replayed with Airflow's own
code on the unit tests' SQLite metadata database — DAG processing's ``bulk_write_to_db`` registers the consumer
and the publisher (assets, activation), the execution API's asset route answers the task's look-up, and
``TaskInstance.register_asset_changes_in_db`` turns the task's alias events into asset events and queued runs.

    report.publish --(alias region-failover-table:T)--> Asset(?, s3://bkt/rf/tables/T) <-- schedule of consumer
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from types import SimpleNamespace
from typing import Any

import pytest
from airflow.sdk import DAG, Asset

from airflow_region_failover.publication import delta
from airflow_region_failover.publication import operator as publishing
from airflow_region_failover.publication.declaration import Publication, PublishMode, normalised_uri
from airflow_region_failover.store.config import StoreConfig
from airflow_region_failover.store.s3.clients import S3Access

BUNDLE = "asset-consumers"


@pytest.fixture
def session() -> Iterator[Any]:
    """A session on the unit tests' SQLite metadata database with Airflow's schema and one DAG bundle."""
    import airflow.models as models
    from airflow import settings
    from airflow.models.base import Base
    from airflow.models.dagbundle import DagBundleModel
    from airflow.utils.session import create_session

    models.import_all_models()
    Base.metadata.create_all(settings.engine)
    with create_session() as session:
        if session.get(DagBundleModel, BUNDLE) is None:
            session.add(DagBundleModel(name=BUNDLE))
            session.flush()
        yield session


class Supervisor:
    """Stands in for the task's supervisor: a ``GetAssetByUri`` is answered by the execution API's own route."""

    def __init__(self, session: Any) -> None:
        self.session = session

    def send(self, msg: Any) -> Any:
        from airflow.api_fastapi.execution_api.routes.assets import get_asset_by_uri
        from airflow.sdk.exceptions import ErrorType
        from airflow.sdk.execution_time.comms import AssetResult, ErrorResponse
        from fastapi import HTTPException

        try:
            return AssetResult.from_asset_response(get_asset_by_uri(msg.uri, self.session))
        except HTTPException:
            return ErrorResponse(error=ErrorType.ASSET_NOT_FOUND, detail={"uri": msg.uri})


def register(session: Any, *dags: DAG) -> None:
    """What DAG processing writes for parsed ``dags``."""
    from airflow.models.dag import DagModel
    from airflow.serialization.definitions.dag import SerializedDAG
    from sqlalchemy import update

    SerializedDAG.bulk_write_to_db(BUNDLE, None, dags, session=session)
    session.execute(update(DagModel).where(DagModel.dag_id.in_([d.dag_id for d in dags])).values(is_paused=False))
    session.flush()


def publisher(dag_id: str, table: str, asset_name: str | None) -> DAG:
    with DAG(dag_id, schedule=None) as dag:
        publishing.RegionPublishOperator(task_id="report.publish", partitions=1,
                                         publication=Publication("report", table, PublishMode.APPEND, asset_name))
    return dag


def consumer(dag_id: str, asset: Asset) -> DAG:
    from airflow.providers.standard.operators.empty import EmptyOperator

    with DAG(dag_id, schedule=[asset]) as dag:
        EmptyOperator(task_id="read")
    return dag


def publish(monkeypatch: pytest.MonkeyPatch, session: Any, dag: DAG, run_id: str) -> None:
    """Run ``dag``'s publishing task as a commit that made table version 1, then let Airflow register its events."""
    from airflow.models.taskinstance import TaskInstance
    from airflow.sdk.api.datamodels._generated import AssetProfile
    from airflow.sdk.execution_time import task_runner
    from airflow.sdk.execution_time.context import OutletEventAccessor, OutletEventAccessors

    store = SimpleNamespace(config=StoreConfig(bucket="bkt", prefix="rf", access=S3Access()))
    monkeypatch.setattr(publishing, "default_store", lambda: store)
    monkeypatch.delenv("AIRFLOW__REGION_FAILOVER__PUBLISH_ROOT", raising=False)
    monkeypatch.setattr(publishing.tables, "publish", lambda *a, **k: delta.PublishOutcome("", True, 1, rows=3))
    monkeypatch.setattr(task_runner, "SUPERVISOR_COMMS", Supervisor(session), raising=False)
    monkeypatch.setattr(OutletEventAccessor, "_asset_ref_cache", {})
    task = dag.get_task("report.publish")
    run = SimpleNamespace(dag_id=dag.dag_id, run_id=run_id, logical_date=None, data_interval_end=None,
                          run_after=None)
    events = OutletEventAccessors()
    task.execute({"dag_run": run, "outlet_events": events, "inlet_events": {}})
    outlet_events = [event for alias in task.outlets for event in events[alias].asset_alias_events]
    ti = SimpleNamespace(dag_id=dag.dag_id, task_id=task.task_id, run_id=run_id, map_index=-1,
                         dag_run=SimpleNamespace(partition_key=None, partition_date=None),
                         log=logging.getLogger("ti"))
    profiles = [AssetProfile(name=alias.name, type="AssetAlias") for alias in task.outlets]
    TaskInstance.register_asset_changes_in_db(ti, profiles, [_event_dict(e) for e in outlet_events],
                                              session=session)
    session.flush()


def _event_dict(event: Any) -> dict[str, Any]:
    """The JSON form the task sends the API server for an alias event."""
    return {"source_alias_name": event.source_alias_name,
            "dest_asset_key": {"name": event.dest_asset_key.name, "uri": event.dest_asset_key.uri},
            "dest_asset_extra": event.dest_asset_extra, "extra": event.extra}


def queued(session: Any, dag_id: str) -> int:
    """How many asset events wait to trigger ``dag_id`` (Airflow's queue the scheduler creates runs from)."""
    from airflow.models.asset import AssetDagRunQueue
    from sqlalchemy import func, select

    return int(session.scalar(select(func.count()).select_from(AssetDagRunQueue)
                              .where(AssetDagRunQueue.target_dag_id == dag_id)))


def spelled(table: str, how: str) -> Asset:
    """The consumer's Asset of table ``table`` in the spelling ``how``."""
    uri = f"s3://bkt/rf/tables/{table}"
    return {"uri": Asset(uri), "uri keyword": Asset(uri=uri), "name and uri": Asset(name=f"{table}_data", uri=uri),
            "trailing slash": Asset(f"{uri}/"), "upper-case scheme": Asset(uri.replace("s3://", "S3://")),
            "fragment": Asset(f"{uri}#latest")}[how]


SPELLINGS = ["uri", "uri keyword", "name and uri", "trailing slash", "upper-case scheme", "fragment"]


@pytest.mark.parametrize("how", SPELLINGS)
def test_a_consumer_parsed_before_the_publication_is_triggered_whatever_its_spelling(
        monkeypatch: pytest.MonkeyPatch, session: Any, how: str) -> None:
    table = f"before_{SPELLINGS.index(how)}"
    pub, cons = publisher(f"pub_{table}", table, None), consumer(f"cons_{table}", spelled(table, how))
    register(session, pub, cons)
    publish(monkeypatch, session, pub, "manual__1")
    assert queued(session, cons.dag_id) == 1, f"consumer by {how} not triggered"


def test_a_consumer_declared_after_the_first_publication_is_triggered_by_the_declared_name(
        monkeypatch: pytest.MonkeyPatch, session: Any) -> None:
    """The author declared the Asset's name (``publish_asset_name``): the first event creates that Asset, and a
    consumer written the way Airflow's docs teach (name and URI) is the same Asset, whenever it is parsed."""
    pub = publisher("pub_after", "after_0", "daily_after")
    register(session, pub)
    publish(monkeypatch, session, pub, "manual__1")
    cons = consumer("cons_after", Asset(name="daily_after", uri="s3://bkt/rf/tables/after_0"))
    register(session, cons)
    publish(monkeypatch, session, pub, "manual__2")
    assert queued(session, cons.dag_id) == 1


@pytest.mark.parametrize("uri", ["s3://bkt/rf/t", "S3://bkt/rf/t/", "s3://bkt/rf/t#v2", "s3://bkt/rf/t//",
                                 "s3://bkt/rf/t?b=2&a=1", "file:///tmp/x/t/", "FILE:///tmp/x/t"])
def test_our_uri_normalisation_is_airflows(uri: str) -> None:
    assert normalised_uri(uri) == Asset(uri=uri).uri


def test_the_declared_asset_name_is_checked_and_kept_in_the_job_document() -> None:
    from airflow_region_failover.exceptions import GraphError
    from airflow_region_failover.publication.declaration import declare

    pub = declare("report", "totals", "append", "daily_totals")
    assert Publication.from_dict(pub.to_dict()) == pub and pub.asset_name == "daily_totals"
    assert "asset_name" not in declare("report", "totals").to_dict()
    with pytest.raises(GraphError, match="step 'report': publish_asset_name='  ' cannot name an Airflow Asset"):
        declare("report", "totals", "append", "  ")

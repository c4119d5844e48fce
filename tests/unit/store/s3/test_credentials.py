"""Temporary AWS credentials (instance roles, IRSA, ``role_arn``) must refresh in a long-lived process: the store's
client signs with the hook session's refreshable credentials, not with a copy frozen at start-up. Executors and
spark-submitted scripts get credentials frozen at the moment of each write (store/s3/clients.py)."""

from __future__ import annotations

import pickle
from collections.abc import Iterator
from datetime import datetime, timedelta
from typing import Any

import boto3
import botocore.session
import pytest
from botocore.credentials import RefreshableCredentials
from dateutil.tz import tzutc

from airflow_region_failover.store.result_store import ResultStore


class Captured(Exception):
    """Raised by the send hook with the request's ``Authorization`` header."""


class Clock:
    """The credentials' clock; ``advance`` moves it past their expiry."""

    def __init__(self) -> None:
        self.now = datetime.now(tzutc())

    def __call__(self) -> datetime:
        return self.now

    def advance(self, delta: timedelta) -> None:
        self.now += delta


@pytest.fixture
def hook_session(monkeypatch: pytest.MonkeyPatch) -> Iterator[Clock]:
    """``S3Hook(aws_conn_id).get_session()`` returns a session whose credentials expire in one hour and refresh
    to ``AKIDREFRESHED<n>``; ``[region_failover]`` points the store at it."""
    import airflow.providers.amazon.aws.hooks.s3 as s3_hooks

    from airflow_region_failover.store.s3 import clients

    clock = Clock()
    refreshed: list[int] = []

    def refresh() -> dict[str, str]:
        refreshed.append(1)
        return {"access_key": f"AKIDREFRESHED{len(refreshed)}", "secret_key": "new-secret", "token": "new-token",
                "expiry_time": (clock() + timedelta(hours=1)).isoformat()}

    credentials = RefreshableCredentials("AKIDINITIAL", "old-secret", "old-token", clock() + timedelta(hours=1),
                                         refresh, "assume-role", time_fetcher=clock)
    core = botocore.session.get_session()
    core._credentials = credentials
    session = boto3.session.Session(botocore_session=core, region_name="eu-west-1")

    class ConnConfig:
        region_name = "eu-west-1"

        @staticmethod
        def get_service_endpoint_url(service: str) -> str:
            return "http://127.0.0.1:9"

    class FakeS3Hook:
        conn_config = ConnConfig()

        def __init__(self, aws_conn_id: str, **_: Any) -> None:
            assert aws_conn_id == "rf_role"

        def get_session(self, region_name: str | None = None) -> boto3.session.Session:
            return session

    monkeypatch.setattr(s3_hooks, "S3Hook", FakeS3Hook)
    monkeypatch.setenv("AIRFLOW__REGION_FAILOVER__STORE_BUCKET", "rf-bucket")
    monkeypatch.setenv("AIRFLOW__REGION_FAILOVER__STORE_PREFIX", "rf")
    monkeypatch.setenv("AIRFLOW__REGION_FAILOVER__STORE_AWS_CONN_ID", "rf_role")
    clients.client_for.cache_clear()
    yield clock
    clients.client_for.cache_clear()


def signing_key(store: ResultStore) -> str:
    """The access key id in the ``Authorization`` header of a request the store's client would send now."""
    client = store.objects.client

    def capture(request: Any, **_: Any) -> None:
        raise Captured(request.headers["Authorization"].decode() if isinstance(
            request.headers["Authorization"], bytes) else request.headers["Authorization"])

    client.meta.events.register_first("before-send.s3.HeadObject", capture)
    try:
        with pytest.raises(Captured) as caught:
            client.head_object(Bucket="rf-bucket", Key="rf/v1/probe")
    finally:
        client.meta.events.unregister("before-send.s3.HeadObject", capture)
    return str(caught.value).split("Credential=", 1)[1].split("/", 1)[0]


def test_the_store_client_signs_with_refreshed_credentials_after_expiry(hook_session: Clock) -> None:
    store = ResultStore.from_airflow()
    assert signing_key(store) == "AKIDINITIAL"
    hook_session.advance(timedelta(hours=2))  # the role's credentials expired an hour ago
    assert signing_key(store) == "AKIDREFRESHED1"


def test_the_process_reuses_one_client_across_refreshes(hook_session: Clock) -> None:
    first, second = ResultStore.from_airflow(), ResultStore.from_airflow()
    assert first.objects.client is second.objects.client
    assert "AKID" not in repr(first.config) and "secret" not in repr(first.config)


def test_executors_get_credentials_frozen_at_the_time_of_the_write(hook_session: Clock) -> None:
    from airflow_region_failover.store.s3.clients import portable

    store = ResultStore.from_airflow()
    hook_session.advance(timedelta(hours=2))
    shipped = pickle.loads(pickle.dumps(portable(store.config.access)))
    assert shipped.credentials is not None and shipped.credentials.access_key == "AKIDREFRESHED1"
    assert shipped.endpoint_url == "http://127.0.0.1:9" and shipped.conn_id is None
    assert "AKID" not in repr(shipped)


def test_spark_submit_environment_carries_the_current_credentials(hook_session: Clock) -> None:
    from airflow_region_failover.spark.submit import script_environment

    store = ResultStore.from_airflow()
    hook_session.advance(timedelta(hours=2))
    env = script_environment(store, "local[*]")
    assert (env["AWS_ACCESS_KEY_ID"], env["AWS_SECRET_ACCESS_KEY"], env["AWS_SESSION_TOKEN"]) == (
        "AKIDREFRESHED1", "new-secret", "new-token")

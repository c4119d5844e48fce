"""Configuration: credentials from an Airflow aws connection, bucket/prefix validated, secrets never shown."""

from __future__ import annotations

import json
import logging

import pytest

from airflow_region_failover.exceptions import UnsafeKeyError
from airflow_region_failover.store.config import StoreConfig, config_from_airflow
from airflow_region_failover.store.s3.clients import S3Access, S3Credentials, access_from_airflow, client_for, portable

SECRET = "s3cr3t-VALUE-never-logged"


@pytest.fixture
def aws_conn(monkeypatch: pytest.MonkeyPatch) -> str:
    conn = {"conn_type": "aws", "login": "AKIDEXAMPLE", "password": SECRET,
            "extra": {"endpoint_url": "http://127.0.0.1:9", "region_name": "eu-west-1"}}
    monkeypatch.setenv("AIRFLOW_CONN_RF_TEST_S3", json.dumps(conn))
    monkeypatch.setenv("AIRFLOW__REGION_FAILOVER__STORE_BUCKET", "rf-bucket")
    monkeypatch.setenv("AIRFLOW__REGION_FAILOVER__STORE_PREFIX", "team/rf")
    monkeypatch.setenv("AIRFLOW__REGION_FAILOVER__STORE_AWS_CONN_ID", "rf_test_s3")
    return "rf_test_s3"


def test_access_from_airflow_connection(aws_conn: str, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG)
    access = access_from_airflow(aws_conn)
    assert access.endpoint_url == "http://127.0.0.1:9" and access.region == "eu-west-1"
    assert access.conn_id == aws_conn and access.credentials is None  # the hook session signs; nothing copied
    assert portable(access).credentials == S3Credentials("AKIDEXAMPLE", SECRET, None)  # what executors get
    config = config_from_airflow()
    assert (config.bucket, config.prefix, config.access) == ("rf-bucket", "team/rf", access)
    assert SECRET not in repr(config) + repr(access) + caplog.text


def test_client_is_created_once_and_reused() -> None:
    access = S3Access("http://127.0.0.1:9", credentials=S3Credentials("a", "b"))
    assert client_for(access) is client_for(S3Access("http://127.0.0.1:9", credentials=S3Credentials("a", "b")))
    assert client_for(access) is not client_for(S3Access("http://127.0.0.1:10", credentials=S3Credentials("a", "b")))


@pytest.mark.parametrize("changes, message", [
    ({"bucket": "Bad_Bucket"}, "bucket"), ({"prefix": "../x"}, "prefix"), ({"part_size": 1024}, "part_size"),
    ({"upload_threads": 0}, "upload_threads"), ({"spark_io": "s3a"}, "spark_io"),
])
def test_bad_configuration_names_the_offender(changes: dict[str, object], message: str) -> None:
    values: dict[str, object] = {"bucket": "ok-bucket"}
    values.update(changes)
    with pytest.raises((UnsafeKeyError, ValueError), match=message):
        StoreConfig(**values)  # type: ignore[arg-type]


@pytest.mark.parametrize("value, expected", [(None, "executors"), ("driver", "driver"), ("executors", "executors")])
def test_spark_io_from_airflow(aws_conn: str, monkeypatch: pytest.MonkeyPatch, value: str | None,
                               expected: str) -> None:
    if value is not None:
        monkeypatch.setenv("AIRFLOW__REGION_FAILOVER__STORE_SPARK_IO", value)
    assert config_from_airflow().spark_io == expected


def test_bad_spark_io_names_the_option_and_the_choices(aws_conn: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AIRFLOW__REGION_FAILOVER__STORE_SPARK_IO", "s3a")
    with pytest.raises(ValueError, match=r"store_spark_io = 's3a': set it to 'executors' or 'driver'"):
        config_from_airflow()


def test_empty_bucket_names_the_option(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AIRFLOW__REGION_FAILOVER__STORE_BUCKET", "")
    with pytest.raises(ValueError, match="store_bucket"):
        config_from_airflow()


@pytest.mark.parametrize("runs, days, expected", [("", "", None), ("3", "", (3, None)), ("", "1.5", (None, 1.5))])
def test_retention_from_airflow(monkeypatch: pytest.MonkeyPatch, runs: str, days: str,
                                expected: tuple[int | None, float | None] | None) -> None:
    from airflow_region_failover.store.config import retention_from_airflow

    monkeypatch.setenv("AIRFLOW__REGION_FAILOVER__STORE_KEEP_LAST_RUNS", runs)
    monkeypatch.setenv("AIRFLOW__REGION_FAILOVER__STORE_KEEP_DAYS", days)
    retention = retention_from_airflow()
    assert (None if retention is None else (retention.keep_last_runs, retention.keep_days)) == expected


def test_bad_retention_names_the_options(monkeypatch: pytest.MonkeyPatch) -> None:
    from airflow_region_failover.store.config import retention_from_airflow

    monkeypatch.setenv("AIRFLOW__REGION_FAILOVER__STORE_KEEP_LAST_RUNS", "three")
    with pytest.raises(ValueError, match="store_keep_last_runs"):
        retention_from_airflow()


@pytest.mark.parametrize("days", ["nan", "inf", "-1"])
def test_retention_days_that_are_not_a_number_of_days_name_the_option(monkeypatch: pytest.MonkeyPatch,
                                                                       days: str) -> None:
    """``nan`` compares false with everything: accepted, it would keep or release runs by accident."""
    from airflow_region_failover.store.config import retention_from_airflow

    monkeypatch.setenv("AIRFLOW__REGION_FAILOVER__STORE_KEEP_DAYS", days)
    with pytest.raises(ValueError, match="store_keep_days"):
        retention_from_airflow()


def test_the_object_size_has_one_declared_default() -> None:
    from airflow_region_failover.store.config import MAX_OBJECT_BYTES
    from airflow_region_failover.store.dataplane import types

    target = types.Target.__dataclass_fields__["max_object_bytes"].default
    assert StoreConfig("bucket").max_object_bytes == target == MAX_OBJECT_BYTES == 64 * 1024 * 1024


def test_the_grace_floor_from_airflow(aws_conn: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """The floor every writer relies on (its heartbeat, its commit's bounds) is the deployment's option."""
    assert config_from_airflow().min_grace_seconds == 900.0
    monkeypatch.setenv("AIRFLOW__REGION_FAILOVER__STORE_MIN_GRACE_SECONDS", "20")
    assert config_from_airflow().min_grace_seconds == 20.0


def test_a_bad_grace_floor_names_the_option(aws_conn: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AIRFLOW__REGION_FAILOVER__STORE_MIN_GRACE_SECONDS", "-1")
    with pytest.raises(ValueError, match=r"store_min_grace_seconds = '-1': use a number of seconds > 0"):
        config_from_airflow()

"""The store's start-up checks run once per deployment, not once per process (store/deployment.py): the first
process probes conditional writes, checks the nesting and marks the prefix, recording the check in the marker; every
later process of the deployment starts with one GET of that marker. A marker from before this rule is brought up to
date by the next process that checks. On moto's in-memory S3, with a client that counts its requests."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import boto3
import pytest
from moto import mock_aws

from airflow_region_failover.store.config import StoreConfig
from airflow_region_failover.store.result_store import ResultStore
from airflow_region_failover.store.s3.clients import S3Access


class Counting:
    """A boto3 S3 client that counts the requests made through it."""

    def __init__(self, client: Any) -> None:
        self._client = client
        self.calls: list[str] = []

    def __getattr__(self, name: str) -> Any:
        attr = getattr(self._client, name)
        if not callable(attr) or name.startswith("_") or name in {"get_paginator", "meta", "exceptions"}:
            return attr

        def counted(*args: Any, **kwargs: Any) -> Any:
            self.calls.append(name)
            return attr(*args, **kwargs)

        return counted


@pytest.fixture
def s3() -> Iterator[Any]:
    with mock_aws():
        client = boto3.client("s3", region_name="us-east-1")
        client.create_bucket(Bucket="bkt")
        yield client


def process(s3: Any) -> tuple[ResultStore, Counting]:
    """A new process's store of the deployment ``bkt/pre`` (its own client, counted)."""
    counting = Counting(s3)
    return ResultStore(StoreConfig("bkt", "pre", S3Access()), client=counting), counting


def test_the_first_process_checks_and_every_later_one_starts_with_one_get(s3: Any) -> None:
    first, first_calls = process(s3)
    first.start_up()
    assert len(first_calls.calls) >= 4, first_calls.calls  # the probe's requests and the nesting check
    for _ in range(3):
        later, later_calls = process(s3)
        assert later.start_up() is later
        assert later_calls.calls == ["get_object"]
    marker = json.loads(s3.get_object(Bucket="bkt", Key="pre/_region_failover_deployment.json")["Body"].read())
    assert marker["conditional_writes"]["verified_at"]


def test_a_marker_written_before_the_check_was_recorded_is_brought_up_to_date(s3: Any) -> None:
    old = {"format": "airflow-region-failover/deployment", "version": 1, "bucket": "bkt", "prefix": "pre",
           "created_at": "2026-11-01T00:00:00.000+00:00"}
    s3.put_object(Bucket="bkt", Key="pre/_region_failover_deployment.json", Body=json.dumps(old).encode())
    checking, calls = process(s3)
    checking.start_up()
    assert "put_object" in calls.calls  # it probed
    later, later_calls = process(s3)
    later.start_up()
    assert later_calls.calls == ["get_object"]
    marker = json.loads(s3.get_object(Bucket="bkt", Key="pre/_region_failover_deployment.json")["Body"].read())
    assert marker["created_at"] == old["created_at"] and marker["conditional_writes"]["verified_at"]

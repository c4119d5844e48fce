"""Fixtures of the checkpoint tests: a result store on moto's in-memory S3 (bucket ``bkt``, prefix ``pre``, driver
I/O, a 60 s grace floor)."""

from __future__ import annotations

from collections.abc import Iterator

import boto3
import pytest
from moto import mock_aws

from airflow_region_failover.store.config import StoreConfig
from airflow_region_failover.store.result_store import ResultStore
from airflow_region_failover.store.s3.clients import S3Access


@pytest.fixture
def store() -> Iterator[ResultStore]:
    with mock_aws():
        client = boto3.client("s3", region_name="us-east-1")
        client.create_bucket(Bucket="bkt")
        yield ResultStore(StoreConfig("bkt", "pre", S3Access(), spark_io="driver", min_grace_seconds=60), client=client)

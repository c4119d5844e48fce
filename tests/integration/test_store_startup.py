"""Start-up of a deployment's store against a real S3-compatible server (SeaweedFS on loopback): the conditional
write probe passes and cleans up, each deployment marks its prefix, and a prefix nested in another deployment's
is refused at start-up and never swept by the outer one."""

from __future__ import annotations

import json
import secrets
import time
from collections.abc import Callable, Iterator

import pyarrow as pa
import pytest

from airflow_region_failover.exceptions import StoreError
from airflow_region_failover.graph.ids import PartitionId
from airflow_region_failover.standalone.seaweedfs import S3Endpoint
from airflow_region_failover.store.keys import AttemptId
from airflow_region_failover.store.result_store import ResultStore

pytestmark = pytest.mark.integration

P = PartitionId("orders->join", 0)
MARKER = "_region_failover_deployment.json"


@pytest.fixture
def base() -> str:
    return f"dep-{secrets.token_hex(4)}"


@pytest.fixture
def deployment(s3_server: S3Endpoint, monkeypatch: pytest.MonkeyPatch) -> Iterator[Callable[[str], ResultStore]]:
    """``deployment(prefix)``: this process's ``default_store()`` configured through Airflow for ``prefix``."""
    from airflow_region_failover.store import result_store

    conn = {"conn_type": "aws", "login": s3_server.access_key, "password": s3_server.secret_key,
            "extra": {"endpoint_url": s3_server.endpoint_url, "region_name": s3_server.region}}
    monkeypatch.setenv("AIRFLOW_CONN_RF_START_S3", json.dumps(conn))
    monkeypatch.setenv("AIRFLOW__REGION_FAILOVER__STORE_BUCKET", s3_server.bucket)
    monkeypatch.setenv("AIRFLOW__REGION_FAILOVER__STORE_AWS_CONN_ID", "rf_start_s3")

    def start(prefix: str) -> ResultStore:
        monkeypatch.setenv("AIRFLOW__REGION_FAILOVER__STORE_PREFIX", prefix)
        result_store.default_store.cache_clear()
        return result_store.default_store()

    yield start
    result_store.default_store.cache_clear()


def keys_under(store: ResultStore, prefix: str) -> list[str]:
    response = store.objects.client.list_objects_v2(Bucket=store.config.bucket, Prefix=prefix)
    return [o["Key"] for o in response.get("Contents", [])]


def test_start_up_probes_conditional_writes_cleans_up_and_marks_the_prefix(
        deployment: Callable[[str], ResultStore], base: str) -> None:
    store = deployment(base)
    assert keys_under(store, f"{base}/failover/v1/_probe/") == []  # the probe's object is gone
    marker = json.loads(store.objects.client.get_object(Bucket=store.config.bucket,
                                                        Key=f"{base}/{MARKER}")["Body"].read())
    assert marker["prefix"] == base
    assert deployment(base).layout == store.layout  # a second process of the same deployment starts fine


@pytest.mark.parametrize("inner", ["v1/x", "other", "failover"])
def test_a_prefix_inside_another_deployment_is_refused_naming_both(
        deployment: Callable[[str], ResultStore], base: str, inner: str) -> None:
    deployment(base)
    nested = f"{base}/{inner}"
    with pytest.raises(StoreError, match=rf"{nested}.*{base}\b"):
        deployment(nested)


@pytest.mark.parametrize("inner", ["v1/x", "v1/x/y", "v1/x/y/z", "v1"])
def test_the_sweeper_never_descends_into_a_nested_deployment(
        deployment: Callable[[str], ResultStore], base: str, inner: str) -> None:
    nested = deployment(f"{base}/{inner}")  # started first: no deployment encloses it yet
    manifest, _ = nested.write_arrow(pa.table({"x": [1, 2, 3]}), AttemptId("etl", "r1", P, 1))
    before = keys_under(nested, f"{base}/{inner}/")
    outer = deployment(base)

    report = outer.sweep(grace_seconds=3600, now=time.time() + 3605)

    assert keys_under(nested, f"{base}/{inner}/") == before, report
    assert nested.read_arrow(nested.manifest("etl", "r1", P)).num_rows == 3 and manifest.attempt == 1

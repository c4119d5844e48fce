"""gc against a real S3-compatible server (SeaweedFS on loopback): what the sweeper may and may not delete.

A writer is live while it uploads; the sweeper must judge it by its newest activity (completed objects *and* the
parts of its uploads in progress), never sweep what a committed or unreadable manifest may reference, and the CLI
must refuse a grace period a live writer could outlast.
"""

from __future__ import annotations

import json
import secrets
import time
from typing import Any

import pyarrow as pa
import pytest

from airflow_region_failover.graph.ids import PartitionId
from airflow_region_failover.standalone.seaweedfs import S3Endpoint
from airflow_region_failover.store import commit as protocol
from airflow_region_failover.store.keys import AttemptId
from airflow_region_failover.store.manifest import FORMAT, Manifest, ObjectEntry
from airflow_region_failover.store.result_store import ResultStore

pytestmark = pytest.mark.integration

P = PartitionId("orders->join", 0)
PART = b"p" * (5 * 1024 * 1024)  # S3's minimum part size
HOUR = 3600.0


def make_store(endpoint: S3Endpoint, prefix: str) -> ResultStore:
    return ResultStore.from_endpoint(endpoint.endpoint_url, endpoint.access_key, endpoint.secret_key,
                                     endpoint.bucket, prefix=prefix)


@pytest.fixture
def prefix() -> str:
    return f"gc-{secrets.token_hex(4)}"


def exists(store: ResultStore, key: str) -> bool:
    return store.objects.head_size(key) is not None


def open_uploads(store: ResultStore, prefix: str) -> set[str]:
    response = store.objects.client.list_multipart_uploads(Bucket=store.config.bucket, Prefix=prefix)
    return {u["UploadId"] for u in response.get("Uploads", [])}


def modified(store: ResultStore, key: str) -> float:
    (item,) = [i for i in store.objects.listing(key) if i.key == key]
    return item.modified


def last_part(store: ResultStore, key: str, upload_id: str) -> float:
    parts = store.objects.client.list_parts(Bucket=store.config.bucket, Key=key, UploadId=upload_id)["Parts"]
    return max(p["LastModified"].timestamp() for p in parts)


def sweep_at_cutoff(store: ResultStore, cutoff: float) -> Any:
    """Sweep as if ``cutoff`` were ``now - grace`` (a legal grace of one hour, a clock one hour ahead)."""
    return store.sweep(grace_seconds=HOUR, now=cutoff + HOUR)


def test_sweep_keeps_a_writer_that_is_still_uploading_its_next_object(s3_server: S3Endpoint, prefix: str) -> None:
    store = make_store(s3_server, prefix)
    client, bucket = store.objects.client, s3_server.bucket
    keys = store.run_keys("etl", "live")
    writer = "0123456789abcdef"
    first = keys.data_object(P, 1, writer, 0)
    client.put_object(Bucket=bucket, Key=first, Body=b"x" * 100)  # the writer's first object, completed "long ago"
    time.sleep(2.5)
    second = keys.data_object(P, 1, writer, 1)
    upload = client.create_multipart_upload(Bucket=bucket, Key=second)["UploadId"]
    client.upload_part(Bucket=bucket, Key=second, UploadId=upload, PartNumber=1, Body=PART)  # still uploading
    cutoff = (modified(store, first) + last_part(store, second, upload)) / 2
    assert modified(store, first) < cutoff < last_part(store, second, upload)

    report = sweep_at_cutoff(store, cutoff)

    assert exists(store, first), report  # the live writer's completed object survives
    assert upload in open_uploads(store, keys.run_prefix), report
    client.abort_multipart_upload(Bucket=bucket, Key=second, UploadId=upload)


def test_sweep_aborts_uploads_by_their_last_part_not_their_start(s3_server: S3Endpoint, prefix: str) -> None:
    store = make_store(s3_server, prefix)
    client, bucket = store.objects.client, s3_server.bucket
    keys = store.run_keys("etl", "long")
    store.write_arrow(pa.table({"x": [1, 2, 3]}), AttemptId("etl", "long", P, 1))
    busy = keys.data_object(P, 2, "aaaaaaaaaaaaaaaa", 0)
    stale = keys.data_object(P, 2, "bbbbbbbbbbbbbbbb", 0)
    busy_id = client.create_multipart_upload(Bucket=bucket, Key=busy)["UploadId"]
    stale_id = client.create_multipart_upload(Bucket=bucket, Key=stale)["UploadId"]
    client.upload_part(Bucket=bucket, Key=busy, UploadId=busy_id, PartNumber=1, Body=PART)
    client.upload_part(Bucket=bucket, Key=stale, UploadId=stale_id, PartNumber=1, Body=PART)
    time.sleep(2.5)
    client.upload_part(Bucket=bucket, Key=busy, UploadId=busy_id, PartNumber=2, Body=PART)  # long upload, active
    cutoff = (last_part(store, stale, stale_id) + last_part(store, busy, busy_id)) / 2
    assert last_part(store, stale, stale_id) < cutoff < last_part(store, busy, busy_id)

    report = sweep_at_cutoff(store, cutoff)

    uploads = open_uploads(store, keys.run_prefix)
    assert busy_id in uploads, report  # initiated before the cutoff, but its last part is younger
    assert stale_id not in uploads and report.aborted_uploads == 1, report
    client.abort_multipart_upload(Bucket=bucket, Key=busy, UploadId=busy_id)


def test_sweep_aborts_a_stale_upload_of_a_run_that_has_no_objects_left(s3_server: S3Endpoint, prefix: str) -> None:
    store = make_store(s3_server, prefix)
    client, bucket = store.objects.client, s3_server.bucket
    key = store.run_keys("etl", "released").data_object(P, 1, "cccccccccccccccc", 0)
    upload = client.create_multipart_upload(Bucket=bucket, Key=key)["UploadId"]  # a zombie's, its run released
    client.upload_part(Bucket=bucket, Key=key, UploadId=upload, PartNumber=1, Body=PART)
    report = sweep_at_cutoff(store, time.time() + 5)
    assert report.aborted_uploads == 1 and upload not in open_uploads(store, f"{prefix}/")


@pytest.mark.parametrize("grace", ["0 s", "1 s", "14 min"])
def test_gc_cli_refuses_a_grace_a_live_writer_could_outlast(grace: str, airflow_store: ResultStore,
                                                             capsys: pytest.CaptureFixture[str]) -> None:
    from airflow_region_failover.cli.main import main

    keys = airflow_store.run_keys("etl", "cli")
    orphan = keys.data_object(P, 1, "dddddddddddddddd", 0)
    airflow_store.objects.client.put_object(Bucket=airflow_store.config.bucket, Key=orphan, Body=b"x")

    code = main(["gc", "--grace", grace])

    err = capsys.readouterr().err
    assert code == 2 and "--grace" in err and "15 min" in err, err
    assert exists(airflow_store, orphan)


def test_gc_cli_accepts_the_minimum_grace(airflow_store: ResultStore, capsys: pytest.CaptureFixture[str]) -> None:
    from airflow_region_failover.cli.main import main

    assert main(["gc", "--grace", "15 min", "--dry-run"]) == 0
    out = capsys.readouterr().out  # Airflow may log to stdout before the summary
    assert json.loads(out[out.index("{\n"):])["dry_run"] is True


def test_gc_cli_takes_its_floor_from_the_deployments_option(
        airflow_store: ResultStore, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    """``store_min_grace_seconds`` lowered (a test stack): gc accepts a grace down to it, refuses below, naming it."""
    from airflow_region_failover.cli.main import main

    monkeypatch.setenv("AIRFLOW__REGION_FAILOVER__STORE_MIN_GRACE_SECONDS", "60")
    assert main(["gc", "--grace", "59 s", "--dry-run"]) == 2
    err = capsys.readouterr().err
    assert "--grace of 59 s is below the minimum of 1 min" in err and "store_min_grace_seconds" in err, err
    assert main(["gc", "--grace", "1 min", "--dry-run"]) == 0


def test_commit_refuses_a_manifest_whose_objects_are_not_all_there(s3_server: S3Endpoint, prefix: str) -> None:
    from airflow_region_failover.exceptions import StoreError

    store = make_store(s3_server, prefix)
    keys = store.run_keys("etl", "missing")
    writer = "0123456789abcdef"
    store.begin_attempt(AttemptId("etl", "missing", P, 1))
    present, absent = keys.data_object(P, 1, writer, 0), keys.data_object(P, 1, writer, 1)
    store.objects.client.put_object(Bucket=s3_server.bucket, Key=present, Body=b"x" * 10)

    def manifest(*entries: tuple[str, int]) -> Manifest:
        return Manifest("etl", "missing", P, 1, writer, "{}", 1,
                        tuple(ObjectEntry(k[len(keys.run_prefix):], size, "0" * 64) for k, size in entries),
                        protocol.now_iso())

    with pytest.raises(StoreError, match=absent):  # an object the manifest lists is not there
        protocol.commit(store.objects, keys, manifest((present, 10), (absent, 10)))
    with pytest.raises(StoreError, match=present):  # an object has another size than recorded
        protocol.commit(store.objects, keys, manifest((present, 11)))
    assert store.objects.get(keys.manifest(P, 1)) is None  # nothing committed
    assert protocol.commit(store.objects, keys, manifest((present, 10))).attempt == 1


def test_sweep_keeps_every_object_of_a_result_with_an_unreadable_manifest(s3_server: S3Endpoint,
                                                                         prefix: str) -> None:
    store = make_store(s3_server, prefix)
    client, bucket = store.objects.client, s3_server.bucket
    store.write_arrow(pa.table({"x": [1]}), AttemptId("etl", "upgrade", P, 1))
    keys = store.run_keys("etl", "upgrade")
    newer = keys.data_object(P, 2, "eeeeeeeeeeeeeeee", 0)  # written by a newer provider during an upgrade
    client.put_object(Bucket=bucket, Key=newer, Body=b"parquet of a newer writer")
    body = {"format": FORMAT, "version": 2, "objects": [{"key": newer[len(keys.run_prefix):]}], "layout": "v2"}
    manifest_key = keys.manifest(P, 2)
    client.put_object(Bucket=bucket, Key=manifest_key, Body=json.dumps(body).encode())
    other = keys.data_object(PartitionId("other", 0), 1, "ffffffffffffffff", 0)
    client.put_object(Bucket=bucket, Key=other, Body=b"an orphan of another result")

    report = sweep_at_cutoff(store, time.time() + 5)

    assert exists(store, newer), report  # what the unreadable manifest may reference is kept
    assert not exists(store, other), report  # other results are swept as before
    assert manifest_key in str(report.unreadable_manifests), report


# -- a deployment configured through Airflow (what the CLI builds) -------------------------------------------------
@pytest.fixture
def airflow_store(s3_server: S3Endpoint, prefix: str, monkeypatch: pytest.MonkeyPatch) -> Any:
    """``default_store()`` configured through ``[region_failover]`` and an aws connection to SeaweedFS."""
    from airflow_region_failover.store import result_store

    conn = {"conn_type": "aws", "login": s3_server.access_key, "password": s3_server.secret_key,
            "extra": {"endpoint_url": s3_server.endpoint_url, "region_name": s3_server.region}}
    monkeypatch.setenv("AIRFLOW_CONN_RF_GC_S3", json.dumps(conn))
    monkeypatch.setenv("AIRFLOW__REGION_FAILOVER__STORE_BUCKET", s3_server.bucket)
    monkeypatch.setenv("AIRFLOW__REGION_FAILOVER__STORE_PREFIX", prefix)
    monkeypatch.setenv("AIRFLOW__REGION_FAILOVER__STORE_AWS_CONN_ID", "rf_gc_s3")
    monkeypatch.setenv("AIRFLOW__REGION_FAILOVER__STORE_KEEP_LAST_RUNS", "")
    monkeypatch.setenv("AIRFLOW__REGION_FAILOVER__STORE_KEEP_DAYS", "")
    result_store.default_store.cache_clear()
    yield make_store(s3_server, prefix)
    result_store.default_store.cache_clear()

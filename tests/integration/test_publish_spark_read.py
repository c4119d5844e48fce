"""Published Delta tables read back by Spark's own Delta reader (``delta-spark`` through ``s3a://`` on a real S3
server, SeaweedFS on loopback): every table version holds exactly the rows delta-rs wrote, version by version.

    sink#0 --\\
              +--> [store: result "<t>_sink", 2 committed partitions per run] --publish--> s3://.../tables/<t> (Delta)
    sink#1 --/                                                    Spark 4.2 + delta-spark 4.4.0 --s3a--> versionAsOf v
"""

from __future__ import annotations

import json
import secrets
from datetime import date, datetime, timezone
from decimal import Decimal
from typing import Any

import pyarrow as pa
import pytest

from airflow_region_failover.graph.ids import PartitionId
from airflow_region_failover.publication import delta, staging
from airflow_region_failover.publication.declaration import Publication, PublishMode, RunTimes, transaction_of
from airflow_region_failover.store.keys import AttemptId
from airflow_region_failover.store.result_store import ResultStore
from tests.support.delta_spark import read_tables, s3a_options

pytestmark = pytest.mark.integration

DAG = "daily_prices"
DAYS = [RunTimes(DAG, f"scheduled__2026-01-0{d}", datetime(2026, 1, d, tzinfo=timezone.utc)) for d in (1, 2, 3)]


@pytest.fixture
def store(s3_server: Any) -> ResultStore:
    return ResultStore.from_endpoint(s3_server.endpoint_url, s3_server.access_key, s3_server.secret_key,
                                     s3_server.bucket, prefix=f"it-{secrets.token_hex(4)}")


def rows_of(run: RunTimes, index: int) -> pa.Table:
    """One partition of the sink result of ``run``: every column type a Spark job commonly produces, and nulls."""
    day = run.logical_date.day  # type: ignore[union-attr]
    n = 2 + index
    return pa.table({
        "sku": [f"d{day}-p{index}-{k}" for k in range(n)],
        "units": pa.array([day * 100 + k if k else None for k in range(n)], pa.int64()),
        "price": pa.array([Decimal(f"{day}.{k}5") for k in range(n)], pa.decimal128(10, 2)),
        "ratio": [k / 3 for k in range(n)],
        "on_sale": [k % 2 == 0 for k in range(n)],
        "day": pa.array([date(2026, 1, day)] * n, pa.date32()),
        "at": pa.array([datetime(2026, 1, day, 8, k, 30, 123456) for k in range(n)], pa.timestamp("ns")),
    })


def plain(row: dict[str, Any]) -> dict[str, Any]:
    """A row as the reader reports it: timestamps (UTC, microseconds) and dates in ISO 8601, decimals as text."""
    out = {}
    for key, value in row.items():
        if isinstance(value, datetime):
            value = value.astimezone(timezone.utc).replace(tzinfo=None) if value.tzinfo else value
        out[key] = value.isoformat() if isinstance(value, (datetime, date)) else (
            str(value) if isinstance(value, Decimal) else value)
    return out


def ordered(rows: list[dict[str, Any]]) -> list[str]:
    return sorted(json.dumps(row, sort_keys=True) for row in rows)


def publish_all(store: ResultStore, table: str, mode: PublishMode) -> tuple[str, dict[int, list[dict[str, Any]]]]:
    """Publish the sink result (step ``<table>_sink``) of the three runs to ``table``; returns its URI and, per table
    version, the rows delta-rs was given."""
    result = f"{table}_sink"
    uri = f"s3://{store.config.bucket}/{store.config.prefix}/tables/{table}"
    target = delta.target_for(uri, store.config.access)
    expected: dict[int, list[dict[str, Any]]] = {}
    current: list[dict[str, Any]] = []
    for run in DAYS:
        parts = [rows_of(run, i) for i in range(2)]
        for i, part in enumerate(parts):
            store.write_arrow(part, AttemptId(DAG, run.run_id, PartitionId(result, i), 1))
        outcome = delta.publish(store, DAG, run.run_id, result, 2, target,
                                transaction_of(Publication(result, table, mode), run))
        assert outcome.committed and outcome.version is not None, outcome
        written = [plain(r) for part in parts for r in staging.delta_ready(part).to_pylist()]
        current = (current if mode is PublishMode.APPEND else []) + written
        expected[outcome.version] = list(current)
    assert not delta.publish(store, DAG, DAYS[2].run_id, result, 2, target,
                             transaction_of(Publication(result, table, mode), DAYS[2])).committed  # published once
    return uri, expected


def test_spark_reads_every_published_version_with_the_rows_delta_rs_wrote(store: ResultStore, s3_server: Any) -> None:
    appended, appended_rows = publish_all(store, "prices", PublishMode.APPEND)
    replaced, replaced_rows = publish_all(store, "latest", PublishMode.OVERWRITE)
    assert sorted(appended_rows) == sorted(replaced_rows) == [0, 1, 2]
    s3a = s3a_options(s3_server.endpoint_url, s3_server.access_key, s3_server.secret_key)
    read = read_tables({appended.replace("s3://", "s3a://", 1): [0, 1, 2],
                        replaced.replace("s3://", "s3a://", 1): [0, 1, 2]}, s3a)
    for uri, expected in ((appended, appended_rows), (replaced, replaced_rows)):
        got = read[uri.replace("s3://", "s3a://", 1)]
        for version, rows in expected.items():
            assert ordered(got[version]) == ordered(rows), (uri, version)
    assert len(read[appended.replace("s3://", "s3a://", 1)][2]) == 3 * (2 + 3)  # three runs of 2 + 3 rows
    assert len(read[replaced.replace("s3://", "s3a://", 1)][2]) == 2 + 3

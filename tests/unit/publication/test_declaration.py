"""Publication rules (publication/declaration.py): declarations, table locations and the run's Delta application
transaction.

    extract#0 ==> report#0 --\\
    extract#1 ==> report#1 ----> report.publish --> <publish_root>/<table> (one Delta commit per run)
"""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

import pytest

from airflow_region_failover.exceptions import GraphError
from airflow_region_failover.publication.declaration import (
    Publication,
    PublishMode,
    RunTimes,
    check_publications,
    declare,
    default_root,
    table_uri,
    transaction_of,
)

UTC = timezone.utc
DAY = datetime(2026, 1, 2, tzinfo=UTC)


@pytest.mark.parametrize("table", ["daily_totals", "_t", "T9", "a" * 100])
def test_good_table_names(table: str) -> None:
    assert declare("report", table).table == table


@pytest.mark.parametrize("table", ["", "9lives", "a-b", "a.b", "a/b", "../x", "tä", "a" * 101, 7, None])
def test_bad_table_names_name_the_step_and_the_fix(table: object) -> None:
    with pytest.raises(GraphError, match=r"step 'report': publish=.* is not a table name; use letters"):
        declare("report", table)


def test_modes_parse_case_insensitively_and_a_bad_one_names_the_choices() -> None:
    assert declare("r", "t", "APPEND").mode is PublishMode.APPEND
    assert declare("r", "t", "overwrite").mode is PublishMode.OVERWRITE
    with pytest.raises(GraphError, match=r"step 'r': publish_mode='upsert' is unknown; use 'append' .* 'overwrite'"):
        declare("r", "t", "upsert")


def test_only_sinks_publish_and_each_table_has_one_publisher() -> None:
    check_publications((declare("report", "t"),), frozenset({"report"}))
    with pytest.raises(GraphError, match=r"step 'join' has outgoing edges, so it is no sink"):
        check_publications((declare("join", "t"),), frozenset({"report"}))
    with pytest.raises(GraphError, match=r"steps 'a' and 'b' both publish table 'T'"):
        check_publications((declare("a", "t"), declare("b", "T")), frozenset({"a", "b"}))


def test_the_json_form_round_trips_and_is_validated() -> None:
    pub = declare("report", "totals", "overwrite")
    assert Publication.from_dict(pub.to_dict()) == pub
    assert pub.task_id == "report.publish"
    with pytest.raises(GraphError):
        Publication.from_dict({"step": "report", "table": "a-b"})
    with pytest.raises(GraphError):
        Publication.from_dict(["report"])


def test_append_has_one_app_id_per_logical_date_and_runs_of_that_date_share_it() -> None:
    pub = declare("report", "totals", "append")
    scheduled = transaction_of(pub, RunTimes("d", "scheduled__2026-01-02", DAY, DAY + timedelta(days=1)))
    rerun = transaction_of(pub, RunTimes("d", "manual__again", DAY))
    other_day = transaction_of(pub, RunTimes("d", "scheduled__2026-01-03", DAY + timedelta(days=1)))
    assert scheduled.app_id == rerun.app_id == "region-failover:d:totals:2026-01-02T00:00:00Z"
    assert other_day.app_id != scheduled.app_id
    assert scheduled.published_by(scheduled.version) and scheduled.published_by(0)
    assert not scheduled.published_by(None)


def test_append_without_logical_date_is_keyed_by_run_id() -> None:
    pub = declare("report", "totals")
    txn = transaction_of(pub, RunTimes("d", "manual__x", None, None, DAY))
    assert txn.app_id == "region-failover:d:totals:run:manual__x" and txn.run_key == "run:manual__x"


def test_overwrite_orders_runs_by_their_as_of_time() -> None:
    pub = declare("report", "latest", "overwrite")
    older = transaction_of(pub, RunTimes("d", "a", DAY, DAY + timedelta(days=1)))
    newer = transaction_of(pub, RunTimes("d", "b", DAY + timedelta(days=1), DAY + timedelta(days=2)))
    manual = transaction_of(pub, RunTimes("d", "c", None, None, datetime(2026, 1, 3, 12)))  # naive = UTC
    assert older.app_id == newer.app_id == manual.app_id == "region-failover:d:latest"
    assert older.version == int((DAY + timedelta(days=1)).timestamp() * 1_000_000)
    assert older.version < manual.version < newer.version
    assert newer.published_by(newer.version) and not newer.published_by(older.version)
    assert older.published_by(newer.version), "an older run never replaces a newer one"
    with pytest.raises(GraphError, match="cannot be ordered"):
        transaction_of(pub, RunTimes("d", "x"))


def test_table_locations() -> None:
    assert default_root("bucket", "region-failover") == "s3://bucket/region-failover/tables"
    assert default_root("bucket", "") == "s3://bucket/tables"
    assert table_uri("s3://b/p/tables/", "t") == "s3://b/p/tables/t"
    assert table_uri("/data/tables", "t") == "/data/tables/t"
    assert table_uri("file:///data/tables", "t") == "/data/tables/t"
    for bad in ("gs://b/x", "s3:///x", ""):
        with pytest.raises(GraphError, match="publish_root"):
            table_uri(bad, "t")


def test_publishing_without_the_extra_names_it(monkeypatch: pytest.MonkeyPatch) -> None:
    import sys

    from airflow_region_failover.exceptions import PublishError
    from airflow_region_failover.publication import delta as tables

    monkeypatch.setitem(sys.modules, "deltalake", None)  # as if not installed
    with pytest.raises(PublishError, match=r"pip install 'airflow-provider-region-failover\[publish\]'"):
        tables.deltalake()


def test_storage_options_carry_the_stores_access_and_hide_it_from_repr() -> None:
    from airflow_region_failover.publication.delta import target_for
    from airflow_region_failover.store.s3.clients import S3Access, S3Credentials

    access = S3Access("http://127.0.0.1:9000", "eu-west-1", S3Credentials("AK", "SECRET"))
    target = target_for("s3://b/p/tables/t", access)
    assert target.storage_options == {"AWS_REGION": "eu-west-1", "AWS_ENDPOINT_URL": "http://127.0.0.1:9000",
                                      "AWS_ALLOW_HTTP": "true", "AWS_ACCESS_KEY_ID": "AK",
                                      "AWS_SECRET_ACCESS_KEY": "SECRET"}
    assert "SECRET" not in repr(target)
    assert target_for("/tmp/tables/t", None).storage_options == {}

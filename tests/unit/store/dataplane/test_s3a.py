"""How Spark's JVM reaches the store (store/dataplane/s3a.py): the ``fs.s3a.*`` options of a read from the store's
access, no credentials handed over that would expire inside S3A's cached client, and the session asked once whether it
can read the store that way, with one log line naming the fix when it cannot (a fake session; the real ones are
in tests/integration/test_store_jvm.py)."""

from __future__ import annotations

import logging
from typing import Any

import pytest

from airflow_region_failover.store.dataplane import s3a
from airflow_region_failover.store.keys import Layout
from airflow_region_failover.store.s3.clients import S3Access, S3Credentials

LAYOUT = Layout("bkt", "pre")
STATIC = S3Access("http://127.0.0.1:8333", "eu-west-1", S3Credentials("AK", "SK"))


def test_options_carry_endpoint_path_style_and_long_lived_keys() -> None:
    options = s3a.hadoop_options(STATIC, s3a.Mode.AUTO)
    assert options is not None
    assert {k: options[k] for k in ("fs.s3a.endpoint", "fs.s3a.path.style.access", "fs.s3a.connection.ssl.enabled",
                                    "fs.s3a.endpoint.region", "fs.s3a.access.key", "fs.s3a.secret.key")} == {
        "fs.s3a.endpoint": "http://127.0.0.1:8333", "fs.s3a.path.style.access": "true",
        "fs.s3a.connection.ssl.enabled": "false", "fs.s3a.endpoint.region": "eu-west-1",
        "fs.s3a.access.key": "AK", "fs.s3a.secret.key": "SK"}
    assert options["fs.s3a.aws.credentials.provider"] == s3a.SIMPLE
    aws = s3a.hadoop_options(S3Access(region="us-east-1"), s3a.Mode.AUTO)
    assert aws is not None and "fs.s3a.endpoint" not in aws and "fs.s3a.access.key" not in aws  # S3A's own chain
    temporary = S3Access(credentials=S3Credentials("AK", "SK", "TOKEN"))
    assert s3a.hadoop_options(temporary, s3a.Mode.AUTO) is None
    assert s3a.hadoop_options(temporary, s3a.Mode.CLUSTER) == {}
    assert s3a.hadoop_options(STATIC, s3a.Mode.OFF) is None


class FakeSession:
    """Answers ``spark.read.options(...).schema(...).parquet(url).schema`` or raises like a JVM without S3A."""

    def __init__(self, error: str | None) -> None:
        self.error, self.asked = error, 0
        self.read = self

    def options(self, **options: str) -> FakeSession:
        return self

    def schema(self, schema: str) -> FakeSession:
        return self

    def parquet(self, url: str) -> Any:
        self.asked += 1
        if self.error:
            raise RuntimeError(self.error + "\n\tat org.apache.hadoop.fs.FileSystem.getFileSystemClass")
        assert url == "s3a://bkt/pre/cas/v1/ab/x.parquet"
        return self


def test_a_session_is_asked_once_and_the_answer_logged_once(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger=s3a.__name__)
    without = FakeSession('[UNSUPPORTED_FILE_SYSTEM] No FileSystem for scheme "s3a"')
    for _ in range(3):
        assert s3a.jvm_reader(without, LAYOUT, STATIC, s3a.Mode.AUTO, "pre/cas/v1/ab/x.parquet") is None
    with_s3a = FakeSession(None)
    for _ in range(3):
        assert s3a.jvm_reader(with_s3a, LAYOUT, STATIC, s3a.Mode.AUTO, "pre/cas/v1/ab/x.parquet")
    assert (without.asked, with_s3a.asked) == (1, 1)
    lines = [r.getMessage() for r in caplog.records]
    assert len(lines) == 2
    assert 'Python workers, not Spark\'s own Parquet reader: [UNSUPPORTED_FILE_SYSTEM] No FileSystem for scheme "s3a"' \
           f" (to use it, put hadoop-aws on the session's classpath: spark.jars.packages={s3a.PACKAGES})" in lines[0]
    assert "Spark's own Parquet reader through s3a:// (http://127.0.0.1:8333)" in lines[1]
    assert all("SK" not in line for line in lines)


def test_temporary_credentials_keep_the_python_path_and_say_why(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger=s3a.__name__)
    session = FakeSession(None)
    temporary = S3Access(credentials=S3Credentials("AK", "SK", "TOKEN"))
    assert s3a.jvm_reader(session, LAYOUT, temporary, s3a.Mode.AUTO, "pre/cas/v1/ab/x.parquet") is None
    assert session.asked == 0 and "store_jvm_io = cluster" in caplog.text and "TOKEN" not in caplog.text
    assert s3a.jvm_reader(session, LAYOUT, temporary, s3a.Mode.CLUSTER, "pre/cas/v1/ab/x.parquet") == {}


def test_only_the_s3a_jars_of_the_environment_are_put_on_a_classpath(tmp_path: Any,
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    jars = tmp_path / "jars"
    jars.mkdir()
    for name in ("hadoop-aws-3.5.0.jar", "bundle-2.35.4.jar", "analyticsaccelerator-s3-1.3.1.jar",
                 "delta-spark_2.13-4.4.0.jar"):
        (jars / name).write_bytes(b"")
    monkeypatch.setattr("sys.prefix", str(tmp_path))
    conf = s3a.with_jars({"spark.ui.enabled": "false"})
    assert "spark.jars" not in conf, "Spark would copy each jar into every application's directories"
    found = conf["spark.driver.extraClassPath"].split(":")
    assert [p.rsplit("/", 1)[1] for p in found] == ["analyticsaccelerator-s3-1.3.1.jar", "bundle-2.35.4.jar",
                                                   "hadoop-aws-3.5.0.jar"]
    assert conf["spark.executor.extraClassPath"] == conf["spark.driver.extraClassPath"]
    for own in ({"spark.jars.packages": s3a.PACKAGES}, {"spark.jars": "x.jar"},
                {"spark.driver.extraClassPath": "/opt/x.jar"}):
        assert s3a.with_jars(own) == own


class Conf:
    """A session's ``spark.conf``: ``values`` set, ``defaults`` Spark's own (what ``get`` returns when unset)."""

    def __init__(self, **values: str) -> None:
        self.values, self.defaults = dict(values), {s3a.LISTING: "32"}

    def get(self, key: str, default: Any = None) -> Any:
        return self.values.get(key, self.defaults.get(key, default))

    def set(self, key: str, value: str) -> None:
        self.values[key] = value

    def unset(self, key: str) -> None:
        self.values.pop(key, None)


class Session:
    def __init__(self, **values: str) -> None:
        self.conf = Conf(**values)


def test_settings_hold_for_the_block_and_are_set_back_also_on_errors() -> None:
    spark = Session(**{"a": "1"})
    with pytest.raises(RuntimeError, match="boom"), s3a.session_settings(spark, [("a", "2"), ("b", "3")]):
        assert spark.conf.values == {"a": "2", "b": "3"}
        raise RuntimeError("boom")
    assert spark.conf.values == {"a": "1"}, "a set back, b unset"


def test_a_read_of_up_to_1024_objects_is_listed_from_the_driver() -> None:
    spark = Session()
    with s3a.listed_on_driver(spark, 200):
        assert spark.conf.get(s3a.LISTING) == "200"
    assert spark.conf.values == {s3a.LISTING: "32"}, "Spark's default, read before the block, set back"
    with s3a.listed_on_driver(spark, s3a.DRIVER_LISTING_MAX + 1):
        assert spark.conf.get(s3a.LISTING) == "32", "more objects: Spark's own listing job"

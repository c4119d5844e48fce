"""The Spark session of the integration modules that run each test on embedded Spark and on Spark Connect."""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from typing import Any

import pytest


def embedded_session(shuffle_partitions: int | None = None) -> Any:
    """An embedded ``local[2]`` session whose JVM has the pinned ``s3a://`` jars. Every embedded session of the test
    process is built here: the driver's JVM is started once, by the first session, and a later session's
    ``spark.jars`` never reach the driver's own class path (a module that started Spark without them made the next
    module's store reads fall back to the Python path)."""
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    os.environ["PYSPARK_PYTHON"] = sys.executable
    from pyspark.sql import SparkSession

    from airflow_region_failover.store.dataplane.s3a import with_jars

    builder = SparkSession.builder.master("local[2]").config("spark.ui.enabled", "false")
    for key, value in with_jars({}).items():
        builder = builder.config(key, value)
    if shuffle_partitions is not None:
        builder = builder.config("spark.sql.shuffle.partitions", str(shuffle_partitions))
    return builder.getOrCreate()


def embedded(shuffle_partitions: int | None = None) -> Iterator[Any]:
    """Yield an embedded session (:func:`embedded_session`) and stop it after: the body of a module's ``spark``
    fixture."""
    session = embedded_session(shuffle_partitions)
    yield session
    session.stop()


def spark_session(request: pytest.FixtureRequest, shuffle_partitions: int | None = None) -> Iterator[Any]:
    """Yield an embedded ``local[2]`` session (``request.param == "embedded"``) or a Spark Connect session of the
    ``spark_connect`` fixture, and stop it after. Executors import this package (``PYSPARK_PYTHON``). Spark
    Connect sets PySpark's Connect marker in the environment; it is restored afterwards, or a later module's
    embedded session would be refused (``CONNECT_URL_NOT_SET``)."""
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    os.environ["PYSPARK_PYTHON"] = sys.executable
    from pyspark.sql import SparkSession

    if request.param == "embedded":
        yield from embedded(shuffle_partitions)
        return
    from airflow_region_failover.standalone.processes import PYSPARK_CLIENT_MARKERS

    before = {key: os.environ.get(key) for key in PYSPARK_CLIENT_MARKERS}
    session = SparkSession.builder.remote(request.getfixturevalue("spark_connect")).getOrCreate()
    try:
        yield session
    finally:
        session.stop()
        for key, value in before.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value


def typed_rows(spark: Any, n: int = 30_000) -> Any:
    """``n`` rows in 3 Spark partitions of most column kinds: fields, array elements, struct fields and map values
    that are never null (Spark's file reader makes them nullable: the store restores that), and nullable ones with
    nulls."""
    return spark.range(0, n, 1, 3).selectExpr(
        "id", "id % 13 AS k", "cast(id * 0.5 AS double) AS v", "concat('s', id % 101) AS s",
        "to_date('2024-01-01') AS d", "cast(id AS decimal(12, 2)) AS dec", "timestamp_seconds(id) AS ts",
        "array(id, id + 1) AS arr", "named_struct('a', id, 'b', array(named_struct('z', id % 13))) AS st",
        "map(id, concat('v', id)) AS m", "IF(id % 7 = 0, NULL, named_struct('q', id)) AS maybe",
        "IF(id % 5 = 0, NULL, id) AS sometimes")

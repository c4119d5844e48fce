"""A Spark Connect URL that nothing answers fails the try at once with one error naming the URL and the Airflow
connection (pyspark's own retry policy would wait ≈ 10 minutes per try, silently)."""

from __future__ import annotations

import socket
import time

import pytest

from airflow_region_failover.exceptions import RegionFailoverError
from airflow_region_failover.spark import session
from airflow_region_failover.spark.session import CONNECT, SparkTarget


@pytest.mark.timeout(60)
def test_a_spark_connect_url_nothing_answers_fails_within_30_s_naming_the_url_and_the_connection() -> None:
    with socket.socket() as bound:  # bound but never listening: a connect is refused, like a stopped server
        bound.bind(("127.0.0.1", 0))
        port = bound.getsockname()[1]
        target = SparkTarget(CONNECT, f"sc://127.0.0.1:{port}/;token=s3cr3t;use_ssl=false", "spark_prod")
        started = time.monotonic()
        with pytest.raises(RegionFailoverError) as raised:
            session.get_session(target).range(1).count()
    message = str(raised.value)
    assert time.monotonic() - started < 30, message
    assert f"sc://127.0.0.1:{port}" in message and "'spark_prod'" in message, message
    assert "s3cr3t" not in message and "\n" not in message, message


@pytest.mark.timeout(60)
def test_a_port_that_accepts_but_never_answers_fails_within_30_s_too() -> None:
    with socket.socket() as silent:  # listening, never accepting: the kernel completes the handshake, nobody speaks
        silent.bind(("127.0.0.1", 0))
        silent.listen(8)
        port = silent.getsockname()[1]
        started = time.monotonic()
        with pytest.raises(RegionFailoverError) as raised:
            session.get_session(SparkTarget(CONNECT, f"sc://127.0.0.1:{port}", "spark_prod")).range(1).count()
    assert time.monotonic() - started < 30, raised.value
    assert f"sc://127.0.0.1:{port}" in str(raised.value) and "'spark_prod'" in str(raised.value), raised.value


def test_a_grpc_server_passes_the_probe() -> None:
    from concurrent import futures

    import grpc

    server = grpc.server(futures.ThreadPoolExecutor(max_workers=1))
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    try:
        session.probe(SparkTarget(CONNECT, f"sc://127.0.0.1:{port}", "spark_prod"))  # answers HTTP/2 SETTINGS
    finally:
        server.stop(0)


def test_the_probe_names_the_default_port_when_the_url_has_none() -> None:
    assert session.connect_address("sc://spark-connect.example/;user_id=a") == ("spark-connect.example", 15002)
    assert session.connect_address("sc://10.0.0.5:15010") == ("10.0.0.5", 15010)
    assert session.connect_address("sc://[::1]:15010/") == ("::1", 15010)

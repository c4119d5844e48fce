"""The provider's Spark Connect server (standalone/connect_server.py) and how the launcher starts it: Spark Connect
as a plugin of a PySpark driver with artifact isolation off, so that every session's Python workers share one
daemon per executor; Spark's stock server class only when asked for."""

from __future__ import annotations

import sys

import pytest

from airflow_region_failover.standalone.connect_server import PLUGIN, conf_of
from airflow_region_failover.standalone.spark_connect import SERVER_CLASS, SparkConnectServer


def test_the_driver_binds_where_asked_and_its_sessions_share_workers_whatever_the_extra_conf_says() -> None:
    conf = conf_of(15002, "0.0.0.0", ["spark.driver.memory=4g", "spark.sql.artifact.isolation.enabled=true",
                                      "spark.sql.shuffle.partitions=a=b"])
    assert conf["spark.connect.grpc.binding.port"] == "15002"
    assert conf["spark.connect.grpc.binding.address"] == "0.0.0.0"
    assert conf["spark.plugins"] == PLUGIN and conf["spark.sql.artifact.isolation.enabled"] == "false"
    assert conf["spark.driver.memory"] == "4g" and conf["spark.sql.shuffle.partitions"] == "a=b"
    assert conf["spark.connect.execute.manager.detachedTimeout"] == "30s"
    longer = conf_of(1, "h", ["spark.connect.execute.manager.detachedTimeout=5m"])
    assert longer["spark.connect.execute.manager.detachedTimeout"] == "5m"


@pytest.mark.parametrize("bad", ["spark.driver.memory", "=4g"])
def test_a_conf_that_is_not_key_value_is_refused_naming_it(bad: str) -> None:
    with pytest.raises(SystemExit, match=rf"--conf '{bad}': write key=value"):
        conf_of(15002, "127.0.0.1", [bad])


def test_the_launcher_starts_the_providers_server_by_default_and_the_stock_class_when_asked() -> None:
    shared = SparkConnectServer(cores=2, driver_memory="3g", conf={"spark.sql.shuffle.partitions": "8"})
    command = shared.command(4711)
    assert command[:3] == [sys.executable, "-m", "airflow_region_failover.standalone.connect_server"]
    assert command[command.index("--port") + 1] == "4711" and command[command.index("--master") + 1] == "local[2]"
    assert "spark.driver.memory=3g" in command and "spark.sql.shuffle.partitions=8" in command
    stock = SparkConnectServer(cores=2, driver_memory="3g", shared_workers=False).command(4711)
    assert stock[1:3] == ["--class", SERVER_CLASS] and "spark.connect.grpc.binding.port=4711" in stock
    shared.cleanup()

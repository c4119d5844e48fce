"""spark-submit of script steps: what the command line carries (single-module unit test, no Spark started)."""

from __future__ import annotations

import json
from typing import Any

import pytest

from airflow_region_failover.spark import submit
from airflow_region_failover.store.result_store import ResultStore


@pytest.mark.parametrize("master", ["yarn"])  # k8s:// takes the same branch; its hook needs the cncf provider
def test_store_credentials_never_reach_the_command_line_of_a_cluster_submit(
        monkeypatch: pytest.MonkeyPatch, master: str) -> None:
    """With YARN or Kubernetes, SparkSubmitHook turns env_vars into ``--conf spark.*Env.*=<value>`` arguments,
    which every user of the host sees (``ps``) and logs keep. The store's keys must not be among them: on such a
    cluster the driver and executors use the cluster's own identity (instance profile, IRSA)."""
    from airflow.providers.apache.spark.hooks.spark_submit import SparkSubmitHook

    monkeypatch.setenv("AIRFLOW_CONN_CLUSTER", json.dumps({"conn_type": "spark", "host": master}))
    store = ResultStore.from_endpoint("http://s3:8333", "AKSECRETKEYID", "very-secret-access-key", "bucket")
    hook: Any = SparkSubmitHook(conn_id="cluster", env_vars=submit.script_environment(store, master))
    command = " ".join(hook._build_spark_submit_command("job.py"))
    assert "very-secret-access-key" not in command and "AKSECRETKEYID" not in command


def test_a_local_submit_gets_the_store_credentials_in_its_environment() -> None:
    store = ResultStore.from_endpoint("http://s3:8333", "AKSECRETKEYID", "very-secret-access-key", "bucket")
    env = submit.script_environment(store, "local[2]")
    assert env["AWS_SECRET_ACCESS_KEY"] == "very-secret-access-key"

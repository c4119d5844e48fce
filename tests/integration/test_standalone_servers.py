"""The servers of ``region-failover standalone``, for real: its Spark Connect server refuses a client without its
token (any local user could run code as the stack's user), and the ``AWS_*`` variables it writes to
``<home>/s3.env`` reach a Delta table in the embedded S3 from outside the stack."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import psutil
import pytest

from airflow_region_failover.standalone.command import Standalone
from airflow_region_failover.standalone.spark_connect import TOKEN_ENV

pytestmark = [pytest.mark.integration, pytest.mark.timeout(600)]

QUERY = """
import sys
from pyspark.sql import SparkSession
session = SparkSession.builder.remote(sys.argv[1]).create()
try:
    print(session.range(3).count())
finally:
    session.stop()
"""


def client(url: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    """A Spark Connect client in its own process (a Connect session marks the process that builds it)."""
    return subprocess.run([sys.executable, "-c", QUERY, url], capture_output=True, text=True, env=env, timeout=120,
                          check=False)


def test_the_standalone_spark_connect_server_refuses_a_client_without_its_token(tmp_path: Path) -> None:
    (tmp_path / "dags").mkdir()
    server = Standalone(tmp_path / "dags", tmp_path / "home", 0).spark
    bare = {k: v for k, v in os.environ.items() if k != TOKEN_ENV}
    server.start()
    try:
        port = server.port
        for url in (f"sc://127.0.0.1:{port}", f"sc://localhost:{port}", f"sc://localhost:{port}/;token=guess"):
            refused = client(url, bare)
            assert refused.returncode != 0 and "3" not in refused.stdout, (url, refused.stdout)
        assert client(server.client_url, bare).stdout.strip() == "3", "the URL with the token"
        assert client(server.url, server.client_environment()).stdout.strip() == "3", "the token in the environment"
        token = server.token
        assert token and token not in server.url and token not in " ".join(server.command(port))
        seen = [" ".join(p.cmdline()) for p in psutil.Process(server.pid).children(recursive=True)]
        assert not [c for c in seen if token in c], "the token is on no command line (ps shows them to everyone)"
        assert token not in server.log_path.read_text(errors="replace")
    finally:
        server.stop()


def test_the_s3_env_file_reaches_a_delta_table_from_outside_the_stack(s3_server: Any, tmp_path: Path) -> None:
    """A table published to the embedded S3 (here written by delta-rs with the store's keys, as the publish task
    does) is read back in a process that knows only what ``<home>/s3.env`` holds."""
    import pyarrow as pa
    from deltalake import write_deltalake

    uri = f"s3://{s3_server.bucket}/region-failover/tables/outside"
    options = {"AWS_ENDPOINT_URL": s3_server.endpoint_url, "AWS_ACCESS_KEY_ID": s3_server.access_key,
               "AWS_SECRET_ACCESS_KEY": s3_server.secret_key, "AWS_REGION": s3_server.region,
               "AWS_ALLOW_HTTP": "true", "AWS_S3_ALLOW_UNSAFE_RENAME": "true"}
    write_deltalake(uri, pa.table({"n": [1, 2, 3]}), storage_options=options)
    variables = s3_server.client_environment()
    env = {"PATH": os.environ["PATH"], "HOME": str(tmp_path), **variables}
    read = subprocess.run([sys.executable, "-c", (
        "import sys, boto3, deltalake\n"
        "print(deltalake.DeltaTable(sys.argv[1]).to_pyarrow_table().column('n').to_pylist())\n"
        "keys = boto3.client('s3').list_objects_v2(Bucket=sys.argv[2], Prefix='region-failover/tables/outside')\n"
        "print(keys['KeyCount'] > 0)"), uri, s3_server.bucket], capture_output=True, text=True, env=env,
        timeout=120, check=False)
    assert read.stdout.split() == ["[1,", "2,", "3]", "True"], read.stderr[-2000:]

"""How a local stack's Airflow reaches its S3 server and Spark Connect server, and which DAGs it sees.

Rules: the servers are wired in through Airflow's own means only — connections defined by ``AIRFLOW_CONN_*``
variables (``region_failover_s3``: type ``aws`` with the endpoint in its extra; ``region_failover_spark``: type
``spark_connect``, its token as the password) named in ``[region_failover]`` by ``AIRFLOW__REGION_FAILOVER__*``
variables, so a stack's components and task processes read them as any deployment's; a stack's DAGs folder links
the files it is given (never copies), so a test that edits a DAG file edits the one the stack parses.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

S3_CONN_ID = "region_failover_s3"
SPARK_CONN_ID = "region_failover_spark"


def platform_env(s3: Any, spark_url: str | None, bucket: str | None = None,
                 prefix: str = "region-failover", *, spark_token: str | None = None) -> dict[str, str]:
    """Environment wiring Airflow to a local S3 server (``S3Endpoint``-like) and a Spark Connect server.

    Connections ``region_failover_s3`` (type ``aws``, ``endpoint_url`` in its extra) and
    ``region_failover_spark`` (type ``spark_connect``; ``spark_token`` as its password, which the apache-spark
    provider's hook puts in the URL as ``token``) are defined through ``AIRFLOW_CONN_*`` variables and named in
    ``[region_failover]``; ``spark_url`` None keeps embedded Spark.
    """
    aws = {"conn_type": "aws", "login": s3.access_key, "password": s3.secret_key,
           "extra": {"endpoint_url": s3.endpoint_url, "region_name": getattr(s3, "region", "us-east-1")}}
    env = {
        f"AIRFLOW_CONN_{S3_CONN_ID.upper()}": json.dumps(aws),
        "AIRFLOW__REGION_FAILOVER__STORE_AWS_CONN_ID": S3_CONN_ID,
        "AIRFLOW__REGION_FAILOVER__STORE_BUCKET": bucket or s3.bucket,
        "AIRFLOW__REGION_FAILOVER__STORE_PREFIX": prefix,
    }
    if spark_url:
        host, _, port = spark_url.removeprefix("sc://").partition(":")
        spark: dict[str, Any] = {"conn_type": "spark_connect", "host": host, "port": int(port or 15002)}
        if spark_token:
            spark["password"] = spark_token
        env[f"AIRFLOW_CONN_{SPARK_CONN_ID.upper()}"] = json.dumps(spark)
        env["AIRFLOW__REGION_FAILOVER__SPARK_CONN_ID"] = SPARK_CONN_ID
    return env


def merged_dags_folder(target: Path, *files: Path) -> Path:
    """A DAGs folder holding symlinks to ``files`` (e.g. the example ETL plus test DAGs)."""
    target.mkdir(parents=True, exist_ok=True)
    for file in files:
        link = target / file.name
        if not link.exists():
            link.symlink_to(file.resolve())
    return target

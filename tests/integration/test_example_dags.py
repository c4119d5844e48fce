"""Every example DAG runs green with ``dag.test()`` on real Spark and the real S3-compatible server (SeaweedFS).

Each run happens in a fresh Python process with its own AIRFLOW_HOME (SQLite metadata DB), so its Airflow
settings, its Spark JVM and its environment never leak into other tests; the process prints one JSON line
with the run state, the committed sink result and, for the ETL, whether it equals a direct computation.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from airflow_region_failover.standalone.processes import inherited_environment

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[2]
DAGS = ROOT / "dags"

_RUNNER = r"""
import json, sys
from airflow.dag_processing.dagbag import DagBag
from airflow_region_failover.graph.ids import PartitionId
from airflow_region_failover.spark.store_io import open_store_io

dag_id, sink = sys.argv[1], sys.argv[2]
bag = DagBag(sys.argv[3])
assert not bag.import_errors, bag.import_errors
dag = bag.get_dag(dag_id)
run = dag.test()
out = {"state": str(run.state), "run_id": run.run_id}
if str(run.state) == "success":
    store = open_store_io().store
    manifest = store.manifest(dag_id, run.run_id, PartitionId(sink, 0))
    out["rows"] = store.read_arrow(manifest).to_pylist()
    out["inputs"] = [str(v.partition) for v in manifest.inputs]
    module = next((m for m in list(sys.modules.values()) if getattr(m, "__file__", None) == dag.fileloc), None)
    expected = getattr(module, "expected_report", None)
    if expected is not None:
        from airflow_region_failover.spark.session import get_session, resolve_target
        want = expected(get_session(resolve_target())).toArrow().to_pylist()
        out["matches_expected"] = want == out["rows"]
print("RESULT " + json.dumps(out, default=str), flush=True)
"""


def _migrate(home: Path, env: dict[str, str]) -> None:
    done = subprocess.run([sys.executable, "-m", "airflow", "db", "migrate"], env=env, capture_output=True,
                          text=True, timeout=300, check=False)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]


@pytest.fixture(scope="module")
def airflow_env(s3_server: Any, tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    """Environment of a fresh Airflow (SQLite) whose result store is the session's SeaweedFS bucket."""
    home = tmp_path_factory.mktemp("airflow-home")
    env = inherited_environment(("AIRFLOW__", "AIRFLOW_CONN_"))
    env.update({
        "AIRFLOW_HOME": str(home), "AIRFLOW__CORE__DAGS_FOLDER": str(DAGS),
        "AIRFLOW__CORE__LOAD_EXAMPLES": "False", "AIRFLOW__CORE__UNIT_TEST_MODE": "False",
        "AIRFLOW__REGION_FAILOVER__STORE_BUCKET": s3_server.bucket,
        "AIRFLOW__REGION_FAILOVER__STORE_PREFIX": "example-dags",
        "AIRFLOW__REGION_FAILOVER__SPARK_MASTER": "local[2]",
        "AIRFLOW_CONN_AWS_DEFAULT": json.dumps({
            "conn_type": "aws", "login": s3_server.access_key, "password": s3_server.secret_key,
            "extra": {"endpoint_url": s3_server.endpoint_url, "region_name": "us-east-1"}}),
        "SPARK_LOCAL_IP": "127.0.0.1", "PYSPARK_PYTHON": sys.executable,
        "PATH": os.path.dirname(sys.executable) + os.pathsep + os.environ.get("PATH", ""),
    })
    _migrate(home, env)
    return env


def run_example(env: dict[str, str], dag_id: str, sink: str) -> dict[str, Any]:
    """``dag.test()`` of ``dag_id`` in a fresh process; returns its RESULT line (fails with the log tail)."""
    done = subprocess.run([sys.executable, "-c", _RUNNER, dag_id, sink, str(DAGS)], env=env, cwd=ROOT,
                          capture_output=True, text=True, timeout=900, check=False)
    lines = [line for line in done.stdout.splitlines() if line.startswith("RESULT ")]
    assert done.returncode == 0 and lines, (done.stdout[-4000:] + done.stderr[-6000:])
    result: dict[str, Any] = json.loads(lines[-1][len("RESULT "):])
    assert result["state"] == "success", done.stdout[-4000:] + done.stderr[-6000:]
    return result


@pytest.mark.extended  # the same DAG runs on Spark Connect below (end to end: the demo, tests/e2e/local)
def test_tpch_etl_runs_green_and_matches_a_direct_computation(airflow_env: dict[str, str]) -> None:
    result = run_example(airflow_env, "tpch_etl", "report")
    assert len(result["rows"]) == 5 * 4  # 5 market segments x 4 years
    assert [r["rank"] for r in result["rows"]] == list(range(1, 21))
    assert result["matches_expected"] is True


def test_shard_pipeline_runs_green(airflow_env: dict[str, str]) -> None:
    result = run_example(airflow_env, "shard_pipeline", "summary")
    shards = 4
    assert [r["shard"] for r in result["rows"]] == list(range(shards))
    assert all(r["users"] == 300 for r in result["rows"])
    per_shard = 5_000
    assert sum(r["events"] for r in result["rows"]) == sum(
        1 for i in range(shards * per_shard) if i % 97 != 0)


def test_daily_sales_runs_green_with_spark_submit(airflow_env: dict[str, str]) -> None:
    result = run_example(airflow_env, "daily_sales", "load")
    assert sorted(r["category"] for r in result["rows"]) == ["books", "garden", "music", "toys"]
    assert sum(r["sales"] for r in result["rows"]) == 2 * 3_000
    # the script step runs the same subtask code as a function step: its manifest records what it read
    assert result["inputs"] == ["daily_sales#0", "daily_sales#1"]


def test_tpch_etl_on_spark_connect(airflow_env: dict[str, str], spark_connect: str) -> None:
    """Mode (b): every step runs on the session's Spark Connect server through a ``spark_connect`` connection."""
    host, port = spark_connect.removeprefix("sc://").rsplit(":", 1)
    env = {**airflow_env, "AIRFLOW__REGION_FAILOVER__SPARK_CONN_ID": "spark_connect_test",
           "AIRFLOW_CONN_SPARK_CONNECT_TEST": json.dumps({"conn_type": "spark_connect", "host": host,
                                                          "port": int(port)})}
    result = run_example(env, "tpch_etl", "report")
    assert result["matches_expected"] is True

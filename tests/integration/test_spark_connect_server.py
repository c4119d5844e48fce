"""The Spark Connect server our launchers start, used as every task uses it: one short session per task.

Rule: Python processes on the server do not pile up with sessions. Spark keys its Python daemons by the worker
environment, and Spark Connect puts a per-session ``SPARK_JOB_ARTIFACT_UUID`` into it, so in daemon mode every
session that runs a Python function (the store's ``mapInArrow``) leaves one daemon and its idle workers behind for
the server's lifetime (seen on the production-like stack: 41 daemons per executor after one scenario). The
launchers run Python workers without the daemon (``spark.python.use.daemon=false``): idle ones are reaped.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from airflow_region_failover.standalone.spark_connect import SparkConnectServer

pytestmark = pytest.mark.timeout(300)

SESSION = """
from pyspark.sql import SparkSession
session = SparkSession.builder.remote({url!r}).getOrCreate()
def identity(batches):
    yield from batches
assert session.range(0, 100, 1, 2).mapInArrow(identity, "id long").count() == 100
session.stop()
"""


def _python_children(pid: int) -> int:
    """Python processes whose parent is ``pid`` (daemons or workers of a ``local[n]`` server)."""
    out = subprocess.run(["ps", "-eo", "ppid=,args="], capture_output=True, text=True, check=True).stdout
    return sum(1 for line in out.splitlines()
               if line.split(None, 1)[0] == str(pid) and "pyspark" in line and "python" in line)


def test_python_processes_do_not_pile_up_one_per_session(tmp_path: Path) -> None:
    with SparkConnectServer(tmp_path / "connect", cores=2) as server:
        assert server.pid is not None
        left = []
        for _ in range(3):
            subprocess.run([sys.executable, "-c", SESSION.format(url=server.url)], check=True, timeout=120,
                           capture_output=True)
            left.append(_python_children(server.pid))
        assert left[-1] <= left[0], f"Python processes left on the server after each session: {left}"

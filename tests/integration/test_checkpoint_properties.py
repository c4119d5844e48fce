"""Acceptance property of checkpointed steps, on a real S3 server (SeaweedFS) with the task killed for real: for
random epoch plans and failures injected at every epoch boundary, mid-epoch and during a checkpoint (SIGKILL of the
try's process after the checkpoint's state is stored, before its manifest is written), the result finally committed
equals an uninterrupted run's — the same rows and, the function being deterministic, the same bytes.

    src#0 ==BLOCKING==> count#0     (each try of count#0 a process of its own: tests.support.checkpointing)
"""

from __future__ import annotations

import json
import secrets
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from airflow_region_failover.failover.checkpointing import CheckpointConfig
from airflow_region_failover.standalone.seaweedfs import S3Endpoint
from airflow_region_failover.store.manifest import Manifest
from airflow_region_failover.store.result_store import ResultStore
from tests.support.checkpointing import OUTPUT, commit_input, run_try

pytestmark = pytest.mark.integration
REPO = Path(__file__).resolve().parents[2]
KINDS = ("epoch", "boundary", "checkpoint")


def store_of(s3: S3Endpoint) -> ResultStore:
    return ResultStore.from_endpoint(s3.endpoint_url, s3.access_key, s3.secret_key, s3.bucket,
                                     prefix=f"ckprop-{secrets.token_hex(4)}", spark_io="driver")


def tables(objects: int, seed: int) -> list[pa.Table]:
    return [pa.table({"k": pa.array([(i * 5 + j * 7 + seed) % 13 for j in range(15 + i)], pa.int64())})
            for i in range(objects)]


def child(s3: S3Endpoint, store: ResultStore, source: Manifest, run_id: str, try_number: int, epochs: int,
          config: dict[str, Any], die: tuple[str, int]) -> int:
    """Run one try in a process of its own, dying where ``die`` says; its exit code (``-SIGKILL`` if it died)."""
    spec = {"endpoint": s3.endpoint_url, "access_key": s3.access_key, "secret_key": s3.secret_key,
            "bucket": s3.bucket, "prefix": store.layout.prefix, "source": source.to_json().decode(),
            "run_id": run_id, "try": try_number, "epochs": epochs, "config": config, "die": list(die)}
    done = subprocess.run([sys.executable, "-m", "tests.support.checkpointing", json.dumps(spec)], cwd=REPO,
                          capture_output=True, timeout=120, check=False)
    assert done.returncode in (0, -signal.SIGKILL), done.stderr.decode()[-2000:]
    return done.returncode


def rows(store: ResultStore, manifest: Manifest) -> list[tuple[int, int, int]]:
    table = store.read_arrow(store.manifest(manifest.dag_id, manifest.run_id, OUTPUT))
    return sorted((r["epoch"], r["k"], r["n"]) for r in table.to_pylist())


def check_failures(s3: S3Endpoint, objects: int, epochs: int, config: dict[str, Any],
                   failures: list[tuple[str, int]]) -> list[int]:
    """Kill one try per failure, then let a last try finish; assert it committed the uninterrupted result."""
    store = store_of(s3)
    source = commit_input(store, "d", "input", tables(objects, objects + epochs))
    options = CheckpointConfig(**config)
    reference, _ = run_try(store, source, "clean", 1, epochs, options)
    codes = [child(s3, store, source, "r", n, epochs, config, die) for n, die in enumerate(failures, start=1)]
    final, outcome = run_try(store, source, "r", len(failures) + 1, epochs, options)
    assert final.content_checksum == reference.content_checksum, (failures, codes, outcome.started)
    assert rows(store, final) == rows(store, reference)
    return codes


@pytest.mark.parametrize("kind", KINDS)
def test_a_kill_at_every_point_of_a_four_epoch_plan_commits_the_uninterrupted_result(s3_server: S3Endpoint,
                                                                                      kind: str) -> None:
    for epoch in range(4):
        codes = check_failures(s3_server, 4, 4, {"num_retained": 2}, [(kind, epoch)])
        assert codes == [-signal.SIGKILL]  # every point exists in this plan: the try really died there


@settings(max_examples=10, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(objects=st.integers(1, 7), epochs=st.integers(1, 7), retained=st.integers(1, 3), incremental=st.booleans(),
       max_runs=st.integers(2, 4), failures=st.lists(st.tuples(st.sampled_from(KINDS), st.integers(0, 6)),
                                                     min_size=1, max_size=3))
def test_random_plans_and_failures_commit_the_uninterrupted_result(
        s3_server: S3Endpoint, objects: int, epochs: int, retained: int, incremental: bool, max_runs: int,
        failures: list[tuple[str, int]]) -> None:
    check_failures(s3_server, objects, epochs, {"num_retained": retained, "incremental": incremental,
                                                "max_sorted_runs": max_runs}, failures)

"""The checkpointed example DAG end to end on the embedded stack (``dags/clickstream_sessions.py``)::

    clicks#0 ==keyed by user==+==> sessions#0  X fails on its first try in epoch 4 (day 4)
                              \\=> sessions#1

Region failover restarts {sessions#0} only; its second try resumes from the checkpoint after epoch 3 and computes
days 4..6 only — its task log and the run's failover view say so — and the sessions equal those computed without
Spark. The checkpoint metrics reach StatsD.
"""

from __future__ import annotations

import re
import runpy
from pathlib import Path
from typing import Any

import httpx
import pytest

from airflow_region_failover.graph.ids import PartitionId
from tests.e2e.scenarios import _reasons, _the_decision

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(1500)]
DAG_ID = "clickstream_sessions"
EXAMPLE = runpy.run_path(str(Path(__file__).resolve().parents[3] / "dags" / "clickstream_sessions.py"),
                         run_name="example")


@pytest.mark.prefetch("checkpoint")
def test_a_failed_checkpointed_step_resumes_from_its_checkpoint_and_its_sessions_are_correct(
        e2e: Any, statsd: Any) -> None:
    _, run_id, state = e2e.finished("checkpoint")
    assert state == "success", e2e.explain(DAG_ID, run_id)
    tries = e2e.tries(DAG_ID, run_id)
    assert tries == {"clicks.0": 1, "sessions.0": 2, "sessions.1": 1}, tries
    assert _reasons(_the_decision(e2e, DAG_ID, run_id)) == {"sessions#0": "failed"}

    first = e2e.stack.task_log(DAG_ID, run_id, "sessions.0", 1)
    assert "sessions#0: starts from the first epoch of 7: no completed checkpoint" in first, first[-3000:]
    assert "injected failure of sessions#0 in epoch 4" in first, first[-3000:]
    second = e2e.stack.task_log(DAG_ID, run_id, "sessions.0", 2)
    found = re.search(r"sessions#0: resumed from checkpoint (\d+) \(after epoch 3 of 7, taken by try 1\)", second)
    assert found, second[-3000:]
    assert len(re.findall(r"sessions#0: checkpoint \d+ after epoch \d of 7", second)) == 3, second[-3000:]

    with httpx.Client(base_url=e2e.stack.url, timeout=30,
                      headers={"Authorization": f"Bearer {e2e.api.token()}"}) as client:
        model = client.get(f"/region-failover/api/run/{DAG_ID}/{run_id}").json()
        page = client.get(f"/region-failover/run/{DAG_ID}/{run_id}").text
    events = [(e["task_id"], e["try_number"], e["event"]) for e in model["checkpoints"]]
    assert ("sessions.0", 2, "resumed") in events and ("sessions.0", 1, "started over") in events, events
    resumed = next(e for e in model["checkpoints"] if e["event"] == "resumed")
    assert (resumed["checkpoint"], resumed["skipped"], resumed["epochs"]) == (int(found.group(1)), 4, 7)
    assert sum(1 for t, n, e in events if (t, e) == ("sessions.1", "checkpoint")) == 7, events
    assert 'id="rf-checkpoints"' in page and "4 of 7 epochs skipped" in page

    rows = sorted((r["user"], r["start"], r["end"], r["clicks"]) for i in (0, 1)
                  for r in e2e.store.read_arrow(e2e.store.manifest(DAG_ID, run_id, PartitionId("sessions", i)))
                  .to_pylist())
    assert rows == EXAMPLE["reference_sessions"]()
    for name in ("checkpoints", "checkpoint_duration", "checkpoint_uploaded_bytes", "checkpoint_epochs_skipped"):
        assert statsd.wait_for(f"region_failover.{name}", timeout=30, dag_id=DAG_ID, step="sessions"), name
    skipped = statsd.samples("region_failover.checkpoint_epochs_skipped", dag_id=DAG_ID)
    assert sorted(s.value for s in skipped) == [0, 0, 4], skipped

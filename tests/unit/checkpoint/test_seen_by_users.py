"""What users see of checkpoints, from the records alone: the failover view's checkpoint events and table, the
metrics of one event, the task summary's checkpoint entry, and the records' JSON.

    clicks#0 ==keyed==> sessions#0, sessions#1      (sessions checkpointed)
"""

from __future__ import annotations

from airflow_region_failover.failover.run_log import RunLog
from airflow_region_failover.failover_view.page import checkpoint_events, run_page
from airflow_region_failover.graph.builder import JobGraphBuilder
from airflow_region_failover.graph.ids import PartitionId
from airflow_region_failover.job import JobSpec
from airflow_region_failover.observability.metrics import checkpoint_values
from airflow_region_failover.spark.ledger import CheckpointEntry, TaskSummary
from airflow_region_failover.store.checkpoint_manifest import (
    CheckpointManifest,
    CompletedNote,
    MemberState,
    ResultObjects,
    StateRun,
    TryRecord,
)
from airflow_region_failover.store.manifest import InputVersion, ObjectEntry

SPEC = JobSpec(JobGraphBuilder().step("clicks").step("sessions", parallelism=2)
               .edge("clicks", "sessions", exchange="BLOCKING", partition_by=["user"]).build(), {})
SESSIONS0 = PartitionId("sessions", 0)
H = "ab" * 32
ENTRY = ObjectEntry(f"{H[:2]}/{H}.parquet", 10, H, shared=True)


def manifest() -> CheckpointManifest:
    return CheckpointManifest("d", "r", SESSIONS0, ("sessions",), 3, 2, 7, 1,
                              (InputVersion(PartitionId("clicks->sessions", 0), 1, "c" * 64, range(0, 64)),),
                              "code", "plan", "", (MemberState("sessions", (StateRun((ENTRY,), 5, 1, True,
                                                                                     range(0, 64)),), 4),),
                              (ResultObjects("sessions", "{}", (ENTRY,), 9, {0: 9}),), 10, 12,
                              "2026-01-01T00:00:03.000+00:00")


def test_records_round_trip_through_json() -> None:
    assert CheckpointManifest.from_json(manifest().to_json(), where="k") == manifest()
    record = TryRecord(2, "2026-01-01T00:00:05.000+00:00", 7, 3, 2, "resumed")
    assert TryRecord.from_json(record.to_json(), where="k") == record and record.skipped == 3
    note = CompletedNote.of(manifest())
    assert CompletedNote.from_json(note.to_json(), where="k") == note and note.state_bytes == 10
    assert [o.sha256 for o in manifest().objects()] == [H, H]


def test_the_view_lists_where_each_try_started_and_every_checkpoint() -> None:
    records = [(SESSIONS0, TryRecord(1, "2026-01-01T00:00:00.000+00:00", 7, 0, -1, "starts from the first epoch")),
               (SESSIONS0, CompletedNote.of(manifest())),
               (SESSIONS0, TryRecord(2, "2026-01-01T00:00:05.000+00:00", 7, 3, 2, "resumed from checkpoint 3"))]
    events = checkpoint_events(SPEC, records)
    assert [(e["task_id"], e["try_number"], e["event"]) for e in events] == [
        ("sessions.0", 1, "started over"), ("sessions.0", 1, "checkpoint"), ("sessions.0", 2, "resumed")]
    assert (events[2]["checkpoint"], events[2]["skipped"]) == (3, 3)
    page = run_page(SPEC, RunLog("d", "r"), [], None, "/rf", records)
    assert 'id="rf-checkpoints"' in page and "resumed from checkpoint 3: 3 of 7 epochs skipped" in page
    assert "checkpoint 3 after epoch 2 of 7: 10 of 10 state bytes uploaded, 12 ms" in page
    assert 'id="rf-checkpoints"' not in run_page(SPEC, RunLog("d", "r"), [], None, "/rf")


def test_metrics_of_a_checkpoint_and_of_a_resumed_try() -> None:
    assert checkpoint_values(manifest()) == {"checkpoints": 1, "checkpoint_duration": 12,
                                             "checkpoint_uploaded_bytes": 10}
    assert checkpoint_values(TryRecord(2, "t", 7, 3, 2)) == {"checkpoint_epochs_skipped": 3, "checkpoint_resumes": 1}
    assert checkpoint_values(TryRecord(1, "t", 7)) == {"checkpoint_epochs_skipped": 0, "checkpoint_resumes": 0}


def test_the_task_summary_carries_the_checkpoint_entry() -> None:
    body = {"subtask": "sessions#0", "attempt": 2, "rows": {"sessions": 9},
            "read": {"bytes": 1, "objects": 1, "partition_bytes": 1}, "inputs": {}, "outputs": {},
            "checkpoint": {"epochs": 7, "resumed_from": 3, "skipped": 3, "checkpoints": 4, "uploaded_bytes": 40}}
    summary = TaskSummary.from_json(body)
    assert summary.checkpoint == CheckpointEntry(7, 3, 3, 4, 40)
    assert summary.to_json() == body
    del body["checkpoint"]
    assert TaskSummary.from_json(body).checkpoint is None and "checkpoint" not in TaskSummary.from_json(body).to_json()

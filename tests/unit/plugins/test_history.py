"""The failover history as the user sees it: the run note and the failure texts in the log."""

from __future__ import annotations

from typing import Any

from airflow_region_failover.failover.run_log import RunLog
from airflow_region_failover.plugins import history
from airflow_region_failover.plugins.listener import failure_event


class NoteApi:
    """A REST API holding one run's note."""

    def __init__(self, note: str | None) -> None:
        self.note = note

    def dag_run(self, dag_id: str, run_id: str) -> dict[str, Any]:
        return {"note": self.note}

    def set_run_note(self, dag_id: str, run_id: str, note: str) -> None:
        self.note = note


def log_with(decisions: int) -> RunLog:
    return RunLog.from_json({"format": 2, "dag_id": "d", "run_id": "r", "decisions": [
        {"id": i + 1, "status": "applied", "created": 0.0, "failures": [
            {"task_id": "c.0", "try_number": 1, "path": "worker", "error": "boom", "at": 0.0}],
         "regions": [], "restart": ["c.0"], "reused": [], "budget": {}} for i in range(decisions)]})


def test_the_run_note_keeps_what_the_user_wrote() -> None:
    api = NoteApi("Re-run after the vendor fixed the feed. -- Ana")
    history.publish_note(api, log_with(1))
    history.publish_note(api, log_with(2))
    assert api.note is not None
    assert api.note.startswith("Re-run after the vendor fixed the feed. -- Ana")
    assert api.note.count("**Region failover**") == 1 and "#2 APPLIED" in api.note


class _Ti:
    dag_id, run_id, task_id, map_index, try_number = "d", "r", "c.0", -1, 1


def test_failure_text_is_masked_before_it_is_stored() -> None:
    """A secret in the exception text (a connection password echoed by a driver, say) never reaches the decision
    log, the run note or the history view."""
    from airflow.sdk.log import mask_secret

    mask_secret("hunter2-very-secret")
    event = failure_event(_Ti(), RuntimeError("login failed for user etl password=hunter2-very-secret"), "worker")
    assert "hunter2-very-secret" not in event.error and "***" in event.error


def test_a_scheduler_failure_given_as_text_has_no_cause() -> None:
    """The scheduler hands the listener its message as a ``str`` (an executor that lost the task, a killed worker);
    only our ``InputUnavailable`` names a cause partition. ``str.partition`` is a method, not a cause: taking it made
    the handler refuse the failure ('partition '<built-in method partition ...>' must look like ...')."""
    event = failure_event(_Ti(), "Executor reported that the task instance finished with state failed", "scheduler")
    assert event.cause is None


def test_an_unavailable_input_names_its_partition_as_the_cause() -> None:
    from airflow_region_failover.exceptions import InputUnavailable
    from airflow_region_failover.graph.ids import PartitionId

    event = failure_event(_Ti(), InputUnavailable(PartitionId.parse("clean#0"), "gone"), "worker")
    assert event.cause == "clean#0"

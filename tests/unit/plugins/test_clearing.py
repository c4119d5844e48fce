"""Recording and applying decisions (plugins/clearing.py) on an in-memory decision log and fake services.

    a#0 -> b#0 ==+==> c#0 ==> d#0        rf_e2e_budget (fixed-delay, attempts 1): c#0 fails
    a#1 -> b#1 ==+==> c#1 ==> d#1        a -> b is chained: tasks a.b.0, a.b.1 (one per chain subtask)
"""

from __future__ import annotations

import contextlib
from typing import Any

from airflow_region_failover.decisions.storage import RunLogs
from airflow_region_failover.exceptions import RestError
from airflow_region_failover.plugins.clearing import apply_due, handle_failure
from tests.support.fakes import DAG, RUN, FakeApi, KnownStore, MemoryObjects, budget_spec, failure, services


class RefusingApi(FakeApi):
    """An API that refuses the clear: the credentials lost their permission, or the run was deleted."""

    def clear(self, dag_id: str, run_id: str, task_ids: list[str]) -> list[dict[str, Any]]:
        raise RestError(f"POST /api/v2/dags/{dag_id}/clearTaskInstances -> HTTP 403: forbidden", 403)


class FailingOnceApi(FakeApi):
    """An API whose first clear is answered HTTP 500 (the standalone stack's API server gave up on SQLite's lock
    on its event loop, ``standalone/sqlite.py``), having cleared nothing — or, ``took_effect``, having cleared."""

    def __init__(self, took_effect: bool = False) -> None:
        super().__init__([{"task_id": "c.0", "try_number": 1, "state": "failed"},
                          {"task_id": "d.0", "try_number": 1, "state": "upstream_failed"}])
        self.took_effect, self.sent = took_effect, 0

    def clear(self, dag_id: str, run_id: str, task_ids: list[str]) -> list[dict[str, Any]]:
        self.sent += 1
        if self.sent == 1:
            if self.took_effect:
                self.instances = [{"task_id": t, "try_number": 2, "state": "queued"} for t in task_ids]
            raise RestError(f"POST /api/v2/dags/{dag_id}/clearTaskInstances -> HTTP 500: Database error", 500)
        return super().clear(dag_id, run_id, task_ids)


def test_a_clear_answered_http_500_is_sent_again_unless_it_took_effect() -> None:
    """A 5xx is an answer: the request has ended, so the tries tell whether it cleared. Not cleared: sent again at
    once (before, the decision stayed ``applying`` until a watcher found it stuck, 60 s later); cleared: not again."""
    for took_effect in (False, True):
        logs = RunLogs(MemoryObjects())  # type: ignore[arg-type]
        api = FailingOnceApi(took_effect)
        handle_failure(DAG, RUN, failure(), budget_spec(), services(logs, api), now=lambda: 100.0)
        applied = apply_due(services(logs, api), DAG, RUN, "test", now=lambda: 101.0)
        assert applied is not None and applied.status.value == "applied", took_effect
        assert api.sent == (1 if took_effect else 2), took_effect


def test_a_clear_the_api_refuses_for_good_does_not_block_the_run_for_ever() -> None:
    """403/404 will not change by retrying: the decision is abandoned (with the reason) instead of staying
    ``applying`` for ever, costing S3 requests every second and blocking every later decision."""
    logs = RunLogs(MemoryObjects())  # type: ignore[arg-type]
    handle_failure(DAG, RUN, failure(), budget_spec(), services(logs, RefusingApi()), now=lambda: 100.0)
    with contextlib.suppress(RestError):
        apply_due(services(logs, RefusingApi()), DAG, RUN, "test", now=lambda: 101.0)
    doc = logs.read(DAG, RUN)
    assert [d.status.value for d in doc.decisions] != ["applying"], doc.decisions
    assert list(logs.pending_runs()) == []
    assert "403" in doc.decisions[0].reason


def test_a_producer_that_has_not_started_yet_is_not_restarted() -> None:
    """The chain task a.b.0 (b#0) fails while a.b.1 has no state yet (its turn has not come): b->c#1 is not
    committed, but b#1 will produce it — Flink tracks a partition from its producer's deployment, and a task
    waiting for its upstream is as good as deployed. Only {a#0,b#0} and the consumers {c#0}, {c#1} restart; a.b.1
    is not cleared (before the fix it was restarted as "producer-unavailable", killing its first try if it had
    just started).

        a#0 -> b#0 ==+==> c#0        a.b.0 fails; a.b.1 not started (state None)
        a#1 -> b#1 ==+==> c#1
    """
    logs = RunLogs(MemoryObjects())  # type: ignore[arg-type]
    api = FakeApi([{"task_id": "a.b.1", "state": None}, {"task_id": "c.0", "state": None},
                   {"task_id": "c.1", "state": None}])
    handle_failure(DAG, RUN, failure("a.b.0"), budget_spec(), services(logs, api, KnownStore(("b->c#1",))),
                   now=lambda: 100.0)
    [decision] = logs.read(DAG, RUN).decisions
    assert "a.b.1" not in decision.restart, decision.restart
    assert sorted(decision.restart) == ["a.b.0", "c.0", "c.1", "d.0", "d.1"]


def test_a_failed_chain_task_restarts_its_region_and_each_task_once() -> None:
    """c#0 fails and finds b->c#1 gone (its producer finished): the producer region {a#1, b#1} restarts — as the
    one chain task a.b.1, named once in the restart set with its region's reason — and so does every consumer.

        a#0 -> b#0 ==+==> c#0 ==> d#0     c.0 fails; b->c#0 committed, b->c#1 lost (a.b.1 finished)
        a#1 -> b#1 ==+==> c#1 ==> d#1
    """
    logs = RunLogs(MemoryObjects())  # type: ignore[arg-type]
    api = FakeApi([{"task_id": "a.b.0", "state": "success"}, {"task_id": "a.b.1", "state": "success"}])
    handle_failure(DAG, RUN, failure("c.0"), budget_spec(), services(logs, api, KnownStore(("b->c#1",))),
                   now=lambda: 100.0)
    [decision] = logs.read(DAG, RUN).decisions
    assert len(decision.restart) == len(set(decision.restart)), decision.restart
    assert sorted(decision.restart) == ["a.b.1", "c.0", "c.1", "d.0", "d.1"]
    assert decision.reasons["a.b.1"] == "producer-unavailable"
    apply_due(services(logs, api), DAG, RUN, "test", now=lambda: 101.0)
    [cleared] = api.cleared
    assert sorted(cleared) == ["a.b.1", "c.0", "c.1", "d.0", "d.1"], cleared


def test_a_failure_of_a_chain_task_plans_from_its_region() -> None:
    """a.b.1 fails: its region {a#1, b#1} and its consumers restart; the stale unchained id ``b.1`` names no
    task of this job and is ignored.

        a#0 -> b#0 ==+==> c#0 ==> d#0
        a#1 -> b#1 ==+==> c#1 ==> d#1     a.b.1 fails
    """
    logs = RunLogs(MemoryObjects())  # type: ignore[arg-type]
    svc = services(logs, FakeApi([]), KnownStore())
    assert handle_failure(DAG, RUN, failure("b.1"), budget_spec(), svc, now=lambda: 100.0).outcome.value == "ignored"
    handle_failure(DAG, RUN, failure("a.b.1"), budget_spec(), svc, now=lambda: 100.0)
    [decision] = logs.read(DAG, RUN).decisions
    assert sorted(decision.restart) == ["a.b.1", "c.0", "c.1", "d.0", "d.1"]
    assert decision.reasons["a.b.1"] == "failed"
    [region] = [r for r in decision.regions if r.reason == "failed"]
    assert set(region.subtasks) == {"a#1", "b#1"}


def _client_error(code: str) -> Exception:
    from botocore.exceptions import ClientError

    return ClientError({"Error": {"Code": code, "Message": code}}, "PutObject")


def test_errors_that_may_pass_are_told_from_those_that_fail_again() -> None:
    """What the watcher tries again for as long as it takes (an S3 outage) and what it gives up on."""
    import httpx
    from botocore.exceptions import EndpointConnectionError
    from sqlalchemy.exc import OperationalError

    from airflow_region_failover.exceptions import ConditionFailed, GraphError, StoreUnreachable
    from airflow_region_failover.plugins.clearing import transient

    passing = [StoreUnreachable("S3 PUT failed after retries"), ConditionFailed("lost 20 races"),
               ConnectionError("reset"), TimeoutError(), RestError("GET -> HTTP 503", 503), RestError("no answer"),
               RestError("HTTP 429", 429), _client_error("SlowDown"), _client_error("ServiceUnavailable"),
               EndpointConnectionError(endpoint_url="http://s3"), httpx.ReadTimeout("slow"),
               OperationalError("SELECT 1", {}, Exception("database is locked"))]
    lasting = [GraphError("not a job document"), RestError("HTTP 403", 403), _client_error("AccessDenied"),
               _client_error("NoSuchBucket"), KeyError("c.0"), ValueError("format 3")]
    assert [type(e).__name__ for e in passing if not transient(e)] == []
    assert [type(e).__name__ for e in lasting if transient(e)] == []

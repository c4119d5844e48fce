"""Failure classes through the adapters (plugins/listener.py, plugins/clearing.py, operators/step.py, job.py): a real
exception from a step function, captured by the worker's listener with what the try computed from, recorded by the
failover loop on an in-memory decision log and a fake REST API.

    a#0 -> b#0 ==+==> c#0 ==> d#0        rf_e2e_budget, here with fixed-delay attempts 3; a -> b is chained
    a#1 -> b#1 ==+==> c#1 ==> d#1        (task a.b.i); c#0's step function raises KeyError('price')
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest

from airflow_region_failover import RegionJob
from airflow_region_failover.decisions.storage import RunLogs
from airflow_region_failover.decisions.try_log import LogState, TryLog
from airflow_region_failover.exceptions import OptionError
from airflow_region_failover.failover.error_class import TryInputs
from airflow_region_failover.failover.handler import Declared, Outcome
from airflow_region_failover.failover.run_log import RunLog
from airflow_region_failover.job import JobRuntime, JobSpec, StepImpl
from airflow_region_failover.observability import metrics
from airflow_region_failover.operators import step
from airflow_region_failover.plugins.clearing import apply_due, handle_failure
from airflow_region_failover.plugins.listener import failure_event
from airflow_region_failover.spark.ledger import TaskSummary
from tests.support.fakes import DAG, RUN, FakeApi, MemoryObjects, budget_spec, services

PRICES: dict[str, float] = {"apple": 1.0}


def priced(spark: Any, inputs: Any, context: Any) -> Any:
    """A step with a bug: it looks up a key its data never has."""
    return PRICES["price"]


def spec() -> JobSpec:
    base = budget_spec()
    return replace(base, options={**base.options, "restart-strategy.fixed-delay.attempts": "3"})


class TI:
    dag_id, run_id, task_id, map_index = DAG, RUN, "c.0", -1

    def __init__(self, try_number: int, task: Any) -> None:
        self.try_number, self.task = try_number, task


def failed_try(monkeypatch: pytest.MonkeyPatch, try_number: int, inputs: TryInputs | None) -> Any:
    """Run try ``try_number`` of c.0 through the step operator, whose lookup found ``inputs`` and whose step
    function raises; return the failure as the worker's listener records it."""

    def fake_run_chain(runtime: Any, members: Any, context: Any, run_log: Any = None, listener: Any = None,
                       looked_up: Any = None) -> TaskSummary:
        looked_up(inputs)
        return priced(None, {}, None)

    monkeypatch.setattr(step, "run_chain", fake_run_chain)
    monkeypatch.setattr(step, "read_try_log", lambda ti: TryLog("c.0", try_number, LogState.READ, RunLog(DAG, RUN)))
    job = spec()
    op = step.RegionStepOperator(task_id="c.0", subtask="c#0", runtime=JobRuntime(
        job, {s.id: StepImpl(s.id, fn=priced) for s in job.graph.steps}))
    ti = TI(try_number, op)
    with pytest.raises(KeyError) as raised:
        op.execute({"ti": ti})  # type: ignore[arg-type]
    return failure_event(ti, raised.value, "worker")


@pytest.fixture
def logs() -> RunLogs:
    return RunLogs(MemoryObjects())  # type: ignore[arg-type]


@pytest.fixture
def sent(monkeypatch: pytest.MonkeyPatch) -> list[tuple[str, dict[str, str]]]:
    got: list[tuple[str, dict[str, str]]] = []

    class Stats:
        def incr(self, name: str, count: int = 1, tags: dict[str, str] | None = None) -> None:
            got.append((name, dict(tags or {})))

    monkeypatch.setattr(metrics, "stats", Stats)
    return got


def test_a_key_error_twice_on_the_same_inputs_ends_the_run_not_recoverable(
        monkeypatch: pytest.MonkeyPatch, logs: RunLogs, sent: list[tuple[str, dict[str, str]]]) -> None:
    api, job, inputs = FakeApi(), spec(), TryInputs("checksums-of-b", "code-of-c")
    first = failed_try(monkeypatch, 1, inputs)
    assert first.error_class is not None and first.error_class.names[:2] == ("KeyError", "LookupError")
    assert first.inputs == inputs
    one = handle_failure(DAG, RUN, first, job, services(logs, api), now=lambda: 100.0)
    apply_due(services(logs, api), DAG, RUN, "test", now=lambda: 101.5)
    two = handle_failure(DAG, RUN, failed_try(monkeypatch, 2, inputs), job, services(logs, api),
                         now=lambda: 110.0)
    assert (one.outcome, two.outcome) == (Outcome.CREATED, Outcome.NOT_RECOVERABLE)
    doc = logs.read(DAG, RUN)
    assert "try 1 and try 2" in doc.decisions[-1].reason
    assert "NOT-RECOVERABLE" in api.notes[-1] and "KeyError #" in api.notes[-1]
    assert (f"{metrics.PREFIX}.runs_ended", {"dag_id": DAG, "status": "not-recoverable",
                                             "error_class": "KeyError"}) in sent
    read = TryLog("c.0", 3, LogState.READ, doc)
    assert (read.wait(job.config, 120.0), read.restart()) == (0.0, None), \
        "a person's clear of the ended run reruns it: nothing holds the try back"


def test_a_try_that_failed_before_its_lookup_is_no_evidence(monkeypatch: pytest.MonkeyPatch, logs: RunLogs) -> None:
    job = spec()
    one = handle_failure(DAG, RUN, failed_try(monkeypatch, 1, None), job, services(logs), now=lambda: 100.0)
    apply_due(services(logs), DAG, RUN, "test", now=lambda: 101.5)
    two = handle_failure(DAG, RUN, failed_try(monkeypatch, 2, None), job, services(logs), now=lambda: 110.0)
    assert (one.outcome, two.outcome) == (Outcome.CREATED, Outcome.CREATED)


def test_a_steps_own_list_replaces_the_jobs_and_a_chain_task_takes_what_every_member_declares() -> None:
    job = replace(spec(), non_recoverable={"c": ("KeyError",), "a": ("KeyError", "NameError"), "b": ("NameError",)})
    assert job.declared("c.0") == Declared(("KeyError",), "step 'c''s non_recoverable_errors")
    assert job.declared("d.1").names == ("AnalysisException", "SyntaxError", "NameError"), "the job's default"
    assert job.declared("a.b.0").names == ("NameError",)
    assert JobSpec.from_document(job.to_document()) == job
    with pytest.raises(Exception, match="non_recoverable_errors names unknown step 'zz'"):
        replace(job, non_recoverable={"zz": ("KeyError",)})


def test_a_bad_step_override_is_refused_when_the_dag_file_declares_it() -> None:
    job = RegionJob()
    with pytest.raises(OptionError, match=r"step 'c': non_recoverable_errors: 'KeyError' is a string; give a list"):
        job.step("c", priced, non_recoverable_errors="KeyError")  # type: ignore[arg-type]
    with pytest.raises(OptionError, match=r"step 'c': non_recoverable_errors: 3 is not an exception class name"):
        job.step("c", priced, non_recoverable_errors=[3])  # type: ignore[list-item]
    job.step("c", priced, non_recoverable_errors=[KeyError, "pyspark.errors.AnalysisException"])
    assert job._non_recoverable == {"c": ("KeyError", "pyspark.errors.AnalysisException")}


def test_the_default_names_sparks_analysis_exception_of_both_clients_and_not_its_generic_errors(
        logs: RunLogs) -> None:
    """Spark Connect's and classic PySpark's AnalysisException end the run at once; Spark Connect's generic
    SparkConnectGrpcException (a lost server, an unmapped error) restarts, and is never evidence."""
    from pyspark.errors.exceptions import captured, connect

    from airflow_region_failover.failover.classify import evidence
    from airflow_region_failover.failover.error_class import class_names, declared_match

    job = spec()
    failure = failure_event(TI(1, None), connect.AnalysisException(message="[UNRESOLVED_COLUMN] `pricee`"), "worker")
    assert handle_failure(DAG, RUN, failure, job, services(logs), now=lambda: 100.0).outcome \
        is Outcome.NOT_RECOVERABLE
    classic = class_names(captured.AnalysisException)  # an instance needs a JVM: its class is what counts
    assert declared_match(classic, job.config.non_recoverable_errors) == "AnalysisException"
    generic = [replace(failure_event(TI(n, None), connect.SparkConnectGrpcException(message="UNAVAILABLE"),
                                     "worker"), inputs=TryInputs("i", "c")) for n in (1, 2)]
    assert not evidence(generic[1], generic[:1]).not_recoverable

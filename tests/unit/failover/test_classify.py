"""Failure classes (failover/classify.py, failover/error_class.py): a declared non-recoverable class, and the
evidence rule, end the run with a ``not-recoverable`` decision instead of a restart.

    a#0 -> b#0 ==+==> c#0 ==> d#0        rf_e2e_budget, here with fixed-delay attempts 3, delay 0 s
    a#1 -> b#1 ==+==> c#1 ==> d#1        c#0 fails -> restart c#0 (failed) + d#0 (consumer)
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest

from airflow_region_failover.exceptions import OptionError
from airflow_region_failover.failover.availability import KnownAvailability
from airflow_region_failover.failover.classify import RULE_EVIDENCE
from airflow_region_failover.failover.error_class import (
    ErrorClass,
    TryInputs,
    class_names,
    declared_match,
    normalise,
    parse_error_names,
    signature,
)
from airflow_region_failover.failover.handler import Declared, FailureHandler, Outcome, claim, mark_applied
from airflow_region_failover.failover.options import parse_options
from airflow_region_failover.failover.run_log import DecisionStatus, FailureRecord, RunLog
from airflow_region_failover.graph.ids import SubtaskId
from airflow_region_failover.job import JobSpec
from airflow_region_failover.naming import task_id_of
from tests.support.fakes import DAG, RUN, budget_spec

INPUTS = TryInputs("in-1", "code-1")


class AnalysisException(Exception):
    """Stands for Spark Connect's class: another module, the same simple name as the declared default."""


AnalysisException.__module__ = "pyspark.errors.exceptions.connect"


def spec(**options: str) -> JobSpec:
    base = budget_spec()
    return replace(base, options={**base.options, "restart-strategy.fixed-delay.attempts": "3", **options})


def record(error: BaseException, try_number: int, inputs: TryInputs | None = INPUTS, at: float = 100.0,
           clear_number: int | None = None) -> FailureRecord:
    return FailureRecord("c.0", -1, try_number, str(error), "worker", at, clear_number=clear_number,
                         error_class=ErrorClass.of(error), inputs=inputs)


def fail(log: RunLog, failure: FailureRecord, job: JobSpec | None = None, **handler: Any) -> tuple[RunLog, Outcome]:
    job = job or spec()
    plan = job.plan(SubtaskId("c", 0), KnownAvailability())
    log, result = FailureHandler(job.config, task_id_of, **handler).handle(log, failure, plan, (), failure.at)
    return log, result.outcome


def applied(log: RunLog, now: float, clear_number: int | None = None) -> RunLog:
    log, decision = claim(log, now, "w1")
    assert decision is not None
    return mark_applied(log, decision.id, {t: 1 for t in decision.restart}, clear_number, now)


def test_class_names_are_the_class_and_its_bases_matched_by_simple_or_qualified_name() -> None:
    assert class_names(KeyError) == ("KeyError", "LookupError", "Exception", "BaseException")
    names = class_names(AnalysisException)
    assert names[0] == "pyspark.errors.exceptions.connect.AnalysisException"
    assert declared_match(names, ["AnalysisException"]) == "AnalysisException"
    assert declared_match(names, ["pyspark.errors.exceptions.connect.AnalysisException"]) is not None
    assert declared_match(class_names(KeyError), ["LookupError"]) == "LookupError", "a base class matches"
    assert declared_match(class_names(KeyError), ["ValueError", "IndexError"]) is None


def test_the_message_signature_ignores_numbers_addresses_paths_and_ids() -> None:
    one = "KeyError 'col_3' at 0x7f3a12 reading s3a://b/rf/v1/x.parquet from /tmp/spark-1/a.parquet, id#12L, " \
          "run 1f3e2a4b-0c1d-4e5f-8a9b-0123456789ab hash 9e107d9d372bb682"
    two = "KeyError 'col_4' at 0x1b00ff reading s3a://b/rf/v1/y.parquet from /var/tmp/z/b.parquet, id#907L, " \
          "run 00000000-1111-2222-3333-444444444444 hash 0cc175b9c0f1b6a8"
    assert signature(one) == signature(two)
    assert normalise(one) == ("KeyError 'col_<n>' at <addr> reading <uri> from <path>, id#<n>L, run <id> "
                              "hash <hex>")
    assert signature("KeyError 'price'") != signature("KeyError 'quantity'")


def test_the_option_parses_names_and_refuses_a_bad_one_naming_the_key() -> None:
    config = parse_options({"restart-strategy.non-recoverable-errors": "KeyError; pyspark.errors.AnalysisException"})
    assert config.non_recoverable_errors == ("KeyError", "pyspark.errors.AnalysisException")
    assert parse_options(config.to_options()) == config
    assert parse_options({}).non_recoverable_errors == (), "the bare default: none (airflow.cfg's comes on top)"
    with pytest.raises(OptionError, match=r"restart-strategy.non-recoverable-errors: 'Key Error' is not an "
                                          r"exception class name; use exception class names"):
        parse_options({"restart-strategy.non-recoverable-errors": "Key Error"})
    with pytest.raises(OptionError, match=r"step 's': 'KeyError' is a string; give a list, e.g. \['KeyError'\]"):
        parse_error_names("KeyError", "step 's'", text=False)
    assert parse_error_names([KeyError, "NameError"], "k") == ("KeyError", "NameError")


def test_a_declared_class_ends_the_run_at_once_uncounted() -> None:
    """The job's default names AnalysisException: the first failure is not-recoverable; the budget is untouched."""
    log, outcome = fail(RunLog(DAG, RUN), record(AnalysisException("[UNRESOLVED_COLUMN] `pricee`"), 1))
    assert outcome is Outcome.NOT_RECOVERABLE
    [decision] = log.decisions
    assert decision.status is DecisionStatus.NOT_RECOVERABLE and decision.restart == ()
    assert "AnalysisException" in decision.reason and "restart-strategy.non-recoverable-errors" in decision.reason
    assert log.budget_state is None and log.strategy_state is None
    assert RunLog.from_json(log.to_json()) == log


def test_a_declared_base_class_matches_and_a_step_override_replaces_the_job_list() -> None:
    job = spec(**{"restart-strategy.non-recoverable-errors": "LookupError"})
    _, by_base = fail(RunLog(DAG, RUN), record(KeyError("x"), 1, inputs=None), job)
    assert by_base is Outcome.NOT_RECOVERABLE
    step = Declared(("ZeroDivisionError",), "step 'c''s non_recoverable_errors")
    log, overridden = fail(RunLog(DAG, RUN), record(KeyError("x"), 1, inputs=None), job, declared=lambda t: step)
    assert overridden is Outcome.CREATED, "the step's list replaces the job's"
    log, by_step = fail(RunLog(DAG, RUN), record(ZeroDivisionError("x"), 1, inputs=None), job,
                        declared=lambda t: step)
    assert by_step is Outcome.NOT_RECOVERABLE and "step 'c''s non_recoverable_errors" in log.decisions[0].reason


def test_a_pending_decision_is_cancelled_by_a_not_recoverable_failure() -> None:
    log, first = fail(RunLog(DAG, RUN), record(RuntimeError("flaky"), 1, inputs=None))
    other = replace(record(NameError("name 'prize' is not defined"), 1), task_id="c.1")
    plan = spec().plan(SubtaskId("c", 1), KnownAvailability())
    log, result = FailureHandler(spec().config, task_id_of).handle(log, other, plan, (), 100.5)
    assert (first, result.outcome) == (Outcome.CREATED, Outcome.NOT_RECOVERABLE)
    assert [d.status for d in log.decisions] == [DecisionStatus.CANCELLED, DecisionStatus.NOT_RECOVERABLE]
    assert "is not recoverable" in log.decisions[0].reason


def twice(second: FailureRecord, first: FailureRecord | None = None) -> tuple[RunLog, Outcome, Outcome]:
    log, one = fail(RunLog(DAG, RUN), first or record(KeyError("price"), 1))
    log = applied(log, 101.0)
    log, two = fail(log, second)
    return log, one, two


def test_the_same_error_on_the_same_inputs_and_code_is_not_recoverable_naming_both_tries_and_the_rule() -> None:
    log, one, two = twice(record(KeyError("price"), 2, at=110.0))
    assert (one, two) == (Outcome.CREATED, Outcome.NOT_RECOVERABLE)
    reason = log.decisions[-1].reason
    assert "try 1 and try 2" in reason and RULE_EVIDENCE in reason and "KeyError" in reason
    assert log.decisions[-1].budget["restart_attempts_left"] == 1, "the budget it did not spend"


@pytest.mark.parametrize("second, why", [
    (record(KeyError("price"), 2, inputs=TryInputs("in-2", "code-1"), at=110.0), "different inputs"),
    (record(KeyError("price"), 2, inputs=TryInputs("in-1", "code-2"), at=110.0), "different code"),
    (record(KeyError("quantity"), 2, at=110.0), "a different message"),
    (record(ValueError("price"), 2, at=110.0), "a different class"),
    (record(KeyError("price"), 2, inputs=None, at=110.0), "unknown inputs or code"),
    (record(ConnectionResetError("reset by peer"), 2, at=110.0), "an infrastructure class"),
])
def test_anything_else_restarts_as_usual(second: FailureRecord, why: str) -> None:
    first = record(ConnectionResetError("reset by peer"), 1) if "infrastructure" in why else None
    _, one, two = twice(second, first)
    assert (one, two) == (Outcome.CREATED, Outcome.CREATED), why


def test_an_earlier_failure_without_inputs_is_no_evidence() -> None:
    _, one, two = twice(record(KeyError("price"), 2, at=110.0), record(KeyError("price"), 1, inputs=None))
    assert (one, two) == (Outcome.CREATED, Outcome.CREATED)


def test_a_spent_budget_still_reads_exhausted() -> None:
    """attempts 1 (the e2e budget job): the second identical failure exhausts, as before failure classes."""
    job = budget_spec()
    log, one = fail(RunLog(DAG, RUN), record(KeyError("price"), 1), job)
    log, two = fail(applied(log, 101.0), record(KeyError("price"), 2, at=110.0), job)
    assert (one, two) == (Outcome.CREATED, Outcome.EXHAUSTED)


def test_a_persons_clear_of_a_not_recoverable_run_reruns_it() -> None:
    """The run ended not-recoverable; a person fixes the data or the code and clears the run (clear count 2 > our
    1): the rerun's failure starts a new epoch, so the evidence before the clear does not count — it restarts."""
    log, one = fail(RunLog(DAG, RUN), record(KeyError("price"), 1, clear_number=0))
    log = applied(log, 101.0, clear_number=1)
    log, two = fail(log, record(KeyError("price"), 2, at=110.0, clear_number=1))
    assert (one, two) == (Outcome.CREATED, Outcome.NOT_RECOVERABLE)
    log, three = fail(log, record(KeyError("price"), 3, at=200.0, clear_number=2))
    assert three is Outcome.CREATED and log.epoch == 1
    log = applied(log, 201.0, clear_number=3)
    log, four = fail(log, record(KeyError("price"), 4, at=210.0, clear_number=3))
    assert four is Outcome.NOT_RECOVERABLE, "within the new epoch, the same evidence ends it again"


def test_a_failure_naming_an_unreadable_input_always_restarts_its_producer() -> None:
    """The provider's errors are ValueErrors: declaring ValueError must not stop an unreadable input from healing."""
    job = spec(**{"restart-strategy.non-recoverable-errors": "ValueError"})
    unreadable = replace(record(ValueError("partition b#0 is unreadable"), 1), cause="b#0")
    _, outcome = fail(RunLog(DAG, RUN), unreadable, job)
    assert outcome is Outcome.CREATED

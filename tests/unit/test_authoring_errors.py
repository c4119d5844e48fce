"""Bad authoring fails when the DAG file is parsed, with a message naming the step, edge or option."""

from __future__ import annotations

import textwrap
from pathlib import Path
from typing import Any

import pytest
from airflow.sdk import DAG

from airflow_region_failover import GraphError, OptionError, RegionJob


def noop(spark: Any, inputs: Any, context: Any) -> None:
    return None


def render(job: RegionJob) -> None:
    with DAG("authoring_errors", schedule=None):
        job.render()


def test_edge_to_unknown_step_names_it() -> None:
    job = RegionJob()
    job.step("extract", noop)
    job.edge("extract", "trasnform", exchange="BLOCKING")
    with pytest.raises(GraphError, match=r"'extract' -> 'trasnform'.*unknown step 'trasnform'"):
        render(job)


def test_cycle_names_the_steps() -> None:
    job = RegionJob()
    for step in ("a", "b", "c"):
        job.step(step, noop)
    job.edge("a", "b").edge("b", "c").edge("c", "a")
    with pytest.raises(GraphError, match=r"cycle among steps: .*a.*b.*c"):
        render(job)


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"restart-strategy.fixed-delay.atempts": "3"}, r"restart-strategy\.fixed-delay\.atempts"),
        ({"restart-strategy.fixed-delay.attempts": "three"}, r"restart-strategy\.fixed-delay\.attempts"),
        ({"restart-strategy.type": "sometimes"}, r"restart-strategy\.type"),
        ({"jobmanager.execution.failover-strategy": "partial"}, r"jobmanager\.execution\.failover-strategy"),
        ({"restart-strategy.fixed-delay.delay": [1]}, r"restart-strategy\.fixed-delay\.delay"),
    ],
)
def test_bad_option_names_the_key(options: dict[str, Any], message: str) -> None:
    with pytest.raises(OptionError, match=message):
        job = RegionJob(options=options)
        job.step("a", noop)
        render(job)


def test_option_of_another_strategy_type_names_the_key() -> None:
    job = RegionJob(restart_strategy="exponential-delay",
                    options={"restart-strategy.failure-rate.delay": "1 s"})
    job.step("a", noop)
    with pytest.raises(OptionError, match=r"restart-strategy\.failure-rate\.delay"):
        render(job)


def test_bad_parallelism_names_the_step() -> None:
    job = RegionJob()
    job.step("wide", noop, parallelism=0)
    with pytest.raises(GraphError, match=r"step 'wide': parallelism 0"):
        render(job)


def test_duplicate_step_names_it() -> None:
    job = RegionJob()
    job.step("a", noop)
    with pytest.raises(GraphError, match=r"step 'a' is declared twice"):
        job.step("a", noop)


def test_bad_function_signature_names_the_step() -> None:
    def two_args(spark: Any, inputs: Any) -> None:
        return None

    with pytest.raises(GraphError, match=r"step 'a': function 'two_args' must accept \(spark, inputs, context\)"):
        RegionJob().step("a", two_args)


def test_step_needs_exactly_one_implementation() -> None:
    with pytest.raises(GraphError, match=r"step 'a': give exactly one of"):
        RegionJob().step("a")
    with pytest.raises(GraphError, match=r"step 'b': give exactly one of"):
        RegionJob().step("b", noop, script="x.py")


def test_missing_script_names_step_and_path(tmp_path: Path) -> None:
    with pytest.raises(GraphError, match=r"step 'load': script '.*missing\.py' is not an existing \.py file"):
        RegionJob().step("load", script=tmp_path / "missing.py")


def test_reserved_operator_argument_names_the_step() -> None:
    with pytest.raises(GraphError, match=r"step 'a': 'task_id' is set by the renderer"):
        RegionJob().step("a", noop, task_id="x")


def test_render_outside_a_dag_says_how_to_fix() -> None:
    job = RegionJob()
    job.step("a", noop)
    with pytest.raises(GraphError, match=r"inside `with DAG"):
        job.render()


def test_json_without_implementation_names_the_step() -> None:
    document = {"version": 2, "steps": [{"id": "a"}, {"id": "b"}], "edges": [
        {"from": "a", "to": "b", "exchange": "BLOCKING"}]}
    with pytest.raises(GraphError, match=r"step 'b' of the JSON graph has no implementation"):
        RegionJob.from_json(document, {"a": noop})
    with pytest.raises(GraphError, match=r"unknown step 'c'"):
        RegionJob.from_json(document, {"a": noop, "b": noop, "c": noop})


def test_bad_dag_file_is_an_import_error_naming_the_step(tmp_path: Path) -> None:
    """What a DAG author sees: the DagBag import error names the offending step."""
    from airflow.dag_processing.dagbag import DagBag

    (tmp_path / "bad_dag.py").write_text(textwrap.dedent("""
        from airflow.sdk import DAG
        from airflow_region_failover import RegionJob

        def f(spark, inputs, context):
            return None

        with DAG("bad_dag", schedule=None):
            job = RegionJob()
            job.step("extract", f)
            job.edge("extract", "load", exchange="BLOCKING")
            job.render()
    """))
    bag = DagBag(str(tmp_path))
    assert not bag.dags
    (error,) = bag.import_errors.values()
    assert "unknown step 'load'" in error


def test_a_dag_id_the_result_store_cannot_key_is_refused_at_parse_time() -> None:
    """Non-ASCII dag ids are legal in Airflow but not in the store's keys: say so when the DAG file is parsed,
    not when the first task writes."""
    job = RegionJob()
    job.step("extract", noop)
    with pytest.raises(GraphError, match=r"dag id 'résumé'.*ASCII"), DAG("résumé", schedule=None):
        job.render()


@pytest.mark.parametrize("step_id", [["a"], {"a": 1}, 7, None])
def test_a_step_id_that_is_not_a_string_is_named_when_the_step_is_declared(step_id: Any) -> None:
    job = RegionJob()
    with pytest.raises(GraphError, match=r"step id .* must be a non-empty string"):
        job.step(step_id, noop)


def test_a_parallelism_no_airflow_could_run_is_refused_when_the_dag_file_is_parsed() -> None:
    job = RegionJob()
    job.step("extract", noop, parallelism=10**7)
    with pytest.raises(GraphError, match=r"step 'extract': parallelism 10000000 must be an integer between 1 and "):
        render(job)

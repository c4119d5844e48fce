"""The planner's knobs (planning/policy.py): every bad value named at once, and the JSON form a job carries."""

from __future__ import annotations

import pytest

from airflow_region_failover import OptionError, PlannerPolicy


@pytest.mark.parametrize(("knobs", "named"), [
    ({"min_runs": 0}, "min_runs=0"), ({"window": 2}, "window=2"), ({"exhaustive": 1.5}, "exhaustive=1.5"),
    ({"min_runs": True}, "min_runs=True"), ({"margin": 1.0}, "margin=1.0"), ({"margin": -0.1}, "margin=-0.1"),
    ({"deadline_margin": float("nan")}, "deadline_margin=nan"), ({"restart_seconds": -1}, "restart_seconds=-1"),
    ({"deadline_seconds": 0}, "deadline_seconds=0"),
])
def test_a_bad_knob_is_one_error_naming_it(knobs: dict[str, object], named: str) -> None:
    with pytest.raises(OptionError, match=f"PlannerPolicy\\({named}\\)"):
        PlannerPolicy(**knobs)  # type: ignore[arg-type]


def test_the_json_form_holds_only_what_differs_from_the_defaults_and_reads_back() -> None:
    assert PlannerPolicy().to_json() == {}
    policy = PlannerPolicy(min_runs=2, window=2, margin=0.0, restart_seconds=120.0)
    assert policy.to_json() == {"min_runs": 2, "window": 2, "margin": 0.0, "restart_seconds": 120.0}
    assert PlannerPolicy.from_json(policy.to_json()) == policy
    assert PlannerPolicy.from_json({}) == PlannerPolicy()


@pytest.mark.parametrize("document", [{"minruns": 2}, [1], "margin"])
def test_a_document_that_is_no_policy_is_named(document: object) -> None:
    with pytest.raises(OptionError, match=r"is not a PlannerPolicy field; use deadline_margin, .*window"):
        PlannerPolicy.from_json(document)

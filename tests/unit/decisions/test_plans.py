"""Where the plans of a job rendered PER_RUN live, and fixing a run's plan once with a conditional create.

    gen#0 --AUTO--> agg#0 --AUTO--> fin#0          (results gen->agg, agg->fin)
"""

from __future__ import annotations

from airflow_region_failover.decisions.plans import Plans
from airflow_region_failover.graph.auto import Choice, ExchangePlan
from airflow_region_failover.planning.stored import NO_DECISION, PlanDecision
from airflow_region_failover.store.keys import Layout
from tests.support.fakes import MemoryObjects

DAG, RUN = "etl", "manual__2026-12-02T10:00:00+00:00"
FIRST = PlanDecision("d1", ExchangePlan({"gen->agg": Choice.FUSED}), "switches", 10.0, "r0")
SECOND = PlanDecision("d2", ExchangePlan({"agg->fin": Choice.FUSED}), "switches again", 20.0, "r1")


def test_the_keys_stay_under_the_configured_prefix() -> None:
    layout = Layout("region-failover", "team/rf")
    assert layout.next_plan(DAG) == "team/rf/failover/v1/plans/etl/next.json"
    assert layout.run_plan(DAG, RUN) == ("team/rf/failover/v1/runs/etl/manual__2026-12-02T10.3a00.3a00.2b00.3a00/"
                                         "plan.json")
    assert layout.check(layout.run_plan(DAG, RUN)) and layout.check(layout.next_plan(DAG))


def test_no_decision_fixes_every_auto_result_blocking_and_a_decision_later_changes_nothing() -> None:
    plans = Plans(MemoryObjects(), clock=lambda: 7.0)  # type: ignore[arg-type]
    fixed = plans.fix(DAG, RUN)
    assert fixed.plan.fused == () and fixed.reason == NO_DECISION and fixed.fixed_at == 7.0
    plans.decide_next(DAG, FIRST)
    assert plans.next(DAG) == FIRST and plans.fix(DAG, RUN) == fixed == plans.of_run(DAG, RUN)
    assert plans.fix(DAG, "the next run").decision == FIRST


class Racing(MemoryObjects):
    """Objects where another task fixes the run's plan between this task's read and its create, and the next
    decision changes meanwhile: the interleaving a conditional create must survive."""

    def __init__(self) -> None:
        super().__init__()
        self.other: Plans | None = None

    def put_if_absent(self, key: str, body: bytes, content_type: str = "application/json") -> str:
        if self.other is not None and key.endswith("/plan.json"):
            other, self.other = self.other, None
            won = other.fix(DAG, RUN)  # the other task wins the create with the decision stored then...
            assert won.decision == FIRST
            other.decide_next(DAG, SECOND)  # ...and the scheduler decides the next run's plan since
        return super().put_if_absent(key, body, content_type)


def test_two_tasks_racing_to_fix_the_plan_agree_on_the_winners() -> None:
    objects = Racing()
    one, other = Plans(objects, clock=lambda: 1.0), Plans(objects, clock=lambda: 2.0)  # type: ignore[arg-type]
    one.decide_next(DAG, FIRST)
    objects.other = other
    mine = one.fix(DAG, RUN)  # read nothing fixed, then lost the create to the other task
    assert mine == other.fix(DAG, RUN) == one.fix(DAG, RUN) and mine.decision == FIRST and mine.fixed_at == 2.0
    assert one.next(DAG) == SECOND  # a later decision is the next run's, not this one's


def test_a_run_plan_is_one_key_beside_the_next_runs_decision() -> None:
    objects = MemoryObjects()
    plans = Plans(objects)  # type: ignore[arg-type]
    plans.decide_next(DAG, FIRST)
    plans.fix(DAG, RUN)
    plans.fix(DAG, RUN)
    assert set(objects.objects) == {objects.layout.run_plan(DAG, RUN), objects.layout.next_plan(DAG)}

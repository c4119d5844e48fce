"""Sliced chains: the render names the rescalable chains a run may cut into epochs (rendering/sharing.py), the
scheduler decides their next run's epochs from the history, a run fixes them with its plan for every try, and a
plan that cannot be read fails the try rather than run another number.

    gen#0,1 -chained-> clean#0,1 ==B keyed k==> join#0,1 ==B==> sink#0       (sink not rescalable)
    dim#0 ==B broadcast==> join                                             (dim checkpointed)
"""

from __future__ import annotations

from typing import Any

import pytest
from airflow.sdk import DAG

from airflow_region_failover import PER_RUN, Checkpoint, RegionJob
from airflow_region_failover.checkpoint.plan import plan_subtasks
from airflow_region_failover.decisions.plans import Plans
from airflow_region_failover.exceptions import GraphError, RunPlanUnavailable
from airflow_region_failover.job import JobSpec, job_of
from airflow_region_failover.planning.history import History, RunRecord, StepTimes
from airflow_region_failover.planning.model import Segments, expected_time, region_time
from airflow_region_failover.plugins.advice import advise
from airflow_region_failover.plugins.next_plan import decide_next
from airflow_region_failover.spark.sliced import slices_of
from tests.support.fakes import MemoryObjects
from tests.unit.test_authoring_auto_epochs import Measured, Unreachable

DAG_ID = "sliced"


def noop(spark: Any, inputs: Any, context: Any) -> None:
    return None


def dim(spark: Any, inputs: Any, state: Any, context: Any) -> None:
    return None


def _spec(exchange: str = "BLOCKING", per_run: bool = False) -> JobSpec:
    job = RegionJob()
    job.step("gen", noop, parallelism=2, rescalable=True)
    job.step("clean", noop, parallelism=2, rescalable=True)
    job.step("src", noop)
    job.step("dim", dim, rescalable=True, checkpoint=Checkpoint(state_key="k", state_schema="k long"))
    job.step("join", noop, parallelism=2, rescalable=True)
    job.step("sink", noop)
    job.edge("gen", "clean", exchange="PIPELINED", distribution="POINTWISE")
    job.edge("src", "dim", exchange="BLOCKING")
    job.edge("clean", "join", exchange=exchange, partition_by=["k"], max_parallelism=16)
    job.edge("dim", "join", exchange="BLOCKING", distribution="BROADCAST")
    job.edge("join", "sink", exchange="BLOCKING")
    with DAG(f"{DAG_ID}_{exchange}_{per_run}", schedule=None) as dag:
        job.render(plan=PER_RUN) if per_run else job.render()
    spec = job_of(dag)
    assert spec is not None
    return spec


def _history(failures: int) -> History:
    """Three runs of the gen chain (30 + 20 s per subtask) and the join (120 s), ``failures`` failed join tries."""
    return History(tuple(RunRecord(f"r{i}", (StepTimes("gen", (30.0, 30.0)), StepTimes("clean", (20.0, 20.0)),
                                             StepTimes("join", (120.0, 120.0))), (),
                                   {"join": failures} if failures else {}, 340.0) for i in range(3)))


def test_the_render_names_the_rescalable_chains_it_may_slice() -> None:
    spec = _spec()
    assert spec.sliced == {"gen": 1000, "join": 16 // 2}  # dim is checkpointed, sink is not rescalable
    assert JobSpec.from_document(spec.to_document()).sliced == spec.sliced
    assert "sliced" not in JobSpec(spec.graph, spec.options).to_document()
    with pytest.raises(GraphError, match="'sliced' must map step ids to the most epochs"):
        JobSpec.from_document({**spec.to_document(), "sliced": {"join": 0}})
    with pytest.raises(GraphError, match="sliced names unknown step 'nope'"):
        JobSpec(spec.graph, spec.options, sliced={"nope": 2})


def test_a_chain_inside_a_fused_region_task_is_not_sliced() -> None:
    #   PER_RUN fuses clean -> join (AUTO) into one static task: neither the gen chain nor the join is sliced
    assert _spec("AUTO", per_run=True).sliced == {}


def test_the_scheduler_decides_the_epochs_and_a_run_fixes_them_for_every_try() -> None:
    spec = _spec()
    plans = Plans(MemoryObjects(), clock=lambda: 5.0)  # type: ignore[arg-type]
    first = decide_next(DAG_ID, spec, plans, "", Measured(History()))
    assert first is not None and {s: c.epochs for s, c in first.epochs.items()} == {"gen": 1, "join": 1}
    frequent = decide_next(DAG_ID, spec, plans, "r2", Measured(_history(3)))
    assert frequent is not None
    chosen = frequent.epochs["join"].epochs
    assert 1 < chosen <= 8 and frequent.epochs["gen"].epochs >= 1
    assert advise(DAG_ID, spec, Measured(_history(3))).to_json()["epochs"]["join"]["epochs"] == chosen
    assert slices_of(plans, DAG_ID, "run_1", "join") == chosen  # the first try fixes the run's plan
    decide_next(DAG_ID, spec, plans, "r3", Measured(_history(0)))
    assert slices_of(plans, DAG_ID, "run_1", "join") == chosen  # a retry: the run's plan, not the newer decision
    assert slices_of(plans, DAG_ID, "run_2", "join") == 1


def test_a_run_plan_that_cannot_be_read_fails_the_try_rather_than_run_another_number() -> None:
    with pytest.raises(RunPlanUnavailable, match=r"step 'join' is rescalable .*could not be read or fixed \(S3 did "
                                                 r"not answer"):
        slices_of(Plans(Unreachable()), DAG_ID, "run_1", "join")  # type: ignore[arg-type]


def test_the_epochs_of_a_subtask_are_its_virtual_subtasks_and_a_declaration_cannot_ask_for_them() -> None:
    plan = plan_subtasks(1, 3)
    assert [(e.index, e.count, e.subtask) for e in plan.epochs] == [(0, 3, 3), (1, 3, 4), (2, 3, 5)]
    assert plan.fingerprint != plan_subtasks(0, 3).fingerprint != plan_subtasks(1, 4).fingerprint
    with pytest.raises(GraphError, match=r"cut='subtasks'\) is the provider's own cut"):
        Checkpoint(state_key="k", state_schema="k long", cut="subtasks")


def test_a_script_step_is_never_sliced(tmp_path: Any) -> None:
    #   gen#0,1 ==B keyed k==> load#0,1 (a rescalable script step: spark-submitted, its epochs not ours to cut)
    script = tmp_path / "load.py"
    script.write_text("print('load')\n")
    job = RegionJob()
    job.step("gen", noop, parallelism=2, rescalable=True)
    job.step("load", script=str(script), parallelism=2, rescalable=True)
    job.edge("gen", "load", exchange="BLOCKING", partition_by=["k"], max_parallelism=16)
    with DAG(f"{DAG_ID}_script", schedule=None) as dag:
        job.render()
    spec = job_of(dag)
    assert spec is not None and spec.sliced == {"gen": 1000}


def test_the_advice_costs_the_declared_plan_in_the_epochs_its_next_run_takes() -> None:
    #   no AUTO edge: the one plan as declared, its join regions (join#0, join#1) in the join's chosen epochs
    every = (StepTimes("src", (5.0,)), StepTimes("dim", (5.0,)), StepTimes("sink", (10.0,)))
    history = History(tuple(RunRecord(f"r{i}", (*run.steps, *every), (), run.failures, 360.0)
                            for i, run in enumerate(_history(3).runs)))
    advice = advise(DAG_ID, _spec(), Measured(history))
    assert advice.expected is not None and "no AUTO edge" in advice.note
    assert advice.to_json()["expected"]["expected_seconds"] == pytest.approx(advice.expected.expected, abs=1e-3)
    join = next(r for r in advice.expected.regions if r.steps == ("join",))
    chosen = advice.epochs["join"].epochs
    assert chosen > 1 and join.expected < expected_time(join.work, join.failures, 10.0)  # resumed, not restarted
    epochs = Segments(chosen, 2.0, ("join",))
    assert join.expected == pytest.approx(region_time(join.work, join.failures, 10.0, epochs)[0])
    unmeasured = advise(DAG_ID, _spec(), Measured(_history(3)))  # src, dim, sink never measured
    assert unmeasured.expected is None and "no expected completion time: step 'src'" in unmeasured.note

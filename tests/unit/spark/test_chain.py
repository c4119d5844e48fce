"""Chain subtasks without Spark: the scratch-path log of unchained PIPELINED inputs, the members' step contexts
and the chain's code fingerprint.

    a#i -P-> b#i -P(BROADCAST)-> c#j -P-> d#j      a -> b chained; b -> c not (BROADCAST); c -> d chained
"""

from __future__ import annotations

import logging

import pytest

from airflow_region_failover import JobGraphBuilder, PartitionId, SubtaskId
from airflow_region_failover.graph.model import Exchange
from airflow_region_failover.job import JobSpec, StepImpl
from airflow_region_failover.spark.chain import log_scratch_inputs
from airflow_region_failover.spark.exchange import PartitionRef
from airflow_region_failover.spark.run import chain_contexts, chain_fingerprint

GRAPH = (JobGraphBuilder().step("a", parallelism=2).step("b", parallelism=2).step("c", parallelism=2)
         .step("d", parallelism=2, deterministic=True)
         .edge("a", "b", exchange="PIPELINED", distribution="POINTWISE")
         .edge("b", "c", exchange="PIPELINED")
         .edge("c", "d", exchange="PIPELINED", distribution="POINTWISE").build())


def test_a_chain_head_logs_once_why_its_pipelined_input_is_read_from_the_store(
        caplog: pytest.LogCaptureFixture) -> None:
    spec = JobSpec(GRAPH, {})
    assert [c.steps for c in spec.chains.chains] == [("a", "b"), ("c", "d")]
    with caplog.at_level(logging.INFO, logger="airflow_region_failover.spark.chain"):
        log_scratch_inputs(spec, SubtaskId("c", 1))
        log_scratch_inputs(spec, SubtaskId("a", 1))
    [message] = [r.getMessage() for r in caplog.records]
    assert message == ("PIPELINED b -> c is not chained (BROADCAST exchange): c#1 reads b's scratch partitions "
                       "of 'b->c' from the store")


def test_each_member_gets_the_context_of_its_own_step() -> None:
    head_ref = PartitionRef("b->c", 0, Exchange.PIPELINED, "d", "r", 1)
    refs = {GRAPH.inputs("c")[0]: (head_ref, PartitionRef("b->c", 1, Exchange.PIPELINED, "d", "r", 1))}
    c, d = chain_contexts(GRAPH, (SubtaskId("c", 1), SubtaskId("d", 1)), refs, {"params": {"k": 2}})
    assert c.subtask == SubtaskId("c", 1) and c.partitions == {"b": (PartitionId("b->c", 0), PartitionId("b->c", 1))}
    assert d.subtask == SubtaskId("d", 1) and d.deterministic and not c.deterministic
    assert d.partitions == {"c": (PartitionId("c->d", 1),)} and d.params == {"k": 2} and d.index == 1


def noop(spark: object, inputs: object, context: object) -> None:
    return None


def other(spark: object, inputs: object, context: object) -> None:
    return None


def test_the_chain_fingerprint_changes_with_any_member() -> None:
    a, b, c = StepImpl("a", fn=noop), StepImpl("b", fn=noop), StepImpl("b", fn=other)
    assert chain_fingerprint([a, b]) == chain_fingerprint([a, b]) != chain_fingerprint([a, c])

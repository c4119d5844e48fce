"""An input that turns out unreadable only when Spark reads it — ``executors`` mode reads lazily in Spark's Python
workers, whose errors reach the driver as a ``PythonException`` carrying only text — still fails the try with
:class:`InputUnavailable` naming the partition (the failover loop's cause: its producer restarts), not with an
error that names no partition.

    p#0 ==> c#0        (BLOCKING; c#0's read of p#0 fails inside Spark)
"""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest

from airflow_region_failover import JobGraphBuilder, PartitionId, SubtaskId
from airflow_region_failover.exceptions import InputUnavailable
from airflow_region_failover.graph.model import Exchange
from airflow_region_failover.spark.compute import compute
from airflow_region_failover.spark.exchange import PartitionRef

GRAPH = JobGraphBuilder().step("p").step("c").edge("p", "c", exchange="BLOCKING").build()
REF = PartitionRef("p->c", 0, Exchange.BLOCKING, "d", "r", 1)
WORKER_TRACE = """An exception was thrown from the Python worker. Please see the stack trace below.
Traceback (most recent call last):
  File "/opt/airflow_region_failover/store/reading.py", line 67, in fetch
airflow_region_failover.exceptions.NotAvailable: partition p->c#0 is unreadable: object pre/cas/v1/ab/abcd.parquet \
listed in its manifest does not match the SHA-256 in its manifest
"""


class PythonException(Exception):
    """Shaped like pyspark's: the worker's traceback as text, no partition attribute."""


def run_reading(error: str) -> Any:
    def step(spark: Any, inputs: Any, context: Any) -> Any:
        raise PythonException(error)  # the lazy read of inputs["p"] fails once an action runs

    io = SimpleNamespace(read=lambda spark, ref, current: "frame of p->c#0")
    return SimpleNamespace(graph=GRAPH, head=SubtaskId("c", 0), members=(SubtaskId("c", 0),), functions=(step,),
                           contexts=(SimpleNamespace(),), refs={GRAPH.inputs("c")[0]: (REF,)}, io=io, current={})


def test_an_executors_error_naming_an_unreadable_input_fails_the_try_naming_it() -> None:
    with pytest.raises(Exception) as caught:
        compute(None, run_reading(WORKER_TRACE))  # type: ignore[arg-type]
    assert isinstance(caught.value, InputUnavailable), repr(caught.value)
    assert caught.value.partition == PartitionId("p->c", 0) and "SHA-256" in str(caught.value)


def test_an_error_naming_a_partition_the_subtask_does_not_read_stays_as_it_is() -> None:
    with pytest.raises(PythonException):
        compute(None, run_reading(WORKER_TRACE.replace("p->c#0", "other#3")))  # type: ignore[arg-type]

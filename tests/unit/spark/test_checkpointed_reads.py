"""A checkpointed subtask confirms what Spark's own reader read once per epoch job that read it: each epoch's slice
after that epoch (never again), the inputs read whole after every epoch (each epoch's job scans them again) — the
HEADs grow linearly with the epochs, not with their square. Spark itself is not needed: the store's read hands
the reads to the engine as Spark's own reader would (:class:`JvmRead`), and the confirmation is the real one on
moto's S3.

    src#0 ==BLOCKING==> count#0 <==BLOCKING== dim#0     (src cut into one epoch per object; dim read whole)
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from types import SimpleNamespace
from typing import Any

import pyarrow as pa
import pytest

from airflow_region_failover import JobGraphBuilder, SubtaskId
from airflow_region_failover.checkpoint.plan import Piece, plan_objects
from airflow_region_failover.graph.model import Edge, Exchange
from airflow_region_failover.spark import checkpointed
from airflow_region_failover.spark.checkpointed import SparkEngine
from airflow_region_failover.spark.context import StepContext
from airflow_region_failover.spark.exchange import PartitionRef
from airflow_region_failover.spark.store_io import ReadCounter
from airflow_region_failover.store.dataplane.reading import JvmRead
from airflow_region_failover.store.manifest import Manifest
from airflow_region_failover.store.result_store import ResultStore
from tests.support.checkpointing import commit_input
from tests.support.store import HeadCounter, moto_store

DAG, RUN, EPOCHS = "d", "r", 6
GRAPH = (JobGraphBuilder().step("src").step("dim").step("count")
         .edge("src", "count", exchange="BLOCKING").edge("dim", "count", exchange="BLOCKING").build())
SLICED, WHOLE = (next(e for e in GRAPH.inputs("count") if e.source == s) for s in ("src", "dim"))
FRAME = SimpleNamespace(schema=SimpleNamespace(json=lambda: "{}"))


class JvmStore:
    """The real store, but its reads are handed to Spark's own reader (recorded as :class:`JvmRead`, as
    :func:`~airflow_region_failover.store.dataplane.reading.read_dataframe` records them) without a Spark session."""

    def __init__(self, store: ResultStore) -> None:
        self.store = store

    def read_version(self, spark: Any, manifest: Manifest, objects: Any = None, checked: Any = None) -> Any:
        checked.append(JvmRead(manifest, manifest.objects if objects is None else objects))
        return FRAME

    def confirm_unchanged(self, reads: Any) -> None:
        self.store.confirm_unchanged(reads)


@dataclass(frozen=True)
class Run:
    """The parts of a :class:`~airflow_region_failover.spark.run.SubtaskRun` the engine's epochs use."""

    refs: dict[Edge, tuple[PartitionRef, ...]]
    current: dict[PartitionRef, Manifest]
    io: Any
    graph: Any = GRAPH
    members: tuple[SubtaskId, ...] = (SubtaskId("count", 0),)
    contexts: tuple[StepContext, ...] = (StepContext(SubtaskId("count", 0), 1, True, {}),)
    functions: tuple[Any, ...] = (lambda spark, inputs, context: None,)

    @property
    def tail(self) -> SubtaskId:
        return self.members[-1]

    @property
    def head(self) -> SubtaskId:
        return self.members[0]


@pytest.fixture
def store() -> Iterator[ResultStore]:
    with moto_store() as store:
        yield store


def engine(store: ResultStore, dim_objects: int) -> tuple[SparkEngine, Any]:
    tables = [pa.table({"k": pa.array([i, i + 100], pa.int64())}) for i in range(EPOCHS)]
    src = commit_input(store, DAG, RUN, tables)
    refs: dict[Edge, tuple[PartitionRef, ...]] = {SLICED: (PartitionRef("src->count", 0, Exchange.BLOCKING, DAG,
                                                                         RUN, 1),)}
    current = {refs[SLICED][0]: src}
    if dim_objects:
        dim = commit_input(store, DAG, "dims", [pa.table({"d": [i]}) for i in range(dim_objects)])
        refs[WHOLE] = (PartitionRef("dim->count", 0, Exchange.BLOCKING, DAG, RUN, 1),)
        current[refs[WHOLE][0]] = dim
    io = SimpleNamespace(store=JvmStore(store), jvm_reads=[], reads=ReadCounter())
    chain = SimpleNamespace(sliced=SLICED, stateful={}, declaration=SimpleNamespace(cut="objects"))
    plan = plan_objects([Piece(src.partition, src.objects)], EPOCHS)
    assert len(plan) == EPOCHS
    return SparkEngine(None, Run(refs, current, io), chain, {}), plan  # type: ignore[arg-type]


def test_each_epochs_slice_is_confirmed_once(store: ResultStore) -> None:
    spark_engine, plan = engine(store, 0)
    spark_engine.whole = {}
    counter = HeadCounter(store.objects.client)
    for epoch in plan.epochs:
        spark_engine.run_epoch(epoch, {})
    assert counter.sent == EPOCHS, f"{counter.sent} HEADs for {EPOCHS} epochs of one object each"


def test_the_inputs_read_whole_are_confirmed_after_every_epoch(store: ResultStore,
                                                               monkeypatch: pytest.MonkeyPatch) -> None:
    spark_engine, plan = engine(store, 2)

    def read_inputs(spark: Any, run: Any) -> dict[str, Any]:
        (ref,) = run.refs[WHOLE]
        run.io.store.read_version(spark, run.current[ref], checked=run.io.jvm_reads)
        return {"dim": FRAME}

    monkeypatch.setattr(checkpointed, "read_inputs", read_inputs)
    counter = HeadCounter(store.objects.client)
    for epoch in plan.epochs:
        spark_engine.run_epoch(epoch, {})
    assert counter.sent == EPOCHS * (2 + 1), f"{counter.sent} HEADs for {EPOCHS} epochs (2 whole objects + 1)"

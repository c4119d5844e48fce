"""A checkpointed subtask without Spark, for tests of the epoch loop: an Arrow engine
(:class:`~airflow_region_failover.checkpoint.runner.Engine`) over a real result store, and one try of it.

``python -m tests.support.checkpointing '<json>'`` runs one try in its own process (the property test kills it);
the JSON names the store (endpoint, keys, bucket, prefix), the run, the try, the options and where to die:
``{"die": ["epoch", k]}`` inside epoch ``k``'s function, ``["boundary", k]`` right after checkpoint of epoch
``k`` committed, ``["checkpoint", k]`` after epoch ``k``'s state was stored but before its manifest is written.
"""

from __future__ import annotations

import json
import os
import signal
import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from airflow_region_failover.checkpoint import lsm
from airflow_region_failover.checkpoint.plan import Epoch, Piece, plan_objects
from airflow_region_failover.checkpoint.resume import Identity
from airflow_region_failover.checkpoint.runner import EpochResult, Listener, Outcome, Settings, run_epochs
from airflow_region_failover.checkpoint.storage import CheckpointStorage
from airflow_region_failover.failover.checkpointing import CheckpointConfig
from airflow_region_failover.graph.ids import PartitionId
from airflow_region_failover.store.dataplane.parquet import write_arrow
from airflow_region_failover.store.dataplane.reading import load_table
from airflow_region_failover.store.dataplane.types import Target, Written
from airflow_region_failover.store.keys import AttemptId
from airflow_region_failover.store.manifest import Manifest
from airflow_region_failover.store.result_store import ResultStore

INPUT = PartitionId("src->count", 0)
OUTPUT = PartitionId("count", 0)
KEY = ("k",)
SCHEMA = pa.schema([("k", pa.int64()), ("n", pa.int64()), (lsm.KEY_GROUP, pa.int32())])
ArrowStep = Callable[[pa.Table, pa.Table, Epoch], tuple[pa.Table, pa.Table]]


def counting(rows: pa.Table, state: pa.Table, epoch: Epoch) -> tuple[pa.Table, pa.Table]:
    """A deterministic stateful step: a running count per key ``k``; a key whose count reaches 7 is emitted and
    dropped from the state (a deletion); each epoch outputs the counts of the keys it touched."""
    seen = rows.group_by("k").aggregate([([], "count_all")]).rename_columns(["k", "d"])
    joined = state.select(["k", "n"]).join(seen, "k", join_type="full outer")
    total = pc.add(pc.fill_null(joined.column("n"), 0), pc.fill_null(joined.column("d"), 0))
    table = pa.table({"k": joined.column("k"), "n": total.cast(pa.int64())})
    out = table.filter(pc.is_in(table.column("k"), value_set=seen.column("k").combine_chunks()))
    out = out.append_column("epoch", pa.array([epoch.index] * out.num_rows, pa.int64())).sort_by("k")
    alive = table.filter(pc.less(table.column("n"), 7))
    return out, alive.append_column(lsm.KEY_GROUP, pc.cast(pc.bit_wise_and(alive.column("k"), 7), pa.int32()))


@dataclass
class ArrowEngine:
    """Runs ``step`` on each epoch's objects of the input (fetched from the store) and stores its output."""

    store: ResultStore
    manifest: Manifest
    target: Target
    step: ArrowStep = counting
    die: tuple[str, int] | None = None

    def run_epoch(self, epoch: Epoch, states: Mapping[str, pa.Table]) -> EpochResult:
        if self.die == ("epoch", epoch.index):
            os.kill(os.getpid(), signal.SIGKILL)
        keys = self.store.run_keys(self.manifest.dag_id, self.manifest.run_id)
        tables = [load_table(self.store.objects, keys, o, True, self.manifest.partition)
                  for p in epoch.pieces for o in p.objects]
        rows = pa.concat_tables(tables) if tables else pa.table({"k": pa.array([], pa.int64())})
        out, state = self.step(rows, states["count"], epoch)
        return EpochResult({OUTPUT.result: write_arrow(out, self.target)}, {OUTPUT.result: "schema"},
                           {"count": state.cast(SCHEMA)})


def commit_input(store: ResultStore, dag_id: str, run_id: str, tables: Sequence[pa.Table]) -> Manifest:
    """Commit one input partition made of one object per table (the epochs' pieces)."""
    target = store.target(AttemptId(dag_id, run_id, INPUT, 1))
    written = [write_arrow(t, target) for t in tables]
    objects = tuple(o for w in written for o in w.objects)
    return store.commit_written(target, Written(objects, sum(w.rows for w in written)), "schema")[0]


def run_try(store: ResultStore, source: Manifest, run_id: str, try_number: int, epochs: int,
            config: CheckpointConfig | None = None, die: tuple[str, int] | None = None,
            listener: Listener | None = None, step: ArrowStep = counting, *, enabled: bool = True,
            opted_out: bool = False, index: int = 0) -> tuple[Manifest, Outcome]:
    """One try of the checkpointed subtask ``count#<index>`` of run ``run_id`` over ``source``; returns its
    committed result and what the loop did."""
    config = config or CheckpointConfig()
    output = PartitionId(OUTPUT.result, index)
    target = store.target(AttemptId(source.dag_id, run_id, output, try_number))
    storage = CheckpointStorage(store.objects, store.run_keys(source.dag_id, run_id), output,
                                store.config.min_grace_seconds)
    if die is not None and die[0] == "checkpoint":
        storage = _dying(storage, die[1])
    settings = Settings(storage, (target,), ("count",), {"count": KEY}, {"count": range(0, 8)}, try_number,
                        Identity((source.version(),), "code", ""), config, enabled, opted_out,
                        {"count": SCHEMA.empty_table()})
    engine = ArrowEngine(store, source, target, step, die)
    plan = plan_objects([Piece(source.partition, source.objects)], epochs)

    def hear(event: Any) -> None:
        if listener is not None:
            listener(event)
        if die is not None and die[0] == "boundary" and getattr(event, "epoch", None) == die[1]:
            os.kill(os.getpid(), signal.SIGKILL)

    outcome = run_epochs(settings, plan, engine, hear)
    (done,) = outcome.outputs
    written = Written(done.objects, done.rows)
    return store.commit_written(target, written, "schema", (source.version(),), "code")[0], outcome


def _dying(storage: CheckpointStorage, epoch: int) -> CheckpointStorage:
    """A storage whose commit of the checkpoint after ``epoch`` kills the process before the manifest is written
    (every state object of the checkpoint is already stored)."""

    class Dying(CheckpointStorage):
        def commit(self, manifest: Any) -> Any:
            if manifest.epoch == epoch:
                os.kill(os.getpid(), signal.SIGKILL)
            return super().commit(manifest)

    return Dying(storage.objects, storage.keys, storage.subtask, storage.min_grace_seconds)


def main(argv: Sequence[str]) -> int:
    """Run one try in this process as the JSON argument says (module doc)."""
    spec = json.loads(argv[0])
    store = ResultStore.from_endpoint(spec["endpoint"], spec["access_key"], spec["secret_key"], spec["bucket"],
                                      prefix=spec["prefix"], spark_io="driver")
    source = Manifest.from_json(spec["source"].encode(), where="argv")
    config = replace(CheckpointConfig(), **spec.get("config", {}))
    die = tuple(spec["die"]) if spec.get("die") else None
    run_try(store, source, spec["run_id"], spec["try"], spec["epochs"], config, die)  # type: ignore[arg-type]
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

"""OpenLineage for the step operator and for gc: which committed BLOCKING partitions a task read and wrote, and
which ones retention dropped.

Rules:

* a dataset is one BLOCKING partition of one run (a sink result's too): namespace ``s3://<bucket>``, name the key
  prefix under which the store commits that partition (``<prefix>/v1/<dag>/<run>/<result>/manifests/p<index>``,
  :meth:`~airflow_region_failover.store.keys.RunKeys.manifest` without its attempt), so every attempt of a
  partition is one dataset and its committed attempt and content checksum are the dataset's version;
* a step task's run lists as outputs every BLOCKING partition it committed or kept (``outputStatistics``: rows,
  bytes, objects) and as inputs every BLOCKING partition it read (``inputStatistics``: the bytes and objects it
  read of it), from its ledger (:mod:`~airflow_region_failover.spark.ledger`);
* its run facet ``regionFailover`` carries the task's failover ``region``, ``attempt`` (the try), the
  ``restartReason`` of its region when one of our clears started it (else empty), the ``decision`` id, and
  ``kept`` (its results were kept, not recomputed);
* partitions removed by retention (``region-failover gc``) are reported as outputs with the
  ``lifecycleStateChange`` facet ``DROP`` of one COMPLETE event of job ``region_failover.gc``
  (:func:`emit_dropped`).

The ``openlineage`` provider and client are imported only here, only when called: without them the step operator
runs as before (its lineage methods answer ``None``).
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Iterable
from typing import Any

from airflow_region_failover import conf
from airflow_region_failover.graph.ids import PartitionId
from airflow_region_failover.spark.ledger import InputEntry, OutputEntry, TaskLedger
from airflow_region_failover.store.keys import Layout

log = logging.getLogger(__name__)
RUN_FACET = "regionFailover"
PRODUCER = "https://github.com/airflow-provider-region-failover"


def dataset_name(layout: Layout, dag_id: str, run_id: str, partition: PartitionId) -> str:
    """The key prefix naming ``partition`` of one run (module rule)."""
    return layout.run(dag_id, run_id).manifest(partition, 1).rsplit("/", 1)[0]


def configured_layout() -> Layout:
    """The store's bucket and prefix from ``[region_failover]`` (no connection, no S3 request)."""
    return Layout(conf.store_bucket(), conf.store_prefix())


def namespace(layout: Layout) -> str:
    """``s3://<bucket>`` (OpenLineage's naming of S3)."""
    return f"s3://{layout.bucket}"


def available() -> bool:
    """Whether the OpenLineage provider and client can be imported."""
    try:
        import openlineage.client.event_v2  # noqa: F401
        from airflow.providers.openlineage.extractors import OperatorLineage  # noqa: F401
    except ImportError:
        return False
    return True


@functools.cache
def _run_facet_class() -> Any:
    import attr
    from openlineage.client.facet_v2 import RunFacet

    @attr.define
    class RegionFailoverRunFacet(RunFacet):
        """How region failover ran this task: its region, try, restart reason, decision and whether it kept."""

        region: str
        attempt: int
        restartReason: str = ""  # OpenLineage facets are camelCase
        decision: int | None = None
        kept: bool = False

    return RegionFailoverRunFacet


def run_facet(region: str, attempt: int, ledger: TaskLedger | None = None) -> Any:
    """The ``regionFailover`` run facet (module rule)."""
    restart = ledger.restart if ledger is not None else None
    return _run_facet_class()(region=region, attempt=attempt, restartReason=restart.reason if restart else "",
                              decision=restart.decision if restart else None,
                              kept=ledger is not None and ledger.kept)


def _output(layout: Layout, dag_id: str, run_id: str, partition: str, entry: OutputEntry) -> Any:
    from openlineage.client.event_v2 import OutputDataset
    from openlineage.client.facet_v2 import dataset_version_dataset, output_statistics_output_dataset

    version = f"a{entry.attempt}" + (f"-{entry.checksum}" if entry.checksum else "")
    stats = output_statistics_output_dataset.OutputStatisticsOutputDatasetFacet(
        rowCount=entry.rows, size=entry.bytes, fileCount=entry.objects)
    return OutputDataset(namespace(layout), dataset_name(layout, dag_id, run_id, PartitionId.parse(partition)),
                         facets={"version": dataset_version_dataset.DatasetVersionDatasetFacet(version)},
                         outputFacets={"outputStatistics": stats})


def _input(layout: Layout, dag_id: str, run_id: str, partition: str, entry: InputEntry) -> Any:
    from openlineage.client.event_v2 import InputDataset
    from openlineage.client.facet_v2 import dataset_version_dataset, input_statistics_input_dataset

    stats = input_statistics_input_dataset.InputStatisticsInputDatasetFacet(size=entry.bytes, fileCount=entry.objects)
    return InputDataset(namespace(layout), dataset_name(layout, dag_id, run_id, PartitionId.parse(partition)),
                        facets={"version": dataset_version_dataset.DatasetVersionDatasetFacet(f"a{entry.attempt}")},
                        inputFacets={"inputStatistics": stats})


def task_lineage(layout: Layout, dag_id: str, run_id: str, region: str, attempt: int,
                 ledger: TaskLedger | None) -> Any:
    """The ``OperatorLineage`` of one step task (module rule); ``ledger``: the ledger of its summary (``None``:
    not yet run, or failed — then only the run facet)."""
    from airflow.providers.openlineage.extractors import OperatorLineage

    found = ledger if ledger is not None else TaskLedger()
    inputs = [_input(layout, dag_id, run_id, p, e) for p, e in sorted(found.inputs.items())]
    outputs = [_output(layout, dag_id, run_id, p, e) for p, e in sorted(found.outputs.items())]
    return OperatorLineage(inputs=inputs, outputs=outputs, run_facets={RUN_FACET: run_facet(region, attempt, ledger)})


def dropped_lineage(layout: Layout, names: Iterable[str]) -> list[Any]:
    """Every dataset in ``names`` (partition key prefixes, :func:`dataset_name`) as an output marked ``DROP``."""
    from openlineage.client.event_v2 import OutputDataset
    from openlineage.client.facet_v2 import lifecycle_state_change_dataset as lifecycle

    drop = lifecycle.LifecycleStateChangeDatasetFacet(lifecycle.LifecycleStateChange.DROP)
    return [OutputDataset(namespace(layout), name, facets={"lifecycleStateChange": drop}) for name in sorted(names)]


def emit_dropped(layout: Layout, names: Iterable[str], job: str = "region_failover.gc") -> bool:
    """Send one COMPLETE run event of ``job`` whose outputs are ``names`` dropped, through the openlineage
    provider's configured transport; ``False`` when OpenLineage is not installed or disabled, nothing to report,
    or sending failed (best effort, logged: gc never fails for its lineage)."""
    names = sorted(names)
    if not names or not available():
        return False
    try:
        from datetime import datetime, timezone

        from airflow.providers.openlineage import conf
        from airflow.providers.openlineage.plugins.adapter import OpenLineageAdapter
        from openlineage.client.event_v2 import Job, Run, RunEvent, RunState
        from openlineage.client.uuid import generate_new_uuid

        if conf.is_disabled():
            return False
        event = RunEvent(eventType=RunState.COMPLETE, eventTime=datetime.now(timezone.utc).isoformat(),
                         run=Run(runId=str(generate_new_uuid())), job=Job(namespace=conf.namespace(), name=job),
                         producer=PRODUCER, outputs=dropped_lineage(layout, names))
        OpenLineageAdapter().emit(event)
        return True
    except Exception:
        log.warning("region failover: could not report %d dropped partitions to OpenLineage", len(names),
                    exc_info=True)
        return False

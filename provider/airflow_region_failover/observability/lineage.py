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
* its run facet ``regionFailover_task`` (the spec's ``{prefix}_{name}`` key of a custom facet; class
  ``RegionFailoverTaskRunFacet``) carries the task's failover ``region``, ``attempt`` (Airflow's try number), the
  ``restartReason`` of its region when one of our clears started the try (else empty), the ``decision`` id (else
  ``null``), and ``kept`` (its results were kept, not recomputed; known at COMPLETE, ``false`` before). START,
  COMPLETE and FAIL of one try carry the same region, attempt, reason and decision (:func:`try_facts`). Its
  ``_schemaURL`` is :data:`SCHEMA_URL`, the JSON Schema shipped in the package
  (``observability/schemas/RegionFailoverTaskRunFacet.json``, documented in docs/operator/observability.md);
* every facet we build says :data:`PRODUCER` (this provider, versioned) as its ``_producer``;
* a publishing task reports its Delta table as its output and the sink partitions it publishes (named as here)
  as its inputs, on every try (:meth:`~..publication.operator.RegionPublishOperator.get_openlineage_facets_on_start`);
* partitions removed by retention (``region-failover gc``) are reported as outputs with the
  ``lifecycleStateChange`` facet ``DROP`` of one run of job ``region_failover.gc``: a START, then a COMPLETE
  with the same run id (:func:`emit_dropped`).

The ``openlineage`` provider and client are imported only here, only when called: without them the step operator
runs as before (its lineage methods answer ``None``).
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Iterable
from dataclasses import dataclass
from importlib.metadata import PackageNotFoundError, version
from typing import Any

from airflow_region_failover import conf
from airflow_region_failover.graph.ids import PartitionId
from airflow_region_failover.spark.ledger import InputEntry, OutputEntry, RestartEntry, TaskLedger
from airflow_region_failover.store.keys import Layout

log = logging.getLogger(__name__)
RUN_FACET = "regionFailover_task"
PROJECT = "https://github.com/airflow-provider-region-failover"
try:
    VERSION = version("airflow-provider-region-failover")  # the distribution's, as `pip show` says
except PackageNotFoundError:  # run from a source tree that was never installed
    VERSION = "0+unknown"
PRODUCER = f"{PROJECT}/tree/{VERSION}"
SCHEMA_FILE = "provider/airflow_region_failover/observability/schemas/RegionFailoverTaskRunFacet.json"
SCHEMA_URL = f"{PROJECT}/blob/{VERSION}/{SCHEMA_FILE}#/$defs/RegionFailoverTaskRunFacet"


@dataclass(frozen=True)
class TryFacts:
    """What one try of a task is, the same in its START, COMPLETE and FAIL events: its failover region, its try
    number and the decision (with its region's reason) whose clear started it, if one did."""

    region: str
    attempt: int
    restart: RestartEntry | None = None


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
    class RegionFailoverTaskRunFacet(RunFacet):
        """How region failover ran this try: its region, try, restart reason, decision and whether it kept."""

        region: str
        attempt: int
        restartReason: str = ""  # OpenLineage facets are camelCase
        decision: int | None = None
        kept: bool = False

        @staticmethod
        def _get_schema() -> str:
            return SCHEMA_URL

    return RegionFailoverTaskRunFacet


def run_facet(facts: TryFacts, ledger: TaskLedger | None = None) -> Any:
    """The ``regionFailover_task`` run facet of the try ``facts`` describes (module rule); ``ledger``: what it
    did, once it completed (whether it kept its results)."""
    restart = facts.restart
    return _run_facet_class()(region=facts.region, attempt=facts.attempt,
                              restartReason=restart.reason if restart else "",
                              decision=restart.decision if restart else None,
                              kept=ledger is not None and ledger.kept, producer=PRODUCER)


def _output(layout: Layout, dag_id: str, run_id: str, partition: str, entry: OutputEntry) -> Any:
    from openlineage.client.event_v2 import OutputDataset
    from openlineage.client.facet_v2 import dataset_version_dataset, output_statistics_output_dataset

    version = f"a{entry.attempt}" + (f"-{entry.checksum}" if entry.checksum else "")
    stats = output_statistics_output_dataset.OutputStatisticsOutputDatasetFacet(
        rowCount=entry.rows, size=entry.bytes, fileCount=entry.objects, producer=PRODUCER)
    facet = dataset_version_dataset.DatasetVersionDatasetFacet(version, producer=PRODUCER)
    return OutputDataset(namespace(layout), dataset_name(layout, dag_id, run_id, PartitionId.parse(partition)),
                         facets={"version": facet}, outputFacets={"outputStatistics": stats})


def _input(layout: Layout, dag_id: str, run_id: str, partition: str, entry: InputEntry) -> Any:
    from openlineage.client.event_v2 import InputDataset
    from openlineage.client.facet_v2 import dataset_version_dataset, input_statistics_input_dataset

    stats = input_statistics_input_dataset.InputStatisticsInputDatasetFacet(size=entry.bytes, fileCount=entry.objects,
                                                                            producer=PRODUCER)
    facet = dataset_version_dataset.DatasetVersionDatasetFacet(f"a{entry.attempt}", producer=PRODUCER)
    return InputDataset(namespace(layout), dataset_name(layout, dag_id, run_id, PartitionId.parse(partition)),
                        facets={"version": facet}, inputFacets={"inputStatistics": stats})


def task_lineage(layout: Layout, dag_id: str, run_id: str, region: str | TryFacts, attempt: int = 0,
                 ledger: TaskLedger | None = None) -> Any:
    """The ``OperatorLineage`` of one step task's try (module rule): ``region`` its :class:`TryFacts` (or its
    region, with ``attempt`` and the restart from ``ledger``); ``ledger``: the ledger of its summary (``None``:
    not yet run, or failed — then only the run facet)."""
    from airflow.providers.openlineage.extractors import OperatorLineage

    facts = region if isinstance(region, TryFacts) else TryFacts(region, attempt, ledger.restart if ledger else None)
    found = ledger if ledger is not None else TaskLedger()
    inputs = [_input(layout, dag_id, run_id, p, e) for p, e in sorted(found.inputs.items())]
    outputs = [_output(layout, dag_id, run_id, p, e) for p, e in sorted(found.outputs.items())]
    return OperatorLineage(inputs=inputs, outputs=outputs, run_facets={RUN_FACET: run_facet(facts, ledger)})


def dropped_lineage(layout: Layout, names: Iterable[str]) -> list[Any]:
    """Every dataset in ``names`` (partition key prefixes, :func:`dataset_name`) as an output marked ``DROP``."""
    from openlineage.client.event_v2 import OutputDataset
    from openlineage.client.facet_v2 import lifecycle_state_change_dataset as lifecycle

    drop = lifecycle.LifecycleStateChangeDatasetFacet(lifecycle.LifecycleStateChange.DROP, producer=PRODUCER)
    return [OutputDataset(namespace(layout), name, facets={"lifecycleStateChange": drop}) for name in sorted(names)]


def emit_dropped(layout: Layout, names: Iterable[str], job: str = "region_failover.gc") -> bool:
    """Send one run of ``job`` — START, then COMPLETE whose outputs are ``names`` dropped — through the
    openlineage provider's configured transport; ``False`` when OpenLineage is not installed or disabled,
    nothing to report, or sending failed (best effort, logged: gc never fails for its lineage)."""
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
        run, ol_job, adapter = Run(runId=str(generate_new_uuid())), Job(namespace=conf.namespace(), name=job), \
            OpenLineageAdapter()
        for state, outputs in ((RunState.START, []), (RunState.COMPLETE, dropped_lineage(layout, names))):
            adapter.emit(RunEvent(eventType=state, eventTime=datetime.now(timezone.utc).isoformat(), run=run,
                                  job=ol_job, producer=PRODUCER, outputs=outputs))
        return True
    except Exception:
        log.warning("region failover: could not report %d dropped partitions to OpenLineage", len(names),
                    exc_info=True)
        return False

"""The publishing operator: after every subtask of a sink step succeeded, one Airflow task commits the sink
result to its Delta table, exactly once per run (:mod:`.declaration` says which table, mode and application
transaction; :mod:`.delta` how it is staged and committed).

Rules: the task reads the *current committed* version of every partition of the sink result from the result
store; its identity comes from the DAG run (logical date, data interval end, ``run_after``, run id), never from
the try, so an Airflow retry, a clear of the task, of the sink step or of the whole run publishes nothing twice.
It lies outside the region groups and restarts with its sink's subtasks when region failover restarts them
(:meth:`~airflow_region_failover.job.JobSpec.followers`). A partition of the sink result it cannot read (never
committed, an object missing or corrupt) fails it at once, naming the partition (:class:`SinkUnavailable`): it is
a consumer of that partition, and region failover restarts the partition's producer and this task with it —
backtracking, as for a step task. Its other failures (S3 away, schema refused) are retried by Airflow
(``retries``, default 2), not by region failover. The table root is ``[region_failover] publish_root``, which may
not lie inside the result store's own trees (:func:`check_publish_root`).

**Assets** (Airflow's data-aware scheduling): a published table is the Airflow Asset whose URI is its location
(``s3://bucket/prefix/tables/T``, as the amazon provider names S3 assets; ``file:///dir/T`` for a local root),
normalised as Airflow normalises Asset URIs (:func:`~.declaration.normalised_uri`) — :func:`published_table` builds
it for a consumer DAG's ``schedule``. Which Asset gets the event (:meth:`RegionPublishOperator._announce`): the
*active* Asset with that URI, whatever name its consumers gave it (``Asset(uri)``, ``Asset(name=..., uri=...)``,
``S3://``, a trailing ``/`` or a ``#fragment`` are all that URI; Airflow keeps one active Asset per URI), looked up
through the task's execution API; when none is active (no consumer parsed yet), ``Asset(name=<publish_asset_name,
else the URI>, uri=<URI>)``, which Airflow then creates and keeps active — a consumer parsed later must use that
name, or it stays inactive with Airflow's DAG warning ``Cannot activate asset ...; uri is already associated``.
The publishing task declares the outlet
``AssetAlias("region-failover-table:T")`` (:func:`table_alias`) and adds one event for the table's Asset through it
only when its commit made a new table version, with ``extra`` naming the version
(``{"table", "version", "mode", "run_key", "rows"}``): exactly one asset event per published version. A retry, a
restart, a clear of the whole run or a re-run that finds the run already published succeeds without one —
unless the version this run committed has no event yet (the try that committed it ended before Airflow recorded
its success, e.g. its worker was killed): the alias is also the task's inlet, and the events it carries say which
versions were announced, so such a version is announced once, by the next try.

Why an alias: a plain ``Asset`` outlet would not do, since Airflow emits an event for it whenever the task
*succeeds*, so every no-op re-run would trigger the consumers again; an alias emits only what the task adds, and
the task stays a success. Raising a skip instead would mark a task that did its job ``skipped`` and skip whatever
follows it.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from airflow.sdk import Asset, AssetAlias, BaseOperator
from airflow.sdk.exceptions import AirflowFailException, AirflowRuntimeError, ErrorType

from airflow_region_failover import conf
from airflow_region_failover.current_task import current_ti
from airflow_region_failover.exceptions import InputUnavailable, OptionError
from airflow_region_failover.graph.ids import PartitionId
from airflow_region_failover.publication import delta as tables
from airflow_region_failover.publication.declaration import (
    Publication,
    RunTimes,
    check_table,
    default_root,
    normalised_uri,
    table_uri,
    transaction_of,
)
from airflow_region_failover.publication.staging import TableTarget
from airflow_region_failover.store.config import StoreConfig, config_from_airflow
from airflow_region_failover.store.keys import Layout
from airflow_region_failover.store.result_store import default_store
from airflow_region_failover.store.s3.clients import S3Access

if TYPE_CHECKING:
    from airflow.sdk import Context

DEFAULT_RETRIES = 2
ALIAS_PREFIX = "region-failover-table"


def publish_root(config: StoreConfig | None = None) -> str:
    """``[region_failover] publish_root``, or ``s3://<store bucket>/<store prefix>/tables`` when unset; ``config``
    defaults to the deployment's bucket and prefix, read from ``[region_failover]`` without its connection (so a
    DAG file may ask at parse time). A root inside the store's own trees is refused (:func:`check_publish_root`)."""
    root = conf.publish_root()
    if root and not root.startswith("s3://"):
        return root
    config = config or config_from_airflow(access=S3Access())
    return check_publish_root(root, config) if root else default_root(config.bucket, config.prefix)


def check_publish_root(root: str, config: StoreConfig) -> str:
    """``root``, unless it is the store's prefix itself or lies inside one of the trees ``region-failover gc``
    sweeps or the failover loop keeps (``<prefix>/v1``, ``<prefix>/cas``, ``<prefix>/failover``: gc would take a
    table's files and log for garbage); then :class:`OptionError` naming the option and the fix. An ``s3://`` root
    with a ``.``, ``..`` or empty path segment is refused too, whatever its bucket: delta-rs resolves them
    (``<prefix>/tables/../v1`` is ``<prefix>/v1``), so they would slip past this check (a trailing ``/`` is
    allowed)."""
    bucket, _, path = root.removeprefix("s3://").partition("/")
    if not root.startswith("s3://"):
        return root
    if any(segment in ("", ".", "..") for segment in path.rstrip("/").split("/")) and path.rstrip("/"):
        raise OptionError(f"[region_failover] publish_root {root!r} has a '.', '..' or empty path segment, which "
                          "Delta resolves to another place than the one checked; spell the path out without them, "
                          f"e.g. {default_root(config.bucket, config.prefix)}")
    if bucket != config.bucket:
        return root
    layout, path = Layout(config.bucket, config.prefix), path.strip("/")
    trees = (layout.root, layout.cas_root.rsplit("/", 1)[0], layout.failover_root.rsplit("/", 1)[0])
    if path == layout.prefix or any(path == tree or path.startswith(tree + "/") for tree in trees):
        raise OptionError(f"[region_failover] publish_root {root!r} lies inside the result store's own trees under "
                          f"s3://{config.bucket}/{layout.prefix}, whose gc would delete the tables' files and logs; "
                          f"set it beside them, e.g. {default_root(config.bucket, config.prefix)} (the default)")
    return root


def table_location(table: str, config: StoreConfig | None = None) -> str:
    """Where table ``table`` lives: ``<publish root>/<table>``."""
    return table_uri(publish_root(config), check_table(f"published_table({table!r})", table))


def asset_uri(location: str) -> str:
    """The Asset URI of a table location: an ``s3://`` location, or a local directory as a ``file://`` URI,
    normalised as Airflow normalises Asset URIs."""
    return normalised_uri(location if location.startswith("s3://") else Path(location).as_uri())


def published_table(table: str, name: str | None = None) -> Asset:
    """The Airflow Asset of published table ``table`` in this deployment: ``schedule=[published_table("t")]`` runs
    a DAG once per new table version (module rule); ``name`` is the Asset's name (default: its URI) — the
    publishing step's ``publish_asset_name``, if it declares one."""
    uri = asset_uri(table_location(table))
    return Asset(name=name or uri, uri=uri)


def table_alias(table: str) -> AssetAlias:
    """The outlet alias through which the publishing task of ``table`` emits that table's asset events."""
    return AssetAlias(name=f"{ALIAS_PREFIX}:{table}")


def table_dataset(location: str) -> tuple[str, str]:
    """OpenLineage's ``(namespace, name)`` of the Delta table at ``location``: ``s3://<bucket>`` and its key, or
    ``file`` and its absolute path."""
    if location.startswith("s3://"):
        bucket, _, key = location.removeprefix("s3://").partition("/")
        return f"s3://{bucket}", key.strip("/")
    return "file", location.removeprefix("file://")


def table_lineage(dag_id: str, run_id: str, result: str, partitions: int, location: str) -> Any:
    """The ``OperatorLineage`` of a publishing task's try: in, the sink result's ``partitions`` partitions of run
    ``run_id`` (named as :func:`~..observability.lineage.dataset_name` names them: the key prefix of every attempt
    of the partition's manifest); out, the Delta table at ``location``. ``ImportError`` without OpenLineage."""
    from airflow.providers.openlineage.extractors import OperatorLineage
    from openlineage.client.event_v2 import InputDataset, OutputDataset

    layout = Layout(conf.store_bucket(), conf.store_prefix())
    keys = layout.run(dag_id, run_id)
    inputs = [InputDataset(f"s3://{layout.bucket}", keys.manifest(PartitionId(result, i), 1).rsplit("/", 1)[0])
              for i in range(partitions)]
    return OperatorLineage(inputs=inputs, outputs=[OutputDataset(*table_dataset(location))])


def run_times(context: Context) -> RunTimes:
    """What identifies the task's DAG run for publishing (its ids and dates)."""
    run = context["dag_run"]
    return RunTimes(run.dag_id, run.run_id, getattr(run, "logical_date", None),
                    getattr(run, "data_interval_end", None), getattr(run, "run_after", None))


class SinkUnavailable(InputUnavailable, AirflowFailException):  # type: ignore[misc]
    """A partition of the sink result cannot be read: the publishing task fails without Airflow's retries (they
    would read the same partition again) and names it (``partition``), so region failover restarts its producer
    and this task with it (:func:`~airflow_region_failover.plugins.clearing.failed_subtask`)."""

    def __init__(self, partition: PartitionId, why: str) -> None:
        InputUnavailable.__init__(self, partition, why.removeprefix(f"input partition {partition} is unavailable: "))


class RegionPublishOperator(BaseOperator):  # type: ignore[misc]
    """Publish step ``publication.step``'s sink result (``partitions`` partitions) to ``publication.table``."""

    ui_color = "#9fc5e8"
    ui_fgcolor = "#000000"

    def __init__(self, *, publication: Publication, partitions: int, **kwargs: Any) -> None:
        dag = kwargs.get("dag")
        default_args = getattr(dag, "default_args", None) or {}
        kwargs.setdefault("retries", default_args.get("retries", DEFAULT_RETRIES))
        kwargs["outlets"] = [*(kwargs.get("outlets") or []), table_alias(publication.table)]
        kwargs["inlets"] = [*(kwargs.get("inlets") or []), table_alias(publication.table)]  # what was announced
        super().__init__(**kwargs)
        self.publication = publication
        self.partitions = partitions
        self.doc_md = (f"Publishes the sink result of step `{publication.step}` ({partitions} partitions) to Delta "
                       f"table `{publication.table}` ({publication.mode.value}), once per run.")

    def execute(self, context: Context) -> dict[str, Any]:
        """Publish (or find it published); returns what was done (Airflow stores it as the return value)."""
        run = run_times(context)
        txn = transaction_of(self.publication, run)
        store = default_store()
        uri = table_location(self.publication.table, store.config)
        target = tables.target_for(uri, store.config.access)
        try:
            outcome = tables.publish(store, run.dag_id, run.run_id, self.publication.step, self.partitions, target,
                                     txn, {"region_failover.step": self.publication.step})
        except InputUnavailable as exc:
            raise SinkUnavailable(exc.partition, str(exc)) from exc
        if outcome.committed:
            self._announce(context, uri, outcome.version, outcome.rows, txn.run_key)
            self.log.info("published %d rows (%d files, %d bytes) of %s to %s as table version %s (%s, txn %s=%d)",
                          outcome.rows, outcome.files, outcome.bytes, self.publication.step, uri, outcome.version,
                          self.publication.mode.value, txn.app_id, txn.version)
        else:
            self.log.info("not published again to %s (table version %s): %s", uri, outcome.version, outcome.reason)
            self._announce_missed(context, target, run, uri, txn.run_key)
        return {"table": uri, "committed": outcome.committed, "version": outcome.version, "rows": outcome.rows,
                "run_key": txn.run_key}

    # -- OpenLineage (the openlineage provider calls these when it is installed; see observability/lineage.py) ------
    def get_openlineage_facets_on_start(self) -> Any:
        """The Delta table out, the sink partitions it publishes in (for the running task instance)."""
        return self._lineage(current_ti())

    def get_openlineage_facets_on_complete(self, task_instance: Any) -> Any:
        """The same datasets as at START, whether this try committed or found the run published."""
        return self._lineage(task_instance)

    def get_openlineage_facets_on_failure(self, task_instance: Any) -> Any:
        """The same datasets as at START: the try that failed was to publish them."""
        return self._lineage(task_instance)

    def _lineage(self, ti: Any) -> Any:
        """The try's ``OperatorLineage`` (:func:`table_lineage`), or ``None`` when OpenLineage is not installed
        or the lineage cannot be built (never raises into the task)."""
        try:
            return table_lineage(getattr(ti, "dag_id", None) or self.dag_id, getattr(ti, "run_id", ""),
                                 self.publication.step, self.partitions, table_location(self.publication.table))
        except ImportError:
            return None
        except Exception:
            self.log.warning("region failover: no OpenLineage facets for %s", self.task_id, exc_info=True)
            return None

    def _announce_missed(self, context: Context, target: TableTarget, run: RunTimes, uri: str,
                         run_key: str) -> None:
        """Announce the version this run committed in an earlier try if no event names it yet (module rule)."""
        commit = tables.run_commit(target, run.dag_id, run.run_id)
        if commit is None:
            return
        table, version = self.publication.table, int(commit["version"])
        alias = table_alias(table)
        if any((event.extra or {}).get("table") == table and (event.extra or {}).get("version") == version
               for event in context["inlet_events"][alias]):
            return
        self.log.warning("table version %d of %s was committed by this run in a try that ended before Airflow "
                         "recorded it: announcing it now", version, uri)
        self._announce(context, uri, version, int(commit.get(tables.ROWS_KEY, 0)), run_key)

    def _announce(self, context: Context, uri: str, version: int | None, rows: int, run_key: str) -> None:
        """One asset event for the table's new ``version``, through the task's alias (module rule)."""
        table, asset = self.publication.table, asset_uri(uri)
        extra = {"table": table, "version": version, "mode": self.publication.mode.value, "run_key": run_key,
                 "rows": rows}
        events = context["outlet_events"][table_alias(table)]
        try:
            events.add(Asset.ref(uri=asset), extra=extra)  # the active Asset of this URI, whatever its name
        except AirflowRuntimeError as exc:
            if exc.error.error is not ErrorType.ASSET_NOT_FOUND:
                raise
            events.add(Asset(name=self.publication.asset_name or asset, uri=asset), extra=extra)

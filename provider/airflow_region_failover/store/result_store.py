"""ResultStore: the store's front door for BLOCKING results — write and commit, check, read, release and sweep.

A write is of one :class:`~.keys.AttemptId` (the DAG run, the partition, the producer's attempt) and returns the
manifest it committed with what it uploaded vs found already stored; a read is of a committed version (its
manifest); everything else takes the DAG run (``dag_id``, ``run_id``) and validated ids. The key layout is
:mod:`.keys`'s docstring, the commit / supersede protocol :mod:`.commit`'s. The deployment's store
(:func:`default_store`) is built once per process and checked before first use (:meth:`ResultStore.start_up`):
the server must honour conditional writes and the prefix must not lie inside another deployment's
(:mod:`.deployment`). Spark executors get the store's access with credentials frozen at the moment of each read
or write (:func:`.s3.clients.portable`); the process itself signs with credentials that refresh
(:mod:`.s3.clients`).
"""

from __future__ import annotations

import logging
import secrets
from collections.abc import Callable, Iterable, Sequence
from typing import TYPE_CHECKING, Any

from airflow_region_failover.exceptions import AlreadyCommitted, IncompleteCommit, NotAvailable, Superseded
from airflow_region_failover.graph.ids import PartitionId
from airflow_region_failover.process_cache import per_process
from airflow_region_failover.store import commit as protocol
from airflow_region_failover.store.availability import Mode, Probe, Read, StoreAvailabilityChecker
from airflow_region_failover.store.config import Retention, StoreConfig, config_from_airflow
from airflow_region_failover.store.content import Tally
from airflow_region_failover.store.dataplane import clustered, local_write, parquet, reading, s3a
from airflow_region_failover.store.dataplane.clustered import Clustering
from airflow_region_failover.store.dataplane.types import Cut, Target, Written
from airflow_region_failover.store.deployment import checked, mark_deployment, probe_conditional_writes
from airflow_region_failover.store.gc import lifecycle
from airflow_region_failover.store.key_checks import check_index, check_partition
from airflow_region_failover.store.keys import AttemptId, RunKeys
from airflow_region_failover.store.manifest import InputVersion, Manifest, ObjectEntry, Retirement, partitioning
from airflow_region_failover.store.s3.clients import S3Access, S3Credentials, client_for
from airflow_region_failover.store.s3.first_contact import set_up_errors
from airflow_region_failover.store.s3.objects import Objects
from airflow_region_failover.timeline import add_work, phase

if TYPE_CHECKING:
    import pyarrow as pa
    from pyspark.sql import DataFrame, SparkSession

log = logging.getLogger(__name__)


class ResultStore:
    """Write, commit, check and read result partitions in one bucket/prefix; apply retention and sweep."""

    def __init__(self, config: StoreConfig, *, client: Any = None) -> None:
        self.config = config
        self.layout = config.layout
        self.objects = Objects(client if client is not None else client_for(config.access), self.layout)

    @classmethod
    def from_airflow(cls, **overrides: Any) -> ResultStore:
        """Configured from ``[region_failover]`` and the ``aws`` connection it names (see :mod:`.config`)."""
        return cls(config_from_airflow(**overrides))

    @classmethod
    def from_endpoint(cls, endpoint_url: str, access_key: str, secret_key: str, bucket: str, *,
                      prefix: str = "region-failover", region: str = "us-east-1", **tuning: Any) -> ResultStore:
        """Plain boto3 path (tests, CLI, demo): explicit endpoint and credentials."""
        access_fields = {k: tuning.pop(k) for k in ("max_attempts", "connect_timeout", "read_timeout")
                         if k in tuning}
        access = S3Access(endpoint_url, region, S3Credentials(access_key, secret_key), **access_fields)
        return cls(StoreConfig(bucket=bucket, prefix=prefix, access=access, **tuning))

    @property
    def endpoint(self) -> str:
        """The S3 endpoint as error messages name it."""
        return self.config.access.endpoint_url or f"AWS S3 ({self.config.access.region})"

    def start_up(self) -> ResultStore:
        """Check the deployment before first use and return ``self``: the server must honour conditional writes
        (:class:`ConditionalWritesUnsupported` otherwise) and the prefix must not lie inside another deployment's
        (:class:`NestedDeployment`); then the prefix is marked as this deployment's. Once per deployment: a
        process whose deployment's marker records the checks starts with that one GET (:mod:`.deployment`)."""
        with set_up_errors(self.config.access, self.endpoint):  # no credentials, no answer: one line (s3.first_contact)
            if checked(self.objects):
                return self
            probe_conditional_writes(self.objects, self.endpoint)
            mark_deployment(self.objects, self.endpoint)
        return self

    def run_keys(self, dag_id: str, run_id: str) -> RunKeys:
        """The validated keys of one DAG run."""
        return self.layout.run(dag_id, run_id)

    # -- writing -----------------------------------------------------------------------------------------------
    def write(self, df: DataFrame, attempt: AttemptId, inputs: tuple[InputVersion, ...] = (), code: str = "",
              cut: Cut | None = None, clustering: Clustering | None = None,
              confirm: Sequence[reading.JvmRead] = ()) -> tuple[Manifest, Tally]:
        """Persist ``df`` as ``attempt``'s partition and commit it (begin -> write -> commit); returns the manifest
        and what it uploaded vs found already stored. ``inputs`` (the BLOCKING input versions the producer read) and
        ``code`` (the fingerprint of the code that computed it) are recorded in the manifest; ``cut``: write it as
        the subpartitions of a keyed exchange; ``clustering``: write it sorted in content-defined chunk files
        (:mod:`.dataplane.clustered`).

        Raises :class:`Superseded` (a newer attempt owns the partition), :class:`AlreadyCommitted` (another
        writer of this attempt won) or :class:`IncompleteCommit` (an object it wrote is not there); in each case
        the standing commit is kept (objects this writer uploaded are left to the sweeper). ``confirm``: reads of
        ``df``'s inputs given to Spark's own reader, confirmed unchanged after the write job and before the commit
        (:func:`.dataplane.reading.confirm_unchanged`; :class:`NotAvailable` naming the partition, nothing committed).
        """
        target = self._begin(attempt)
        driver = self.config.spark_io == "driver"
        if clustering is not None:
            chunked = clustered.write_with_driver if driver else clustered.write_with_executors
            return self._finish(target, lambda: chunked(df, target, cut, clustering), df.schema.json(), inputs,
                                code, cut, confirm)
        writer = self._writer(df)
        return self._finish(target, lambda: writer(df, target, cut), df.schema.json(), inputs, code, cut, confirm)

    def write_arrow(self, table: pa.Table, attempt: AttemptId, spark_schema: str = "") -> tuple[Manifest, Tally]:
        """Persist an Arrow table (no Spark) and commit it, returning what :meth:`write` returns; ``spark_schema``
        defaults to one derived from Arrow."""
        target = self._begin(attempt)
        schema = spark_schema or _spark_schema_of(table)
        return self._finish(target, lambda: parquet.write_arrow(table, target), schema)

    def begin_attempt(self, attempt: AttemptId) -> tuple[Retirement, ...]:
        """Fence all attempts below ``attempt`` (the supersede step; :meth:`write` does it too): the current version
        becomes unavailable until ``attempt`` commits; returns the markers written for committed attempts."""
        keys = self.run_keys(attempt.dag_id, attempt.run_id)
        check_index(attempt.attempt, what=f"attempt of {attempt.partition}", minimum=1)
        return protocol.begin_attempt(self.objects, keys, check_partition(attempt.partition), attempt.attempt)

    def _begin(self, attempt: AttemptId) -> Target:
        self._fence(attempt)
        return self.target(attempt)

    def _fence(self, attempt: AttemptId) -> None:
        with phase("begin"):
            retired = self.begin_attempt(attempt)
            lifecycle.record_run(self.objects, self.run_keys(attempt.dag_id, attempt.run_id))
        if retired:
            log.info("%s of %s/%s: attempt %d superseded attempts %s", attempt.partition, attempt.dag_id,
                     attempt.run_id, attempt.attempt, [r.attempt for r in retired])

    def target(self, attempt: AttemptId, writer: str | None = None) -> Target:
        """Where a writer (``writer``, default a new random token) of ``attempt`` puts its objects; nothing is
        fenced or committed (a checkpointed step writes each epoch's objects through one, :meth:`write_objects`,
        and commits them all at the end, :meth:`commit_written`)."""
        keys = self.run_keys(attempt.dag_id, attempt.run_id)
        return Target(self.config.access, self.layout, keys, check_partition(attempt.partition), attempt.attempt,
                      writer or secrets.token_hex(8), self.config.part_size, self.config.upload_threads,
                      self.config.max_object_bytes)

    def write_objects(self, df: DataFrame, target: Target, cut: Cut | None = None) -> Written:
        """Store ``df`` as content-addressed objects through ``target`` (cut into subpartitions by ``cut``) without
        committing anything: the objects are announced by the writer until a manifest lists them."""
        return self._writer(df)(df, target, cut)

    def _writer(self, df: DataFrame) -> Callable[[DataFrame, Target, Cut | None], Written]:
        """How ``df`` is written: the driver's path (``spark_io = driver``), Spark's own Parquet writer to the
        driver's disk where the session's JVM writes there (:func:`.dataplane.local_write.jvm_writer`, asked once per
        session), else every Spark task encodes and uploads its partition (``mapInArrow``)."""
        if self.config.spark_io == "driver":
            return parquet.write_with_driver
        if local_write.jvm_writer(df.sparkSession, s3a.Mode(self.config.jvm_io)):
            return local_write.write_local
        return parquet.write_with_executors

    def commit_written(self, target: Target, written: Written, schema: str,
                       inputs: tuple[InputVersion, ...] = (), code: str = "",
                       cut: Cut | None = None) -> tuple[Manifest, Tally]:
        """Commit objects already stored (``written``, e.g. every epoch's of a checkpointed step) as
        ``target``'s partition and attempt: the supersede step, then the commit of :meth:`write`."""
        self._fence(AttemptId(target.keys.dag_id, target.keys.run_id, target.partition, target.attempt))
        return self._finish(target, lambda: written, schema, inputs, code, cut)

    def _finish(self, target: Target, write: Callable[[], Written], schema: str,
                inputs: tuple[InputVersion, ...] = (), code: str = "", cut: Cut | None = None,
                confirm: Sequence[reading.JvmRead] = ()) -> tuple[Manifest, Tally]:
        alive = target.keys.heartbeat(target.partition, target.attempt, target.writer)
        try:
            with lifecycle.Heartbeat(self.objects, alive, self.config.min_grace_seconds):
                with phase("job"):
                    written = write()
                add_work(written.work)
                if confirm:
                    with phase("confirm"):
                        reading.confirm_unchanged(self.objects, confirm)
                keyed = None if cut is None else partitioning(cut.partition_by, cut.max_parallelism, cut.ranges,
                                                              written.objects, written.subpartition_rows)
                with phase("commit"):
                    manifest = protocol.commit(self.objects, target.keys, Manifest(
                        target.keys.dag_id, target.keys.run_id, target.partition, target.attempt, target.writer,
                        schema, written.rows, written.objects, protocol.now_iso(), inputs=inputs, code=code,
                        partitioning=keyed), self.config.min_grace_seconds)
        except (AlreadyCommitted, Superseded, IncompleteCommit, NotAvailable):  # not committed (a retried PUT is)
            self._discard(target)
            raise
        with phase("discard"):
            self._discard(target)  # only its announcements are there: the manifest holds the references now
        log.info("committed %s of %s/%s attempt %d: %d rows, %d objects, %d bytes; %s", target.partition,
                 target.keys.dag_id, target.keys.run_id, target.attempt, manifest.row_count,
                 len(manifest.objects), manifest.total_bytes, written.tally.describe())
        return manifest, written.tally

    def _discard(self, target: Target) -> None:
        """Delete this writer's run-scoped keys: its announcements (:meth:`.keys.RunKeys.announcement`) and its
        heartbeat (:meth:`.keys.RunKeys.heartbeat`, no longer renewed); shared
        objects may be another writer's too, the sweeper judges them by the manifests."""
        prefix = target.keys.attempt_data(target.partition, target.attempt, target.writer)
        try:
            self.objects.delete([item.key for item in self.objects.listing(prefix)])
        except Exception:  # best effort: the sweeper removes what is left
            log.warning("could not discard %s; the sweeper will", prefix)

    # -- reading -----------------------------------------------------------------------------------------------
    def manifest(self, dag_id: str, run_id: str, partition: PartitionId) -> Manifest:
        """The current committed manifest; :class:`NotAvailable` naming the partition and why."""
        return protocol.current_manifest(self.objects, self.run_keys(dag_id, run_id), check_partition(partition))

    def read(self, spark: SparkSession, dag_id: str, run_id: str, partition: PartitionId) -> DataFrame:
        """The current committed version as a DataFrame (pinned to that manifest's objects)."""
        return self.read_version(spark, self.manifest(dag_id, run_id, partition))

    def read_version(self, spark: SparkSession, manifest: Manifest,
                     objects: tuple[ObjectEntry, ...] | None = None,
                     checked: list[reading.JvmRead] | None = None) -> DataFrame:
        """The committed version ``manifest`` (as returned by :meth:`manifest`) as a DataFrame; ``objects``: only
        these of its objects (a subpartition selection, :meth:`Manifest.select`); ``checked`` collects the reads
        given to Spark's own reader (confirm them with ``write(..., confirm=...)``)."""
        return reading.read_dataframe(spark, self._source(manifest), manifest, self.config.verify_on_read,
                                      self.config.spark_io, objects, s3a.Mode(self.config.jvm_io), checked,
                                      self.config.verify_jvm_reads)

    def read_arrow(self, manifest: Manifest) -> pa.Table:
        """The committed version ``manifest`` (as returned by :meth:`manifest`) as an Arrow table (no Spark)."""
        source = self._source(manifest)
        return reading.read_arrow(self.objects, source.keys, manifest, self.config.verify_on_read, source.threads)

    def _source(self, manifest: Manifest) -> reading.Source:
        """Where ``manifest``'s objects are read from: this store's access and layout, and its run's keys."""
        return reading.Source(self.config.access, self.layout, self.run_keys(manifest.dag_id, manifest.run_id),
                              self.config.upload_threads)

    def confirm_unchanged(self, reads: Iterable[reading.JvmRead]) -> None:
        """:func:`.dataplane.reading.confirm_unchanged`: the objects Spark's own reader read are still the checked ones;
        :class:`NotAvailable` naming the partition of one that is not (moved aside)."""
        reading.confirm_unchanged(self.objects, reads)

    def recheck_named(self, manifests: Iterable[Manifest], text: str) -> None:
        """:func:`.dataplane.reading.recheck_named`: the shared objects of ``manifests`` that an error ``text`` names,
        hashed; :class:`NotAvailable` naming the partition of one that is wrong (moved aside)."""
        reading.recheck_named(self.objects, manifests, text)

    def partitions(self, dag_id: str, run_id: str, result: str) -> tuple[PartitionId, ...]:
        """The partitions of ``result`` that have a current committed version."""
        states = protocol.scan_result(self.objects, self.run_keys(dag_id, run_id), result)
        return tuple(s.partition for s in states.values() if s.current is not None)

    # -- availability / failover -------------------------------------------------------------------------------
    def is_available(self, dag_id: str, run_id: str, partition: PartitionId, mode: Mode | str = Mode.FAST, *,
                     verify_checksums: bool = False) -> bool:
        """One partition's availability (see :mod:`.availability`): only that partition's keys are read."""
        return StoreAvailabilityChecker(self.objects, self.run_keys(dag_id, run_id), mode, batch=False,
                                        verify_checksums=verify_checksums).is_available(partition)

    def checker(self, dag_id: str, run_id: str, mode: Mode | str = Mode.FAST, *, unavailable: Iterable[PartitionId]
                = (), verify_checksums: bool = False, probe: Probe | str = Probe.LIST,
                batch: bool = True, reads: Iterable[Read] = ()) -> StoreAvailabilityChecker:
        """The core's availability checker for one run; ``unavailable``: partitions the failure names; ``reads``:
        what the failed subtask read (deep mode judges those partitions by exactly those objects)."""
        return StoreAvailabilityChecker(self.objects, self.run_keys(dag_id, run_id), mode, batch=batch,
                                        verify_checksums=verify_checksums, probe=probe, unavailable=unavailable,
                                        reads=reads)

    # -- life-cycle ----------------------------------------------------------------------------------------------
    def apply_retention(self, dag_id: str, retention: Retention, run_finished: Callable[[str], bool],
                        now: float | None = None, dry_run: bool = False) -> tuple[str, ...]:
        """Release runs of ``dag_id`` beyond the retention policy (finished, unheld only)."""
        return lifecycle.apply_retention(self.objects, self.layout, dag_id, retention, run_finished, now, dry_run)

    def sweep(self, grace_seconds: float = 6 * 3600, now: float | None = None, dry_run: bool = False,
              min_grace_seconds: float | None = None) -> lifecycle.SweepReport:
        """Remove uncommitted attempts, orphans, idle multipart uploads and shared objects no retained manifest
        lists, older than the grace period (see :func:`.gc.lifecycle.sweep`; :class:`GraceTooShort` below
        ``min_grace_seconds``, default the store's ``min_grace_seconds``, which its writers rely on)."""
        floor = self.config.min_grace_seconds if min_grace_seconds is None else min_grace_seconds
        return lifecycle.sweep(self.objects, self.layout, grace_seconds, now, dry_run, floor)

    def dags(self) -> list[str]:
        """The dag ids that have stored runs."""
        return lifecycle.list_dags(self.objects, self.layout)


@per_process()
def default_store() -> ResultStore:
    """The result store of this deployment (``[region_failover]`` + its aws connection), built and checked
    (:meth:`ResultStore.start_up`) once per process; a failed check raises and is tried again on the next call."""
    return ResultStore.from_airflow().start_up()


def _spark_schema_of(table: pa.Table) -> str:
    from pyspark.sql.pandas.types import from_arrow_schema

    return str(from_arrow_schema(table.schema).json())

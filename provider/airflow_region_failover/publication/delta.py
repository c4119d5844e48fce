"""Publishing a committed sink result as one Delta Lake table commit (delta-rs: no JVM), exactly once per run.

Rules (the transactional sink of Flink's two-phase commit, on Delta's log):

* **Read committed**: the rows are the *current committed* version of every partition of the sink result
  (:meth:`~.facade.ResultStore.read_arrow`, one partition in memory at a time); a partition without a committed
  version fails the publication (nothing is published from a partial result).
* **Stage, then commit**: each non-empty partition is written as one Parquet data file under the table's
  location with a fresh random name (``part-<uuid>.parquet``), then *one* Delta commit adds all of them together
  with the run's application transaction (:class:`~..publication.AppTransaction`). Until the commit's log entry
  ``_delta_log/<version>.json`` is written — atomically, put-if-absent on S3 — no reader sees any of it: a
  publisher killed between staging and commit leaves unreferenced files (``DeltaTable.vacuum`` removes them) and
  the table unchanged.
* **Exactly once**: before staging and again before each commit attempt the table's recorded version for the
  app id is read; a publication the table already holds is skipped (a retry, a re-run of the sink, a clear of
  the whole run). Two publishers of one run at once (a zombie task, two schedulers): delta-rs's conflict check
  refuses the second commit carrying the same app id (``ConcurrentTransaction``), the loser re-reads, finds it
  published and deletes its own staged files.
* **Schema**: top-level timestamps are stored as microseconds in UTC (Delta has no nanoseconds; naive
  timestamps — Spark's ``TimestampType`` — are UTC). ``append`` refuses rows whose columns differ from the
  table's (naming both); ``overwrite`` replaces the schema with the run's.
* **Secrets**: storage options carry the store connection's credentials frozen at publication time; they are
  never logged or part of a ``repr``.
"""

from __future__ import annotations

import json
import logging
import os
import time
import uuid
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from types import ModuleType
from typing import TYPE_CHECKING, Any

from airflow_region_failover.exceptions import PublishError
from airflow_region_failover.graph.ids import PartitionId
from airflow_region_failover.publication.declaration import AppTransaction, PublishMode
from airflow_region_failover.store.config import S3Access, portable

if TYPE_CHECKING:
    import pyarrow as pa

    from airflow_region_failover.store.facade import ResultStore

log = logging.getLogger(__name__)
COMMIT_ATTEMPTS = 3
EXTRA = "publish"
PUBLICATION_KEY = "region_failover.publication"
"""commitInfo key of a random token per commit attempt: which version a publisher's commit became."""
ROWS_KEY = "region_failover.rows"
"""commitInfo key of the number of rows a publication added (as text)."""


def deltalake() -> ModuleType:
    """The ``deltalake`` package (imported on first use); :class:`PublishError` naming the extra when missing."""
    try:
        import deltalake as module
        import deltalake.fs  # the submodules used as attributes of the module
        import deltalake.transaction
    except ImportError:
        raise PublishError(f"publishing to Delta Lake needs the 'deltalake' package: pip install "
                           f"'airflow-provider-region-failover[{EXTRA}]'") from None
    return module


@dataclass(frozen=True)
class TableTarget:
    """A Delta table's URI and the delta-rs storage options that reach it (hidden from ``repr``)."""

    uri: str
    storage_options: Mapping[str, str] = field(default_factory=dict, repr=False)


def storage_options(access: S3Access) -> dict[str, str]:
    """delta-rs (object_store) options for the store's S3 server: endpoint, region, frozen credentials."""
    frozen = portable(access)
    options = {"AWS_REGION": frozen.region}
    if frozen.endpoint_url:
        options["AWS_ENDPOINT_URL"] = frozen.endpoint_url
        if frozen.endpoint_url.startswith("http://"):
            options["AWS_ALLOW_HTTP"] = "true"
    if frozen.credentials is not None:
        options["AWS_ACCESS_KEY_ID"] = frozen.credentials.access_key
        options["AWS_SECRET_ACCESS_KEY"] = frozen.credentials.secret_key
        if frozen.credentials.session_token:
            options["AWS_SESSION_TOKEN"] = frozen.credentials.session_token
    return options


def target_for(uri: str, access: S3Access | None) -> TableTarget:
    """The target of ``uri``: an ``s3://`` URI gets ``access``'s storage options, a local path none."""
    if uri.startswith("s3://"):
        if access is None:
            raise PublishError(f"table {uri}: an s3:// table needs the store's S3 access")
        return TableTarget(uri, storage_options(access))
    return TableTarget(uri)


@dataclass(frozen=True)
class Staged:
    """Data files written under the table (not yet committed): their add actions, schema, rows and bytes."""

    actions: tuple[Any, ...]
    schema: pa.Schema
    rows: int
    bytes: int

    @property
    def paths(self) -> tuple[str, ...]:
        """The staged files, relative to the table."""
        return tuple(a.path for a in self.actions)


@dataclass(frozen=True)
class PublishOutcome:
    """What a publication did: ``committed`` (a new table version) or skipped because ``reason``."""

    uri: str
    committed: bool
    version: int | None
    rows: int = 0
    files: int = 0
    bytes: int = 0
    reason: str = ""


def open_table(target: TableTarget) -> Any:
    """The Delta table at ``target``, or ``None`` when there is none yet."""
    dl = deltalake()
    if not dl.DeltaTable.is_deltatable(target.uri, storage_options=dict(target.storage_options)):
        return None
    return dl.DeltaTable(target.uri, storage_options=dict(target.storage_options))


def recorded_version(table: Any, app_id: str) -> int | None:
    """The table's recorded application-transaction version for ``app_id`` (``None``: none, or no table)."""
    return None if table is None else table.transaction_version(app_id)


def delta_ready(table: pa.Table) -> pa.Table:
    """``table`` with top-level timestamps as microseconds in UTC (module rule) and no schema metadata."""
    import pyarrow as pa

    fields = []
    for f in table.schema:
        if pa.types.is_timestamp(f.type):
            f = f.with_type(pa.timestamp("us", tz="UTC"))
        fields.append(f)
    return table.cast(pa.schema(fields))


def stage(target: TableTarget, tables: Iterable[pa.Table]) -> Staged:
    """Write every non-empty table as one Parquet file under the table's location (module rule: staged, not
    committed); all must share the first one's schema."""
    import pyarrow.fs as pafs
    import pyarrow.parquet as pq

    dl = deltalake()
    if "://" not in target.uri:
        os.makedirs(target.uri, exist_ok=True)  # a local table's directory (object stores need none)
    fs = pafs.PyFileSystem(dl.fs.DeltaStorageHandler(target.uri, dict(target.storage_options)))
    actions: list[Any] = []
    schema: pa.Schema | None = None
    rows = size = 0
    for raw in tables:
        table = delta_ready(raw)
        if schema is None:
            schema = table.schema
        elif not table.schema.equals(schema):
            table = _conform(table, schema)
        if table.num_rows == 0:
            continue
        path = f"part-{uuid.uuid4().hex}.parquet"
        pq.write_table(table, path, filesystem=fs)
        nbytes = fs.get_file_info(path).size
        stats = json.dumps({"numRecords": table.num_rows})
        actions.append(dl.transaction.AddAction(path, nbytes, {}, int(time.time() * 1000), True, stats))
        rows, size = rows + table.num_rows, size + nbytes
    if schema is None:
        raise PublishError(f"table {target.uri}: the result has no partitions to publish")
    return Staged(tuple(actions), schema, rows, size)


def _conform(table: pa.Table, schema: pa.Schema) -> pa.Table:
    try:
        return table.select(schema.names).cast(schema)
    except Exception as exc:
        raise PublishError(f"the result's partitions disagree on their columns ({table.schema} vs {schema}): "
                           f"{exc}") from None


def discard(target: TableTarget, staged: Staged) -> None:
    """Delete staged files that will not be committed (best effort: ``vacuum`` removes what is left)."""
    import pyarrow.fs as pafs

    try:
        fs = pafs.PyFileSystem(deltalake().fs.DeltaStorageHandler(target.uri, dict(target.storage_options)))
        for path in staged.paths:
            fs.delete_file(path)
    except Exception:
        log.warning("could not delete %d staged files of %s; DeltaTable.vacuum() removes them", len(staged.paths),
                    target.uri)


def _check_append_schema(table: Any, staged: Staged, uri: str) -> None:
    dl = deltalake()
    ours = [(f.name, str(f.type)) for f in dl.Schema.from_arrow(staged.schema).fields]
    theirs = [(f.name, str(f.type)) for f in table.schema().fields]
    if ours != theirs:
        raise PublishError(f"table {uri} has columns {theirs}, the run's result {ours}: append only adds rows of "
                           "the same columns; publish to a new table or with publish_mode='overwrite'")


def commit(target: TableTarget, staged: Staged, txn: AppTransaction, metadata: Mapping[str, str]) -> PublishOutcome:
    """Commit ``staged`` with ``txn`` as one table version, unless the table already holds ``txn`` (then the
    staged files are deleted — unless the commit holding it is this call's own, whose answer was lost: every
    attempt's commit carries a random token); a failed commit is re-checked up to :data:`COMMIT_ATTEMPTS` times."""
    dl = deltalake()
    token = uuid.uuid4().hex
    properties = dl.CommitProperties(custom_metadata={**metadata, PUBLICATION_KEY: token},
                                     app_transactions=[dl.Transaction(txn.app_id, txn.version)])
    for attempt in range(1, COMMIT_ATTEMPTS + 1):
        table = open_table(target)
        recorded = recorded_version(table, txn.app_id)
        if txn.published_by(recorded):
            mine = committed_version(target, token) if attempt > 1 else None
            if mine is not None:  # our own earlier attempt landed although it reported an error: keep its files
                return PublishOutcome(target.uri, True, mine, staged.rows, len(staged.actions), staged.bytes)
            discard(target, staged)
            return PublishOutcome(target.uri, False, table.version(), reason=_held(txn, recorded))
        try:
            if table is None:
                dl.transaction.create_table_with_add_actions(
                    target.uri, dl.Schema.from_arrow(staged.schema), list(staged.actions), mode="error",
                    storage_options=dict(target.storage_options), commit_properties=properties)
            else:
                if txn.mode is PublishMode.APPEND:
                    _check_append_schema(table, staged, target.uri)
                table.create_write_transaction(list(staged.actions), txn.mode.value, staged.schema,
                                               commit_properties=properties)
            version = committed_version(target, token)
        except PublishError:
            discard(target, staged)
            raise
        except Exception as exc:  # a concurrent commit won (same app id, or the table was created meanwhile)
            if attempt == COMMIT_ATTEMPTS:
                raise
            log.warning("commit to %s failed (%s: %s); checking the table again", target.uri, type(exc).__name__,
                        str(exc)[:200])
            continue
        return PublishOutcome(target.uri, True, version, staged.rows, len(staged.actions), staged.bytes)
    raise AssertionError("unreachable")  # pragma: no cover


def commit_where(target: TableTarget, metadata: Mapping[str, str], depth: int = 100) -> dict[str, Any] | None:
    """The newest commit (its ``history()`` entry, ``version`` included) among the last ``depth`` whose commit info
    carries every entry of ``metadata``, or ``None``."""
    table = open_table(target)
    for entry in table.history(depth) if table is not None else ():
        if all(entry.get(key) == value for key, value in metadata.items()):
            return dict(entry)
    return None


def committed_version(target: TableTarget, token: str) -> int | None:
    """The table version whose commit carries publication ``token``."""
    entry = commit_where(target, {PUBLICATION_KEY: token})
    return None if entry is None else int(entry["version"])


def run_commit(target: TableTarget, dag_id: str, run_id: str) -> dict[str, Any] | None:
    """The commit DAG run ``run_id`` of ``dag_id`` published to the table (newest first), or ``None``."""
    return commit_where(target, {"region_failover.dag_id": dag_id, "region_failover.run_id": run_id})


def _held(txn: AppTransaction, recorded: int | None) -> str:
    if txn.mode is PublishMode.APPEND:
        return f"already published: the table holds {txn.app_id} (run {txn.run_key})"
    return (f"already published or superseded: the table's {txn.app_id} is at version {recorded}, this run's is "
            f"{txn.version} (run {txn.run_key})")


def publish(store: ResultStore, dag_id: str, run_id: str, result: str, partitions: int, target: TableTarget,
            txn: AppTransaction, metadata: Mapping[str, str] | None = None) -> PublishOutcome:
    """Publish the current committed version of ``result``'s ``partitions`` partitions to ``target`` exactly
    once (module rules): check, read + stage, commit."""
    table = open_table(target)
    recorded = recorded_version(table, txn.app_id)
    if txn.published_by(recorded):
        return PublishOutcome(target.uri, False, table.version(), reason=_held(txn, recorded))
    parts = (store.read_arrow(dag_id, run_id, PartitionId(result, i)) for i in range(partitions))
    staged = stage(target, parts)
    info = {"region_failover.dag_id": dag_id, "region_failover.run_id": run_id,
            "region_failover.run_key": txn.run_key, "region_failover.result": result,
            ROWS_KEY: str(staged.rows), **(metadata or {})}
    return commit(target, staged, txn, info)

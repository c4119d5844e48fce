"""Publishing a committed sink result as one Delta Lake table commit (delta-rs: no JVM), exactly once per run.

Rules (the transactional sink of Flink's two-phase commit, on Delta's log):

* **Read committed**: the rows are the *current committed* version of every partition of the sink result
  (:meth:`~airflow_region_failover.store.result_store.ResultStore.read_arrow`, one partition in memory at a
  time); a partition without a committed version, or one that cannot be read (an object missing or corrupt), fails the
  publication with :class:`InputUnavailable` naming it — the failover loop then restarts its producer, and the
  publishing task with it (nothing is published from a partial result).
* **Stage, then commit**: each non-empty partition is written as one Parquet data file in the publication's own
  folder of the table (:mod:`.staging`), then *one* Delta commit adds all of them together with the run's
  application transaction (:class:`~..publication.AppTransaction`). Until the commit's log entry
  ``_delta_log/<version>.json`` is written — atomically, put-if-absent on S3 — no reader sees any of it: a
  publisher killed between staging and commit leaves the table unchanged and unreferenced files in that folder,
  which the try that commits the same publication deletes (:func:`.staging.clear_leftovers`).
* **Exactly once**: before staging and again before each commit attempt the table's recorded version for the
  app id is read; a publication the table already holds is skipped (a retry, a re-run of the sink, a clear of
  the whole run). Two publishers of one run at once (a zombie task, two schedulers): delta-rs's conflict check
  refuses the second commit carrying the same app id (``ConcurrentTransaction``), the loser re-reads, finds it
  published and deletes its own staged files. Which commit made a version is found in the table's whole history
  (:func:`commit_where`), not only its last hundred versions.
* **A re-run whose rows differ** (a person fixed the code and cleared the run): every commit records the
  result's content checksum (:data:`CONTENT_KEY`, SHA-256 over its partitions' content checksums). ``overwrite``
  publishes the re-run's rows again while the table's latest publication is this run's own (a new version,
  the same application transaction); ``append`` cannot without adding the rows twice, so the skip says that the
  rows differ and how to publish them, at warning level and in the outcome's reason.
* **Schema**: ``append`` refuses rows whose columns differ from the table's (naming both); ``overwrite`` replaces
  the schema with the run's.
* **Secrets**: storage options carry the store connection's credentials frozen at publication time; they are
  never logged or part of a ``repr``.
"""

from __future__ import annotations

import hashlib
import logging
import uuid
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from airflow_region_failover.exceptions import InputUnavailable, NotAvailable, PublishError
from airflow_region_failover.graph.ids import PartitionId
from airflow_region_failover.publication.declaration import AppTransaction, PublishMode
from airflow_region_failover.publication.staging import (
    Staged,
    TableTarget,
    clear_leftovers,
    deltalake,
    discard,
    stage,
    staging_folder,
)
from airflow_region_failover.store.s3.clients import S3Access, portable

if TYPE_CHECKING:
    import pyarrow as pa

    from airflow_region_failover.store.manifest import Manifest
    from airflow_region_failover.store.result_store import ResultStore

log = logging.getLogger(__name__)
COMMIT_ATTEMPTS = 3
PUBLICATION_KEY = "region_failover.publication"
"""commitInfo key of a random token per commit attempt: which version a publisher's commit became."""
ROWS_KEY = "region_failover.rows"
"""commitInfo key of the number of rows a publication added (as text)."""
CONTENT_KEY = "region_failover.content"
"""commitInfo key of the published result's content checksum (:func:`content_of`)."""
APP_KEY = "region_failover.app_id"
"""commitInfo key of the publication's application transaction id (which commit holds a run's publication)."""
STAGED_KEY = "region_failover.staged"
"""commitInfo key of the folder the publication's files were staged in (:func:`.staging.staging_folder`)."""


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


def _check_append_schema(table: Any, staged: Staged, uri: str) -> None:
    dl = deltalake()
    ours = [(f.name, str(f.type)) for f in dl.Schema.from_arrow(staged.schema).fields]
    theirs = [(f.name, str(f.type)) for f in table.schema().fields]
    if ours != theirs:
        raise PublishError(f"table {uri} has columns {theirs}, the run's result {ours}: append only adds rows of "
                           "the same columns; publish to a new table or with publish_mode='overwrite'")


def held_by(target: TableTarget, txn: AppTransaction, recorded: int | None, content: str, run_id: str) -> bool:
    """Whether the table already holds this publication (skip it): ``txn.published_by(recorded)``, unless an
    ``overwrite`` re-run of the run whose publication is the table's latest brings other rows (module rule)."""
    if not txn.published_by(recorded):
        return False
    if txn.mode is not PublishMode.OVERWRITE or recorded != txn.version or not content:
        return True
    holder = commit_where(target, {APP_KEY: txn.app_id})
    return holder is None or holder.get("region_failover.run_id") != run_id or holder.get(CONTENT_KEY) in (None,
                                                                                                          content)


def commit(target: TableTarget, staged: Staged, txn: AppTransaction, metadata: Mapping[str, str]) -> PublishOutcome:
    """Commit ``staged`` with ``txn`` as one table version, unless the table already holds it (:func:`held_by`;
    then the staged files are deleted — unless the commit holding it is this call's own, whose answer was lost:
    every attempt's commit carries a random token); a failed commit is re-checked up to :data:`COMMIT_ATTEMPTS`
    times."""
    dl = deltalake()
    token = uuid.uuid4().hex
    properties = dl.CommitProperties(custom_metadata={**metadata, PUBLICATION_KEY: token},
                                     app_transactions=[dl.Transaction(txn.app_id, txn.version)])
    content, run_id = metadata.get(CONTENT_KEY, ""), metadata.get("region_failover.run_id", "")
    first_seen: int | None = None
    for attempt in range(1, COMMIT_ATTEMPTS + 1):
        table = open_table(target)
        seen = -1 if table is None else int(table.version())
        first_seen = seen if first_seen is None else first_seen
        recorded = recorded_version(table, txn.app_id)
        if held_by(target, txn, recorded, content, run_id):
            mine = committed_version(target, token, first_seen) if attempt > 1 else None
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
            version = committed_version(target, token, seen)
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


def commit_where(target: TableTarget, metadata: Mapping[str, str], newer_than: int = -1) -> dict[str, Any] | None:
    """The newest commit (its ``history()`` entry, ``version`` included) whose commit info carries every entry of
    ``metadata``, among the versions after ``newer_than`` (default: the whole history), or ``None``."""
    table = open_table(target)
    if table is None:
        return None
    depth = int(table.version()) - newer_than if newer_than >= 0 else None
    for entry in table.history(depth):
        if all(entry.get(key) == value for key, value in metadata.items()):
            return dict(entry)
    return None


def committed_version(target: TableTarget, token: str, newer_than: int = -1) -> int | None:
    """The table version (after ``newer_than``) whose commit carries publication ``token``."""
    entry = commit_where(target, {PUBLICATION_KEY: token}, newer_than)
    return None if entry is None else int(entry["version"])


def run_commit(target: TableTarget, dag_id: str, run_id: str) -> dict[str, Any] | None:
    """The commit DAG run ``run_id`` of ``dag_id`` published to the table (newest first), or ``None``."""
    return commit_where(target, {"region_failover.dag_id": dag_id, "region_failover.run_id": run_id})


def _held(txn: AppTransaction, recorded: int | None) -> str:
    if txn.mode is PublishMode.APPEND:
        return f"already published: the table holds {txn.app_id} (run {txn.run_key})"
    return (f"already published or superseded: the table's {txn.app_id} is at version {recorded}, this run's is "
            f"{txn.version} (run {txn.run_key})")


def sink_manifests(store: ResultStore, dag_id: str, run_id: str, result: str,
                   partitions: int) -> tuple[Manifest, ...]:
    """The current committed manifest of every partition of the sink result; :class:`InputUnavailable` naming the
    first that has none."""
    manifests = []
    for index in range(partitions):
        try:
            manifests.append(store.manifest(dag_id, run_id, PartitionId(result, index)))
        except NotAvailable as exc:
            raise InputUnavailable(PartitionId(result, index), str(exc)) from exc
    return tuple(manifests)


def content_of(manifests: Iterable[Manifest]) -> str:
    """The published result's content checksum: SHA-256 over its partitions' content checksums, in order."""
    lines = "\n".join(f"{m.partition}:{m.content_checksum}" for m in manifests)
    return hashlib.sha256(lines.encode()).hexdigest()


def _read(store: ResultStore, manifest: Manifest) -> pa.Table:
    try:
        return store.read_arrow(manifest)
    except NotAvailable as exc:
        raise InputUnavailable(exc.partition or manifest.partition, str(exc)) from exc


def _skipped(target: TableTarget, table: Any, txn: AppTransaction, recorded: int | None, content: str,
             run_id: str) -> PublishOutcome:
    """The outcome of a publication the table already holds: says when this run's rows differ from those it
    published (module rule)."""
    reason = _held(txn, recorded)
    holder = commit_where(target, {APP_KEY: txn.app_id})
    if holder is not None and holder.get("region_failover.run_id") == run_id:
        published = holder.get(CONTENT_KEY)
        if published not in (None, content):
            reason += (f"; this run's result differs from the rows it published in table version {holder['version']} "
                       f"(content {str(published)[:12]}... vs {content[:12]}...): append publishes a run once, so "
                       "the table keeps them — publish the new rows with another logical date, or to a table with "
                       "publish_mode='overwrite'")
            log.warning("table %s: %s", target.uri, reason)
    return PublishOutcome(target.uri, False, table.version(), reason=reason)


def publish(store: ResultStore, dag_id: str, run_id: str, result: str, partitions: int, target: TableTarget,
            txn: AppTransaction, metadata: Mapping[str, str] | None = None) -> PublishOutcome:
    """Publish the current committed version of ``result``'s ``partitions`` partitions to ``target`` exactly
    once (module rules): check, read + stage, commit, clear what earlier tries left."""
    table = open_table(target)
    recorded = recorded_version(table, txn.app_id)
    try:
        manifests = sink_manifests(store, dag_id, run_id, result, partitions)
    except InputUnavailable:
        if txn.published_by(recorded):  # released since it was published: nothing to compare, nothing to do
            return PublishOutcome(target.uri, False, table.version(), reason=_held(txn, recorded))
        raise
    content = content_of(manifests)
    if held_by(target, txn, recorded, content, run_id):
        return _skipped(target, table, txn, recorded, content, run_id)
    folder = staging_folder(txn, content)
    staged = stage(target, (_read(store, m) for m in manifests), folder)
    info = {"region_failover.dag_id": dag_id, "region_failover.run_id": run_id,
            "region_failover.run_key": txn.run_key, "region_failover.result": result, ROWS_KEY: str(staged.rows),
            CONTENT_KEY: content, APP_KEY: txn.app_id, STAGED_KEY: folder, **(metadata or {})}
    outcome = commit(target, staged, txn, info)
    if outcome.committed:
        clear_leftovers(target, folder, staged.paths)
    return outcome

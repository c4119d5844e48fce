"""A Delta table's files as a publication writes them: where the table is (:class:`TableTarget`), its data files
staged before the commit that adds them, and the files staged by tries that never committed, removed.

Rules:

* **Staged in the publication's own folder**: each non-empty partition of the sink result is written as one
  Parquet data file with a fresh random name under ``run-<h>/`` of the table (:func:`staging_folder`: ``h`` names
  the run's application transaction and the content it publishes), top-level timestamps as microseconds in UTC
  (:func:`delta_ready`: Delta has no nanoseconds; naive timestamps — Spark's ``TimestampType`` — are UTC). No
  reader sees a staged file until a commit adds it (:mod:`.delta`).
* **What no commit will reference is removed**: a try that dies between staging and commit leaves its files in
  the folder. Only one commit can ever add files of a folder — it holds the publication's application
  transaction with that content, and every other try of it then finds it published — so once that commit is
  known, every other file of its folder is garbage: the try that commits deletes it (:func:`clear_leftovers`, best
  effort; what is left when that try dies first, or in a folder no commit ever holds — a run superseded before
  any try committed — is left to ``DeltaTable.vacuum``).
* **Secrets**: a target's storage options carry credentials; they are never logged or part of a ``repr``.
"""

from __future__ import annotations

import hashlib
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
from airflow_region_failover.publication.declaration import AppTransaction

if TYPE_CHECKING:
    import pyarrow as pa

log = logging.getLogger(__name__)
EXTRA = "publish"


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


def delta_ready(table: pa.Table) -> pa.Table:
    """``table`` with top-level timestamps as microseconds in UTC (module rule) and no schema metadata."""
    import pyarrow as pa

    fields = []
    for f in table.schema:
        if pa.types.is_timestamp(f.type):
            f = f.with_type(pa.timestamp("us", tz="UTC"))
        fields.append(f)
    return table.cast(pa.schema(fields))


def staging_folder(txn: AppTransaction, content: str) -> str:
    """``run-<h>``: the folder of the table a publication stages its files in, ``h`` naming the application
    transaction and the content it publishes (module rule)."""
    return "run-" + hashlib.sha256(f"{txn.app_id}\n{txn.version}\n{content}".encode()).hexdigest()[:24]


def table_files(target: TableTarget) -> Any:
    """The table's location as a pyarrow filesystem (paths relative to the table)."""
    import pyarrow.fs as pafs

    if "://" not in target.uri:
        os.makedirs(target.uri, exist_ok=True)  # a local table's directory (object stores need none)
    return pafs.PyFileSystem(deltalake().fs.DeltaStorageHandler(target.uri, dict(target.storage_options)))


def stage(target: TableTarget, tables: Iterable[pa.Table], folder: str = "") -> Staged:
    """Write every non-empty table as one Parquet file under the table's location, in ``folder`` (module rule:
    staged, not committed); all must share the first one's schema."""
    import pyarrow.parquet as pq

    dl = deltalake()
    fs = table_files(target)
    if folder and "://" not in target.uri:
        os.makedirs(os.path.join(target.uri, folder), exist_ok=True)
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
        path = f"{folder}/part-{uuid.uuid4().hex}.parquet" if folder else f"part-{uuid.uuid4().hex}.parquet"
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
    try:
        fs = table_files(target)
        for path in staged.paths:
            fs.delete_file(path)
    except Exception:
        log.warning("could not delete %d staged files of %s; DeltaTable.vacuum() removes them", len(staged.paths),
                    target.uri)


def clear_leftovers(target: TableTarget, folder: str, kept: Iterable[str]) -> int:
    """Delete the files of the publication's ``folder`` not in ``kept`` (the paths its commit references): what
    tries that died between staging and commit left (module rule); best effort, returns how many."""
    import pyarrow.fs as pafs

    keep = set(kept)
    try:
        fs = table_files(target)
        doomed = [info.path for info in fs.get_file_info(pafs.FileSelector(folder, allow_not_found=True))
                  if info.is_file and info.path not in keep]
        for path in doomed:
            fs.delete_file(path)
    except Exception:
        log.warning("could not delete the files %s/%s/ staged and never committed", target.uri, folder,
                    exc_info=True)
        return 0
    if doomed:
        log.info("deleted %d files under %s/%s/ that a try staged and never committed", len(doomed), target.uri,
                 folder)
    return len(doomed)

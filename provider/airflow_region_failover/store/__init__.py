"""S3 result store: BLOCKING results committed atomically, checked for availability, read back, cleaned up.

Modules, each answering one question: :mod:`.keys` (where does every key go), :mod:`.manifest` (what a commit
records), :mod:`.commit` (which attempt is the committed version), :mod:`.availability` (can it be read again),
:mod:`.parquet` (how a DataFrame gets into Parquet objects and out), :mod:`.lifecycle` (when is it deleted),
:mod:`.config` (how S3 is reached), :mod:`.objects` (guarded S3 calls), :mod:`.conditional_writes` (does the server
honour conditional writes), :mod:`.deployment` (which prefix is this deployment's). :class:`ResultStore` is the
facade. Errors are in :mod:`airflow_region_failover.exceptions` (re-exported here).

Key layout (``R = <prefix>/v1/<dag>/<run>``, ``P = p<index:05d>``, ``A = a<attempt:06d>``)::

    R/<result>/data/P/A-<writer>/part-<k>-t<try>.parquet   data, per run, per attempt, per writer
    R/<result>/manifests/P/A.json                          commit record (If-None-Match: * create)
    R/<result>/retired/P/A.json                            retirement marker / fence
    R/_run.json, R/_holds/<name>.json                      run record, holds against release

Commit / supersede protocol (attempt = Airflow ``try_number``, increasing within a run):

1. a producer attempt first *begins*: it retires every committed lower attempt (markers keep their content
   checksums) and fences ``attempt - 1``;
2. it writes its data under its own ``A-<writer>/`` prefix (uploads abort on error: nothing half-visible);
3. it *commits* by creating ``manifests/P/A.json`` with ``If-None-Match: *`` once every object it lists is there
   with its size (else :class:`IncompleteCommit`) — one winner per attempt, a second committer gets
   :class:`AlreadyCommitted` (a retried PUT of its own that had landed is its commit); an attempt at or below the
   fence, or below a committed newer attempt, gets :class:`Superseded`;
4. *retire* (:meth:`ResultStore.retire`) makes the current version of a partition unavailable until a newer
   attempt commits (the protocol's operator for a caller that knows a version must not be read again).

Readers use the committed attempt with the highest number above the fence (never a data listing); so a rerun
in the same DAG run becomes visible atomically when it commits, and a zombie older attempt can never replace it.
"""

from airflow_region_failover.exceptions import (
    AlreadyCommitted,
    ConditionalWritesUnsupported,
    GraceTooShort,
    IncompleteCommit,
    ManifestError,
    NestedDeployment,
    NotAvailable,
    ReleaseRefused,
    StoreError,
    StoreUnreachable,
    Superseded,
    UnsafeKeyError,
)
from airflow_region_failover.store.availability import Mode, Probe, StoreAvailabilityChecker
from airflow_region_failover.store.config import S3Access, S3Credentials, StoreConfig
from airflow_region_failover.store.facade import ResultStore
from airflow_region_failover.store.lifecycle import Retention, SweepReport
from airflow_region_failover.store.manifest import InputVersion, Manifest, ObjectEntry, Retirement

__all__ = [
    "AlreadyCommitted",
    "ConditionalWritesUnsupported",
    "GraceTooShort",
    "IncompleteCommit",
    "InputVersion",
    "Manifest",
    "ManifestError",
    "Mode",
    "NestedDeployment",
    "NotAvailable",
    "ObjectEntry",
    "Probe",
    "ReleaseRefused",
    "ResultStore",
    "Retention",
    "Retirement",
    "S3Access",
    "S3Credentials",
    "StoreAvailabilityChecker",
    "StoreConfig",
    "StoreError",
    "StoreUnreachable",
    "Superseded",
    "SweepReport",
    "UnsafeKeyError",
]

"""The BLOCKING result store on S3: a result partition committed atomically, checked for availability, read back,
released and swept. :class:`ResultStore` (:mod:`.facade`) is the one object the rest of the provider talks to.

Modules, each answering one question:

* where every key goes — :mod:`.keys` (the one description of the key layout, and the only producer of keys);
* what a commit records — :mod:`.manifest`; which attempt is the committed version — :mod:`.commit` (the commit /
  supersede protocol and the reader rule);
* how a body is stored once under the name of its hash, and whether what is stored there is that body (a wrong
  object is moved aside) — :mod:`.content`; which shared objects are still referenced — :mod:`.registry`;
* how a DataFrame becomes Parquet objects — :mod:`.local_write` (Spark's own writer to the driver's disk, where
  the session's executors share it, in directories of :mod:`.scratch`), :mod:`.parquet` and :mod:`.encoding`
  (Python workers: bounded bodies, keyed batches split by subpartition), :mod:`.clustered` and :mod:`.chunking`
  (sorted, content-defined chunks); how a committed version is read back — :mod:`.reading` (Spark's own reader
  through ``s3a://``, :mod:`.s3a`, or the Python workers), with its schema's nullability — :mod:`.nullability`;
* what a checkpoint of a checkpointed step records — :mod:`.checkpoints`;
* can a partition be read again — :mod:`.availability`; when is it deleted — :mod:`.lifecycle`;
* how S3 is reached — :mod:`.config`; guarded S3 calls — :mod:`.objects`, and the streaming multipart upload on
  top of them — :mod:`.upload`;
* does the server honour conditional writes — :mod:`.conditional_writes`; which prefix is this deployment's —
  :mod:`.deployment`.

Errors are in :mod:`airflow_region_failover.exceptions` (re-exported here).
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
from airflow_region_failover.store.config import Retention, StoreConfig
from airflow_region_failover.store.facade import ResultStore
from airflow_region_failover.store.gc.lifecycle import SweepReport
from airflow_region_failover.store.manifest import InputVersion, Manifest, ObjectEntry, Retirement
from airflow_region_failover.store.s3.clients import S3Access, S3Credentials

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

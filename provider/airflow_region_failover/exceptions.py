"""Every error the provider raises, in one hierarchy rooted at :class:`RegionFailoverError`.

Rule (the root's contract): a message is one line that names the offender — the step, edge, option, key,
partition, connection or request — and the fix. The root and the errors of the pure core (:class:`GraphError`,
:class:`OptionError`, :class:`InvalidStateError`, :class:`HistoryError`) are defined in the core (``graph/``,
``failover/``, ``planning/``), which may import nothing above itself; they are re-exported here, and every error
of the adapters is defined here. Catch :class:`RegionFailoverError` to catch them all.
"""

from __future__ import annotations

import re

from airflow_region_failover.failover.backoff.base import InvalidStateError
from airflow_region_failover.graph.errors import GraphError, OptionError, RegionFailoverError
from airflow_region_failover.graph.ids import PartitionId
from airflow_region_failover.planning.history import HistoryError

__all__ = [
    "AlreadyCommitted",
    "ClearOutcomeUnknown",
    "ConditionFailed",
    "ConditionalWritesUnsupported",
    "DiskTooFull",
    "ExtraNotInstalled",
    "GraceTooShort",
    "GraphError",
    "HistoryError",
    "IncompleteCommit",
    "InputUnavailable",
    "InvalidStateError",
    "ManifestError",
    "NestedDeployment",
    "NotAvailable",
    "OptionError",
    "PublishError",
    "RegionFailoverError",
    "ReleaseRefused",
    "RestError",
    "RunPlanUnavailable",
    "SparkUnreachable",
    "StepOutputError",
    "StoreError",
    "StoreNotConfigured",
    "StoreUnreachable",
    "Superseded",
    "UnsafeKeyError",
]


# -- the result store -------------------------------------------------------------------------------------------
class StoreError(RegionFailoverError):
    """Base class of every result-store error."""


class UnsafeKeyError(StoreError):
    """An id, bucket or prefix would build a key outside the configured bucket/prefix (or an ambiguous one)."""


class ManifestError(StoreError):
    """A manifest is malformed or of an unknown format version (the message names its key)."""


class ConditionFailed(StoreError):
    """A conditional write lost a race: the object exists (create-only) or changed since it was read (``If-Match``)."""


class AlreadyCommitted(ConditionFailed):
    """Another writer already committed this (partition, attempt): the first commit stands, this one is dropped."""


class Superseded(StoreError):
    """This attempt was retired or a newer attempt exists: a zombie's commit is refused."""


class ObjectUnservable(StoreError):
    """The server lists and HEADs an object but answers every GET of it with a server error (5xx, after botocore's
    retries): e.g. a self-hosted server that finds a disk CRC error on read. ``key`` names the object."""

    def __init__(self, message: str, key: str) -> None:
        super().__init__(message)
        self.key = key


class NotAvailable(StoreError):
    """The partition has no current committed version (never committed, retired, or its objects are gone or
    corrupt); ``partition`` names it when the reader knows it (a reader that found one of its objects missing,
    of another size or of other bytes: :func:`unreadable`)."""

    def __init__(self, message: str, partition: PartitionId | None = None) -> None:
        super().__init__(message)
        self.partition = partition


_UNREADABLE = re.compile(r"partition (\S+#\d+) is unreadable: ([^\n]*)")


def unreadable(partition: PartitionId, why: str) -> NotAvailable:
    """The error of a reader that cannot read ``partition`` (an object of its current version is missing, of
    another size or of other bytes): its text names the partition in a form :func:`unreadable_in` finds again in
    the text of any error that wraps it (Spark's ``PythonException`` from an executor carries only text)."""
    return NotAvailable(f"partition {partition} is unreadable: {why}", partition)


def unreadable_in(text: str) -> tuple[PartitionId, str] | None:
    """The partition (and why) an :func:`unreadable` error inside ``text`` names, or ``None``."""
    found = _UNREADABLE.search(text)
    if found is None:
        return None
    try:
        return PartitionId.parse(found.group(1)), found.group(2).strip()
    except GraphError:
        return None


class StoreUnreachable(StoreError):
    """S3 did not answer after the configured bounded retries; nothing was committed."""


class RunPlanUnavailable(StoreError):
    """A task that runs what its run's plan fixed (a ``Checkpoint(epochs="AUTO")`` step's epochs) could not read or
    fix that plan: it fails rather than run another number (a retry reads it again)."""


class StoreNotConfigured(StoreError):
    """The result store cannot sign a request: no AWS credentials in its connection or this process (the message
    names the connection and how to add it)."""


class ReleaseRefused(StoreError):
    """A release or clean-up was refused because a run is unfinished or a pending restart holds its results."""


class IncompleteCommit(StoreError):
    """A commit was refused: an object its manifest lists is missing or has another size (nothing was committed)."""


class GraceTooShort(StoreError):
    """A sweep's grace period is below the minimum a live writer could be silent for (it could be swept)."""


class ConditionalWritesUnsupported(StoreError):
    """The S3 server ignores ``If-None-Match`` / ``If-Match``: every compare-and-swap would be last-writer-wins."""


class NestedDeployment(StoreError):
    """The store prefix lies inside another deployment's prefix (its sweeper would treat our keys as orphans)."""


# -- running a subtask ------------------------------------------------------------------------------------------
class PublishError(RegionFailoverError):
    """A sink result could not be published to its Delta table (missing package, bad schema, bad location)."""


class StepOutputError(RegionFailoverError):
    """A step function returned something that does not match the results its step declares."""


class InputUnavailable(RegionFailoverError):
    """A partition a subtask must read is not available; ``partition`` names it (the failover cause)."""

    def __init__(self, partition: PartitionId, why: str) -> None:
        super().__init__(f"input partition {partition} is unavailable: {why}")
        self.partition = partition


class ExtraNotInstalled(RegionFailoverError, FileNotFoundError):
    """A feature needs an extra of the distribution that is not installed (the message names the extra and the
    ``pip install`` that adds it); a ``FileNotFoundError`` too, as the missing program or package is."""


# -- Spark -------------------------------------------------------------------------------------------------------
class SparkUnreachable(RegionFailoverError, ConnectionError):
    """The Spark Connect server of a step's connection does not accept connections (the message names its URL and
    the Airflow connection, never the URL's token)."""


# -- Airflow's REST API -----------------------------------------------------------------------------------------
class RestError(RegionFailoverError, RuntimeError):
    """A REST call failed; the message names the method, path and HTTP status (never a credential). ``status`` is
    the HTTP status (``None`` when there was no answer)."""

    def __init__(self, message: str, status: int | None = None) -> None:
        super().__init__(message)
        self.status = status


class ClearOutcomeUnknown(RestError):
    """A clear was sent but its answer was lost (time-out, dropped connection): it may or may not have cleared,
    so it is not sent again blindly."""


# -- the standalone stack ---------------------------------------------------------------------------------------
class DiskTooFull(RegionFailoverError, OSError):
    """The disk under the embedded S3 server's data directory has too little room before SeaweedFS's read-only mark
    (the message names the disk, the room and the fix); an ``OSError`` too, as a full disk is."""

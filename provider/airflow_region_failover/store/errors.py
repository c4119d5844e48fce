"""Errors of the result store: one line each, naming the offending key, partition or setting."""

from __future__ import annotations

from airflow_region_failover.graph.errors import RegionFailoverError


class StoreError(RegionFailoverError):
    """Base class of every result-store error."""


class UnsafeKeyError(StoreError):
    """An id, bucket or prefix would build a key outside the configured bucket/prefix (or an ambiguous one)."""


class ManifestError(StoreError):
    """A manifest is malformed or of an unknown format version (the message names its key)."""


class AlreadyCommitted(StoreError):
    """Another writer already committed this (partition, attempt): the first commit stands, this one is dropped."""


class Superseded(StoreError):
    """This attempt was retired or a newer attempt exists: a zombie's commit is refused."""


class NotAvailable(StoreError):
    """The partition has no current committed version (never committed, retired, or its objects are gone)."""


class StoreUnreachable(StoreError):
    """S3 did not answer after the configured bounded retries; nothing was committed."""


class ReleaseRefused(StoreError):
    """A release or clean-up was refused because a run is unfinished or a pending restart holds its results."""

"""Spark I/O, reading: a committed version back as Arrow or as a DataFrame.

Rules: where the Spark session's JVM reaches the store through ``s3a://`` (:func:`.s3a.jvm_reader`: hadoop-aws on
its classpath, the store's endpoint and long-lived keys, ``[region_failover] store_jvm_io`` not ``off``), a read in
``executors`` mode is **Spark's own Parquet reader over exactly the manifest's objects**
(``spark.read.schema(s).parquet(*urls)``; when the objects were just checked, the same scan without Spark's listing
of them, :mod:`.listed`; else listed from the driver: :func:`.s3a.listed_on_driver`) — Spark's JVM
path is several times faster than decoding in Python workers (``benchmarks/bench_store_paths.py``) — and the
integrity check moves to S3's own checksum: every object is HEADed first and must have its recorded size and, kept
by S3 with it, the full-object SHA-256 its key and manifest name (the writers upload every object with that
checksum, which the server verifies, :mod:`..content`); a missing, resized or different object makes the partition
unreadable (below), naming it and the object, before Spark reads anything. The frame gets back the nullability its
schema records (:mod:`.nullability`). An object S3 keeps no full-object SHA-256 for (uploaded before this rule, or
multipart), or a schema whose nullability cannot be restored, sends the read to the Python path, which hashes what
it reads.

Python path (no S3A, ``driver`` mode, reads without Spark): ``executors`` mode maps one Spark partition per object
(``spark.range(n, numPartitions=n).mapInArrow``), each GETting and decoding its object; ``driver`` mode GETs the
objects in the driver and calls ``spark.createDataFrame(arrow_table)``. An object's key comes from its manifest
entry: run-scoped (version-1 manifests) or shared and content-addressed (:meth:`..keys.RunKeys.object_key`). It
always checks sizes, and SHA-256s when ``verify`` is set (hashed while streaming). Memory rule: an object's body is
streamed into one buffer of its recorded size, the Parquet decoder reads that buffer without copying it, and the
buffer is dropped as soon as its table is decoded — so a read holds each object once, and only the objects in flight
(not all of a manifest's) at a time. Executors receive the store's access with credentials frozen at the moment of
the read (:func:`..s3.clients.portable`).

Every error of a read that finds an object missing, of another size or of other bytes makes the partition
unreadable: it (:func:`~airflow_region_failover.exceptions.unreadable`) names the partition and the object — also
through Spark, whose executor errors reach the driver as text — and a shared object found wrong is moved aside
first (:func:`..content.quarantine`), so the restart of its producer, which the failover loop makes for an
unreadable partition, writes it again for every run that lists it. So does a GET the server answers with a server
error (5xx after botocore's retries: an object it lists and HEADs but cannot serve) — the shared object is marked
suspect instead of moved aside (:func:`..content.mark_suspect`; moving it aside would read it), and the producer's
restart overwrites it. On the JVM path Spark's reader names the object it could not get, and
:func:`recheck_named` GETs it the same way.
"""

from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import re
from collections.abc import Iterable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from airflow_region_failover.exceptions import ObjectUnservable, unreadable
from airflow_region_failover.graph.ids import PartitionId
from airflow_region_failover.store.content import check_stored, mark_suspect, quarantine
from airflow_region_failover.store.dataplane import listed, nullability, s3a
from airflow_region_failover.store.keys import Layout, RunKeys
from airflow_region_failover.store.manifest import Manifest, ObjectEntry
from airflow_region_failover.store.s3.clients import S3Access, client_for, portable
from airflow_region_failover.store.s3.objects import Objects
from airflow_region_failover.timeline import phase

if TYPE_CHECKING:
    import pyarrow as pa
    from pyspark.sql import DataFrame, SparkSession


@dataclass(frozen=True)
class Source:
    """What a read needs besides the manifest: the store's access and key layout, the run's keys, and how many
    objects it fetches at a time."""

    access: S3Access = field(repr=False)
    layout: Layout
    keys: RunKeys
    threads: int

    def objects(self) -> Objects:
        """Guarded object operations through this process's cached client."""
        return Objects(client_for(self.access), self.layout)


def fetch(objects: Objects, keys: RunKeys, entry: ObjectEntry, verify: bool, partition: PartitionId) -> bytearray:
    """GET one object of ``partition``'s manifest into one buffer of its recorded size, checking the size (and the
    SHA-256 if ``verify``, hashed while streaming): no second copy of the body is made (module rule)."""
    key = keys.object_key(entry.key, entry.shared)
    try:
        opened = objects.open(key)
    except ObjectUnservable as exc:
        why = f"cannot be read: {exc}"
        mark_suspect(objects, objects.layout, entry, why)
        raise unreadable(partition, f"object {key} listed in its manifest {why}") from exc
    if opened is None:
        raise unreadable(partition, f"object {key} listed in its manifest is missing")
    with contextlib.closing(opened.body):
        problem = "" if opened.length == entry.size else f"has {opened.length} bytes, its manifest says {entry.size}"
        buffer = bytearray(opened.length if not problem else 0)
        digest = hashlib.sha256()
        filled = 0
        with memoryview(buffer) as view:
            for chunk in () if problem else objects.chunks(key, opened.body):
                end = filled + len(chunk)
                if end > opened.length:
                    problem = f"has more than {opened.length} bytes, its manifest says {entry.size}"
                    break
                view[filled:end] = chunk
                if verify:
                    digest.update(chunk)
                filled = end
    if not problem and filled != opened.length:
        problem = f"ended after {filled} of {opened.length} bytes"
    if not problem and verify and digest.hexdigest() != entry.sha256:
        problem = "does not match the SHA-256 in its manifest"
    if problem:
        quarantine(objects, objects.layout, entry, opened.etag, problem)
        raise unreadable(partition, f"object {key} listed in its manifest {problem}")
    return buffer


def load_table(objects: Objects, keys: RunKeys, entry: ObjectEntry, verify: bool, partition: PartitionId) -> pa.Table:
    """One object of ``partition``'s manifest decoded from its fetched buffer (zero-copy input); the buffer is
    gone when this returns. Rule: decoded by ``ParquetFile`` with neither pre-buffering nor Arrow's threads —
    ``pq.read_table`` decodes through Arrow's dataset scanner, whose threads drop their reference to the input a
    moment after it returns (a third object alive in a read of two threads failed ``test_store_memory.py``). A read
    of several objects decodes them in parallel (:func:`read_arrow`'s pool, one Spark task per object)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    body = pa.BufferReader(pa.py_buffer(fetch(objects, keys, entry, verify, partition)))
    with pq.ParquetFile(body, pre_buffer=False) as parquet_file:
        return parquet_file.read(use_threads=False)


def read_arrow(objects: Objects, keys: RunKeys, manifest: Manifest, verify: bool, threads: int = 4) -> pa.Table:
    """The committed version as one Arrow table (objects fetched and decoded in parallel, in manifest order)."""
    import pyarrow as pa
    from pyspark.sql.types import StructType

    with ThreadPoolExecutor(max_workers=max(1, threads)) as pool:
        tables = list(pool.map(lambda e: load_table(objects, keys, e, verify, manifest.partition), manifest.objects))
    if tables:
        return pa.concat_tables(tables)
    return _empty_arrow(StructType.fromJson(_schema_json(manifest)))


def _schema_json(manifest: Manifest) -> dict[str, Any]:
    import json

    parsed: dict[str, Any] = json.loads(manifest.spark_schema)
    return parsed


def _empty_arrow(schema: Any) -> pa.Table:
    from pyspark.sql.pandas.types import to_arrow_schema

    return to_arrow_schema(schema).empty_table()


@dataclass(frozen=True)
class _TaskReader:
    """The ``mapInArrow`` function of a read: object number -> that object's record batches."""

    access: S3Access = field(repr=False)
    layout: Layout
    keys: RunKeys
    objects: tuple[ObjectEntry, ...]
    verify: bool
    partition: PartitionId

    def __call__(self, batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        store = Objects(client_for(self.access), self.layout)
        for batch in batches:
            for number in batch.column(0).to_pylist():
                entry = self.objects[number]
                yield from load_table(store, self.keys, entry, self.verify, self.partition).to_batches()


def read_dataframe(spark: SparkSession, source: Source, manifest: Manifest, verify: bool, mode: str,
                   objects: tuple[ObjectEntry, ...] | None = None, jvm: s3a.Mode = s3a.Mode.OFF,
                   checked: list[JvmRead] | None = None, verify_jvm: bool = False) -> DataFrame:
    """The committed version as a DataFrame (lazy with ``executors``; fetched now with ``driver``); ``objects``:
    only these of its objects (a subpartition selection), default all; ``jvm``: whether Spark's own reader may
    read them (module rule); a read given to Spark's own reader is added to ``checked``, so that the writer of
    what it computes confirms the objects unchanged before it commits (:func:`confirm_unchanged`); with
    ``verify_jvm`` their bytes are hashed too, in a thread (:func:`jvm_read`)."""
    from pyspark.sql.types import StructType

    schema = StructType.fromJson(_schema_json(manifest))
    chosen = manifest.objects if objects is None else objects
    if not chosen:
        return spark.createDataFrame([], schema)
    if mode == "driver":
        table = read_arrow(source.objects(), source.keys, dataclasses.replace(manifest, objects=chosen), verify,
                           source.threads)
        return spark.createDataFrame(table, schema=schema)
    keys = manifest_keys(source.keys, chosen)
    if jvm is not s3a.Mode.OFF and (not verify or _checked(source, manifest, chosen)):
        with phase("read_probe"):
            options = s3a.jvm_reader(spark, source.layout, source.access, jvm, keys[0])
        if options is not None:
            urls = [s3a.url(source.layout.bucket, key) for key in keys]
            with phase("read_resolve"):
                read = listed.read(spark, options, urls, [e.size for e in chosen], schema) if verify else None
                if read is None:
                    with s3a.listed_on_driver(spark, len(urls)):
                        read = spark.read.options(**options).schema(schema).parquet(*urls)
                        _ = read.schema  # Spark Connect resolves (lists) lazily: now, inside the block
            with phase("read_restore"):
                frame = nullability.restore(read, schema)
            if frame is not None:
                if checked is not None:
                    checked.append(jvm_read(source.objects(), manifest, chosen, verify_jvm, source.threads))
                return frame
    count = len(chosen)
    reader = _TaskReader(portable(source.access), source.layout, source.keys, chosen, verify, manifest.partition)
    return spark.range(0, count, 1, count).mapInArrow(reader, schema)


def _checked(source: Source, manifest: Manifest, chosen: tuple[ObjectEntry, ...]) -> bool:
    """:func:`stored_checksums_match` for ``source``'s objects, timed as the task's ``read_check`` phase."""
    with phase("read_check"):
        return stored_checksums_match(source.objects(), manifest, chosen)


def stored_checksums_match(objects: Objects, manifest: Manifest, chosen: tuple[ObjectEntry, ...],
                           threads: int = 16) -> bool:
    """Whether S3 keeps, with every ``chosen`` object of ``manifest``, the full-object SHA-256 the manifest records
    (``False``: one has none, so only hashing its bytes can verify it); an :func:`unreadable` error naming the
    partition and the object when one is missing, of another size, or has another SHA-256 (a shared one is moved
    aside first, :func:`..content.quarantine`)."""
    return _check_stored_all(objects, manifest, chosen, threads)


def _check_stored_all(objects: Objects, manifest: Manifest, chosen: tuple[ObjectEntry, ...], threads: int = 16,
                      after_read: bool = False) -> bool:
    """:func:`stored_checksums_match`, ``threads`` objects at a time; ``after_read`` (:func:`confirm_unchanged`):
    an object S3 now keeps no SHA-256 for is hashed instead, and a problem is said to be found after Spark read."""
    keys = objects.layout.run(manifest.dag_id, manifest.run_id)
    found_when = " (found after Spark read it)" if after_read else ""

    def stored(entry: ObjectEntry) -> bool:
        key = keys.object_key(entry.key, entry.shared)
        verdict = check_stored(objects, key, entry)
        if verdict.problem:
            if verdict.found is not None:
                quarantine(objects, objects.layout, entry, verdict.found.etag, verdict.problem)
            raise unreadable(manifest.partition, f"object {key} listed in its manifest {verdict.problem}{found_when}")
        kept = verdict.found is not None and verdict.found.sha256 is not None
        if after_read and not kept:
            fetch(objects, keys, entry, True, manifest.partition)
        return kept

    with ThreadPoolExecutor(max_workers=max(1, min(threads, len(chosen)))) as pool:
        return all(list(pool.map(stored, chosen)))


@dataclass(frozen=True)
class JvmRead:
    """Objects of ``manifest`` given to Spark's own reader after their stored SHA-256 was checked; ``hashing``: the
    thread hashing their bytes (``store_verify_jvm_reads``, :func:`jvm_read`), ``None`` when not verified."""

    manifest: Manifest
    objects: tuple[ObjectEntry, ...]
    hashing: Future[None] | None = field(default=None, compare=False, repr=False)


def jvm_read(objects: Objects, manifest: Manifest, chosen: tuple[ObjectEntry, ...], verify: bool,
             threads: int = 4) -> JvmRead:
    """The record of a read given to Spark's own reader. The trust boundary: that reader trusts the SHA-256 the
    server keeps with each object (checked by a HEAD before it reads), never the bytes it is served. With
    ``verify`` (``[region_failover] store_verify_jvm_reads``) a thread starts now, off Spark's critical path, and
    streams and hashes every object (``threads`` at a time, one chunk each in memory); :func:`confirm_unchanged`
    waits for it before a result computed from the read is committed, and an object that does not hash to its
    name is moved aside and fails the try naming the partition and the object (:func:`verify_bytes`)."""
    if not verify:
        return JvmRead(manifest, chosen)
    pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="verify-jvm-read")
    hashing = pool.submit(verify_bytes, objects, manifest, chosen, threads)
    pool.shutdown(wait=False)  # the thread ends when the hashing is done
    return JvmRead(manifest, chosen, hashing)


def verify_bytes(objects: Objects, manifest: Manifest, chosen: tuple[ObjectEntry, ...], threads: int = 4) -> None:
    """Stream and hash every ``chosen`` object of ``manifest``, ``threads`` at a time; an :func:`unreadable` error
    naming the partition and the first object that is not what its manifest records (a shared one moved aside or,
    if the server cannot serve it, marked suspect first: :func:`fetch`'s rules)."""
    keys = objects.layout.run(manifest.dag_id, manifest.run_id)

    def one(entry: ObjectEntry) -> None:
        key = keys.object_key(entry.key, entry.shared)
        try:
            opened = objects.open(key)
        except ObjectUnservable as exc:
            mark_suspect(objects, objects.layout, entry, f"cannot be read: {exc}")
            raise unreadable(manifest.partition, f"object {key} listed in its manifest cannot be read: {exc} "
                             "(found after Spark read it)") from exc
        if opened is None:
            raise unreadable(manifest.partition, f"object {key} listed in its manifest is missing (found after "
                             "Spark read it)")
        digest, size = hashlib.sha256(), 0
        for chunk in objects.chunks(key, opened.body):
            digest.update(chunk)
            size += len(chunk)
        if size != entry.size or digest.hexdigest() != entry.sha256:
            problem = f"has {size} bytes, its manifest says {entry.size}" if size != entry.size else \
                "does not match the SHA-256 in its manifest"
            quarantine(objects, objects.layout, entry, opened.etag, problem)
            raise unreadable(manifest.partition, f"object {key} listed in its manifest {problem} (the bytes Spark's "
                             "reader was served, hashed after it read them)")

    with ThreadPoolExecutor(max_workers=max(1, min(threads, len(chosen)))) as pool:
        list(pool.map(one, chosen))


def confirm_unchanged(objects: Objects, reads: Iterable[JvmRead]) -> None:
    """Before a result computed from ``reads`` is committed (module rule): Spark read them *after* their stored
    SHA-256 was checked, when the job ran; every object must still have its recorded size and that SHA-256, or,
    where S3 now keeps none (replaced by a plain PUT), hash to it. Else the object is moved aside and an
    :func:`unreadable` error names the partition: the computed result is not committed. A verified read
    (:func:`jvm_read`) is waited for first: its hashing's error is raised here."""
    for read in reads:
        if read.hashing is not None:
            read.hashing.result()
        _check_stored_all(objects, read.manifest, read.objects, after_read=True)


_CAS_OBJECT = re.compile(r"cas/v1/[0-9a-f]{2}/([0-9a-f]{64})\.parquet")


def recheck_named(objects: Objects, manifests: Iterable[Manifest], text: str) -> None:
    """Hash every shared object of ``manifests`` whose key ``text`` names (a Spark reader's error: Spark's own
    reader names the file it could not read, and an object may change after the stored-checksum check that let the
    JVM read it); an :func:`unreadable` error naming the partition (the object moved aside first, :func:`fetch`)
    for the first one that is not what its manifest records. Nothing is raised when every named object is right:
    the error was something else."""
    named = set(_CAS_OBJECT.findall(text))
    for manifest in manifests:
        keys = objects.layout.run(manifest.dag_id, manifest.run_id)
        for entry in manifest.objects:
            if entry.shared and entry.sha256 in named:
                fetch(objects, keys, entry, True, manifest.partition)


def manifest_keys(keys: RunKeys, chosen: tuple[ObjectEntry, ...]) -> list[str]:
    """The S3 keys of ``chosen`` manifest entries."""
    return [keys.object_key(e.key, e.shared) for e in chosen]

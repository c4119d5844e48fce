"""The manifest: the format-versioned JSON commit record of one attempt of one result partition.

A manifest names the run, the result partition, the producer attempt and writer, the Arrow/Spark schema, the row
count, and every data object (size, SHA-256 and key). Version 2 (written now) lists *shared* objects: content-
addressed, keyed ``<h[:2]>/<h>.parquet`` relative to the shared area ``<prefix>/cas/v1/`` (:mod:`.content`) and
marked ``"shared": true``; version 1 manifests (older writers) list keys relative to the run prefix and are still
read (an entry without the mark is run-scoped in either version). A shared entry's key must be the name of its
own hash, so a manifest can never point a reader at another object. Its ``content_checksum`` is the
SHA-256 of the objects' ``size:sha256`` lines in order: equal checksums mean byte-identical partitions. ``inputs``
(optional; absent in manifests of older writers) lists the BLOCKING input versions the producing try read, and
``code`` (optional) the fingerprint of the code that computed it: together they let a restarted consumer keep its
result when neither changed (:mod:`..spark.reuse`).

A partition written for a keyed exchange (:mod:`..graph.keygroups`) carries its ``partitioning``: the key columns,
the number of key groups, and one entry per *subpartition* (the key-group range it covers, its rows, bytes and
content checksum); each of its objects names the subpartition it holds. :meth:`Manifest.select` picks what a
reader of some key groups must read: exactly the subpartitions whose ranges overlap them, or — when the
partition was cut another way (another key or number of key groups, or not at all) — every object, then
filtered. An :class:`InputVersion` records the checksum of exactly the objects its reader read (and the key
groups), so a consumer is compared on the bytes it reads, not on the whole partition. Decoding rejects unknown
formats, versions and every malformed field (also subpartitions that disagree with the objects), naming the
manifest's key.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from typing import Any

from airflow_region_failover.exceptions import ManifestError
from airflow_region_failover.graph.errors import RegionFailoverError
from airflow_region_failover.graph.ids import PartitionId

FORMAT = "airflow-region-failover/result-manifest"
VERSION = 2
READABLE_VERSIONS = frozenset({1, 2})
"""Manifest versions this store reads: 1 (run-scoped objects only) and 2 (shared, content-addressed objects)."""
RETIREMENT_VERSION = 1


@dataclass(frozen=True)
class ObjectEntry:
    """One data object of a partition: ``key`` relative to the run prefix (``shared``: relative to the shared area,
    then ``<sha256[:2]>/<sha256>.parquet``), its ``size`` and ``sha256``, and the subpartition it holds (``-1``:
    the partition is not cut into subpartitions)."""

    key: str
    size: int
    sha256: str
    subpartition: int = -1
    shared: bool = False

    def to_dict(self) -> dict[str, Any]:
        """JSON form (inside a manifest)."""
        body: dict[str, Any] = {"key": self.key, "size": self.size, "sha256": self.sha256}
        if self.subpartition >= 0:
            body["subpartition"] = self.subpartition
        if self.shared:
            body["shared"] = True
        return body

    @classmethod
    def from_dict(cls, body: dict[str, Any], version: int) -> ObjectEntry:
        """Parse the JSON form; a shared entry (version 2 only) must be keyed by its own hash."""
        shared = body.get("shared", False)
        if not isinstance(shared, bool) or (shared and version < 2):
            raise ValueError(f"object {body.get('key')!r}: 'shared' must be a boolean of a version-2 manifest")
        entry = cls(_str(body["key"]), _int(body["size"]), _str(body["sha256"]),
                    _int(body["subpartition"]) if "subpartition" in body else -1, shared)
        if shared and entry.key != f"{entry.sha256[:2]}/{entry.sha256}.parquet":
            raise ValueError(f"shared object {entry.key!r} is not named by its SHA-256 {entry.sha256!r}")
        return entry


@dataclass(frozen=True)
class Subpartition:
    """Subpartition ``index`` of a keyed partition: the key groups ``key_groups`` it holds, its rows, its bytes
    and the content checksum of its objects."""

    index: int
    key_groups: range
    rows: int
    bytes: int
    content_checksum: str

    def to_dict(self) -> dict[str, Any]:
        """JSON form (inside a manifest)."""
        return {"index": self.index, "key_groups": [self.key_groups.start, self.key_groups.stop],
                "rows": self.rows, "bytes": self.bytes, "content_checksum": self.content_checksum}


@dataclass(frozen=True)
class Partitioning:
    """How a keyed partition is cut: ``partition_by`` hashed into ``max_parallelism`` key groups, one
    subpartition per key-group range in ``subpartitions`` (index order)."""

    partition_by: tuple[str, ...]
    max_parallelism: int
    subpartitions: tuple[Subpartition, ...]

    def to_dict(self) -> dict[str, Any]:
        """JSON form (inside a manifest)."""
        return {"partition_by": list(self.partition_by), "max_parallelism": self.max_parallelism,
                "subpartitions": [s.to_dict() for s in self.subpartitions]}


@dataclass(frozen=True)
class Selection:
    """What a reader of some key groups reads from one manifest: ``objects``; ``filtered``: rows of other key
    groups are among them and must be dropped; ``content_checksum``: of exactly ``objects``."""

    objects: tuple[ObjectEntry, ...]
    filtered: bool
    content_checksum: str

    @property
    def bytes(self) -> int:
        """The bytes the reader fetches."""
        return sum(o.size for o in self.objects)


def content_checksum(objects: tuple[ObjectEntry, ...]) -> str:
    """SHA-256 over ``"<size>:<sha256>\\n"`` of every object, in manifest order."""
    digest = hashlib.sha256()
    for entry in objects:
        digest.update(f"{entry.size}:{entry.sha256}\n".encode())
    return digest.hexdigest()


@dataclass(frozen=True)
class InputVersion:
    """One BLOCKING input partition version the producing try read: its attempt and the content checksum of the
    objects it read — the whole partition, or, for a reader of ``key_groups``, its selection (:meth:`Manifest.select`).
    """

    partition: PartitionId
    attempt: int
    content_checksum: str
    key_groups: range | None = None

    def to_dict(self) -> dict[str, Any]:
        """JSON form (inside a manifest)."""
        body: dict[str, Any] = {"partition": str(self.partition), "attempt": self.attempt,
                                "content_checksum": self.content_checksum}
        if self.key_groups is not None:
            body["key_groups"] = [self.key_groups.start, self.key_groups.stop]
        return body

    @classmethod
    def from_dict(cls, body: dict[str, Any]) -> InputVersion:
        """Parse the JSON form (``KeyError``/``TypeError``/``ValueError`` when malformed)."""
        groups = _range(body["key_groups"]) if "key_groups" in body else None
        return cls(PartitionId.parse(_str(body["partition"])), _int(body["attempt"]), _str(body["content_checksum"]),
                   groups)


@dataclass(frozen=True)
class Manifest:
    """The commit record of ``partition`` produced by ``attempt`` (writer token ``writer``) in one DAG run."""

    dag_id: str
    run_id: str
    partition: PartitionId
    attempt: int
    writer: str
    spark_schema: str
    row_count: int
    objects: tuple[ObjectEntry, ...]
    committed_at: str
    content_checksum: str = ""
    inputs: tuple[InputVersion, ...] = ()
    code: str = ""
    partitioning: Partitioning | None = None

    def __post_init__(self) -> None:
        if not self.content_checksum:
            object.__setattr__(self, "content_checksum", content_checksum(self.objects))

    def version(self, key_groups: range | None = None, partition_by: tuple[str, ...] = (),
                max_parallelism: int = 0) -> InputVersion:
        """This commit as a consumer of ``key_groups`` (``None``: the whole partition) records it."""
        if key_groups is None:
            return InputVersion(self.partition, self.attempt, self.content_checksum)
        selection = self.select(key_groups, partition_by, max_parallelism)
        return InputVersion(self.partition, self.attempt, selection.content_checksum, key_groups)

    def select(self, key_groups: range | None, partition_by: tuple[str, ...] = (),
               max_parallelism: int = 0) -> Selection:
        """What a reader of ``key_groups`` of a ``partition_by`` / ``max_parallelism`` exchange reads (module
        rule): the overlapping subpartitions when this partition is cut the same way, else every object."""
        cut = self.partitioning
        if key_groups is None or cut is None or (cut.partition_by, cut.max_parallelism) != (partition_by,
                                                                                             max_parallelism):
            return Selection(self.objects, key_groups is not None, self.content_checksum)
        chosen = [s for s in cut.subpartitions
                  if s.key_groups.start < key_groups.stop and key_groups.start < s.key_groups.stop]
        indices = {s.index for s in chosen}
        objects = tuple(o for o in self.objects if o.subpartition in indices)
        filtered = any(s.key_groups.start < key_groups.start or s.key_groups.stop > key_groups.stop for s in chosen)
        return Selection(objects, filtered, content_checksum(objects))

    @property
    def total_bytes(self) -> int:
        """The sum of the objects' sizes."""
        return sum(entry.size for entry in self.objects)

    def to_json(self) -> bytes:
        """The manifest as canonical JSON bytes (sorted keys)."""
        body: dict[str, Any] = {
            "format": FORMAT,
            "version": VERSION,
            "dag_id": self.dag_id,
            "run_id": self.run_id,
            "result": self.partition.result,
            "partition": self.partition.index,
            "attempt": self.attempt,
            "writer": self.writer,
            "schema": self.spark_schema,
            "row_count": self.row_count,
            "objects": [o.to_dict() for o in self.objects],
            "content_checksum": self.content_checksum,
            "committed_at": self.committed_at,
        }
        if self.inputs:
            body["inputs"] = [i.to_dict() for i in self.inputs]
        if self.code:
            body["code"] = self.code
        if self.partitioning is not None:
            body["partitioning"] = self.partitioning.to_dict()
        return json.dumps(body, sort_keys=True, separators=(",", ":")).encode()

    @classmethod
    def from_json(cls, data: bytes, *, where: str) -> Manifest:
        """Decode and validate; :class:`ManifestError` naming ``where`` (the key) on any problem."""
        body = json_document(data, f"manifest {where}", FORMAT, READABLE_VERSIONS)
        try:
            return cls._from_body(body)
        except (KeyError, TypeError, ValueError, RegionFailoverError) as exc:
            raise ManifestError(f"manifest {where} is malformed: {exc!r}") from None

    @classmethod
    def _from_body(cls, body: dict[str, Any]) -> Manifest:
        objects = tuple(ObjectEntry.from_dict(o, body["version"]) for o in body["objects"])
        manifest = cls(
            dag_id=_str(body["dag_id"]),
            run_id=_str(body["run_id"]),
            partition=PartitionId(_str(body["result"]), _int(body["partition"])),
            attempt=_int(body["attempt"]),
            writer=_str(body["writer"]),
            spark_schema=_str(body["schema"]),
            row_count=_int(body["row_count"]),
            objects=objects,
            committed_at=_str(body["committed_at"]),
            content_checksum=_str(body["content_checksum"]),
            inputs=tuple(InputVersion.from_dict(i) for i in body.get("inputs", ())),
            code=_str(body.get("code", "")),
            partitioning=_partitioning(body["partitioning"], objects) if "partitioning" in body else None,
        )
        if manifest.content_checksum != content_checksum(objects):
            raise ValueError("content_checksum does not match the listed objects")
        if manifest.partitioning is None and any(o.subpartition >= 0 for o in objects):
            raise ValueError("objects name subpartitions but the manifest has no partitioning")
        return manifest


def json_document(data: bytes, what: str, kind: str, versions: frozenset[int]) -> dict[str, Any]:
    """The JSON object of a store record ``what`` (e.g. ``"manifest <key>"``) whose ``format`` is ``kind`` and
    ``version`` one of ``versions``; :class:`ManifestError` naming ``what`` otherwise."""
    try:
        body = json.loads(data)
    except (ValueError, UnicodeDecodeError) as exc:
        raise ManifestError(f"{what} is not JSON: {exc}") from None
    if not isinstance(body, dict) or body.get("format") != kind:
        raise ManifestError(f"{what} is not a {kind} document")
    if body.get("version") not in versions:
        raise ManifestError(f"{what} has version {body.get('version')!r}; this store reads {sorted(versions)}")
    return body


def partitioning(partition_by: tuple[str, ...], max_parallelism: int, ranges: tuple[range, ...],
                 objects: tuple[ObjectEntry, ...], rows: dict[int, int]) -> Partitioning:
    """The partitioning of a keyed partition written as ``objects`` (``rows``: per subpartition)."""
    subs = []
    for index, groups in enumerate(ranges):
        mine = tuple(o for o in objects if o.subpartition == index)
        subs.append(Subpartition(index, groups, rows.get(index, 0), sum(o.size for o in mine),
                                 content_checksum(mine)))
    return Partitioning(partition_by, max_parallelism, tuple(subs))


def _partitioning(body: dict[str, Any], objects: tuple[ObjectEntry, ...]) -> Partitioning:
    """Parse and check a manifest's partitioning against its objects (``ValueError`` when they disagree)."""
    cut = partitioning(tuple(_str(c) for c in body["partition_by"]), _int(body["max_parallelism"]),
                       tuple(_range(s["key_groups"]) for s in body["subpartitions"]), objects,
                       {_int(s["index"]): _int(s["rows"]) for s in body["subpartitions"]})
    if any(not 0 <= o.subpartition < len(cut.subpartitions) for o in objects):
        raise ValueError("an object names a subpartition the partitioning does not list")
    listed = tuple((_int(s["index"]), _int(s["bytes"]), _str(s["content_checksum"])) for s in body["subpartitions"])
    if listed != tuple((s.index, s.bytes, s.content_checksum) for s in cut.subpartitions):
        raise ValueError("subpartitions do not match the listed objects")
    return cut


def _range(value: object) -> range:
    if not isinstance(value, list) or len(value) != 2:
        raise TypeError(f"expected [start, stop], got {value!r}")
    start, stop = _int(value[0]), _int(value[1])
    if stop <= start:
        raise ValueError(f"empty key-group range {value!r}")
    return range(start, stop)


def _str(value: object) -> str:
    if not isinstance(value, str):
        raise TypeError(f"expected a string, got {value!r}")
    return value


def _int(value: object) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise TypeError(f"expected a non-negative integer, got {value!r}")
    return value


@dataclass(frozen=True)
class Retirement:
    """Marker that ``attempt`` of ``partition`` is retired: no reader uses it, no commit at or below it counts.

    ``content_checksum`` is the retired manifest's (empty if the attempt never committed), so the failover
    loop can compare a re-produced result with what consumers read before.
    """

    partition: PartitionId
    attempt: int
    content_checksum: str
    reason: str
    retired_at: str

    def to_json(self) -> bytes:
        """The marker as JSON bytes."""
        body = {
            "format": FORMAT + "/retired", "version": RETIREMENT_VERSION, "result": self.partition.result,
            "partition": self.partition.index, "attempt": self.attempt,
            "content_checksum": self.content_checksum, "reason": self.reason, "retired_at": self.retired_at,
        }
        return json.dumps(body, sort_keys=True, separators=(",", ":")).encode()

    @classmethod
    def from_json(cls, data: bytes, *, where: str) -> Retirement:
        """Decode a marker; :class:`ManifestError` naming ``where`` on any problem."""
        try:
            body = json.loads(data)
            return cls(PartitionId(_str(body["result"]), _int(body["partition"])), _int(body["attempt"]),
                       _str(body["content_checksum"]), _str(body["reason"]), _str(body["retired_at"]))
        except (ValueError, KeyError, TypeError, UnicodeDecodeError) as exc:
            raise ManifestError(f"retirement marker {where} is malformed: {exc!r}") from None

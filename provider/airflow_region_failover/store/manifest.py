"""The manifest: the format-versioned JSON commit record of one attempt of one result partition.

A manifest names the run, the result partition, the producer attempt and writer, the Arrow/Spark schema, the row
count, and every data object (key relative to the run prefix, size, SHA-256). Its ``content_checksum`` is the
SHA-256 of the objects' ``size:sha256`` lines in order: equal checksums mean byte-identical partitions. ``inputs``
(optional; absent in manifests of older writers) lists the BLOCKING input versions the producing try read, and
``code`` (optional) the fingerprint of the code that computed it: together they let a restarted consumer keep its
result when neither changed (:mod:`..spark.reuse`). Decoding
rejects unknown formats, versions and every malformed field, naming the manifest's key.
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
VERSION = 1


@dataclass(frozen=True)
class ObjectEntry:
    """One data object of a partition: ``key`` relative to the run prefix, its ``size`` and ``sha256``."""

    key: str
    size: int
    sha256: str


def content_checksum(objects: tuple[ObjectEntry, ...]) -> str:
    """SHA-256 over ``"<size>:<sha256>\\n"`` of every object, in manifest order."""
    digest = hashlib.sha256()
    for entry in objects:
        digest.update(f"{entry.size}:{entry.sha256}\n".encode())
    return digest.hexdigest()


@dataclass(frozen=True)
class InputVersion:
    """One BLOCKING input partition version the producing try read: its attempt and content checksum."""

    partition: PartitionId
    attempt: int
    content_checksum: str

    def to_dict(self) -> dict[str, Any]:
        """JSON form (inside a manifest)."""
        return {"partition": str(self.partition), "attempt": self.attempt, "content_checksum": self.content_checksum}

    @classmethod
    def from_dict(cls, body: dict[str, Any]) -> InputVersion:
        """Parse the JSON form (``KeyError``/``TypeError``/``ValueError`` when malformed)."""
        return cls(PartitionId.parse(_str(body["partition"])), _int(body["attempt"]), _str(body["content_checksum"]))


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

    def __post_init__(self) -> None:
        if not self.content_checksum:
            object.__setattr__(self, "content_checksum", content_checksum(self.objects))

    def version(self) -> InputVersion:
        """This commit as a consumer records it: partition, attempt and content checksum."""
        return InputVersion(self.partition, self.attempt, self.content_checksum)

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
            "objects": [{"key": o.key, "size": o.size, "sha256": o.sha256} for o in self.objects],
            "content_checksum": self.content_checksum,
            "committed_at": self.committed_at,
        }
        if self.inputs:
            body["inputs"] = [i.to_dict() for i in self.inputs]
        if self.code:
            body["code"] = self.code
        return json.dumps(body, sort_keys=True, separators=(",", ":")).encode()

    @classmethod
    def from_json(cls, data: bytes, *, where: str) -> Manifest:
        """Decode and validate; :class:`ManifestError` naming ``where`` (the key) on any problem."""
        try:
            body = json.loads(data)
        except (ValueError, UnicodeDecodeError) as exc:
            raise ManifestError(f"manifest {where} is not JSON: {exc}") from None
        if not isinstance(body, dict) or body.get("format") != FORMAT:
            raise ManifestError(f"manifest {where} is not a {FORMAT} document")
        if body.get("version") != VERSION:
            raise ManifestError(f"manifest {where} has version {body.get('version')!r}; this store reads {VERSION}")
        try:
            return cls._from_body(body)
        except (KeyError, TypeError, ValueError, RegionFailoverError) as exc:
            raise ManifestError(f"manifest {where} is malformed: {exc!r}") from None

    @classmethod
    def _from_body(cls, body: dict[str, Any]) -> Manifest:
        objects = tuple(
            ObjectEntry(_str(o["key"]), _int(o["size"]), _str(o["sha256"])) for o in body["objects"]
        )
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
        )
        if manifest.content_checksum != content_checksum(objects):
            raise ValueError("content_checksum does not match the listed objects")
        return manifest


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
            "format": FORMAT + "/retired", "version": VERSION, "result": self.partition.result,
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

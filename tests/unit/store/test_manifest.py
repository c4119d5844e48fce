"""Manifest format: versioned, round-trips, content checksum over objects, malformed input named."""

from __future__ import annotations

import json
from typing import Any

import pytest

from airflow_region_failover.exceptions import ManifestError
from airflow_region_failover.graph.ids import PartitionId
from airflow_region_failover.store.manifest import InputVersion, Manifest, ObjectEntry, Retirement

OBJECTS = (ObjectEntry("r/data/p00000/a000001-abcdef12/part-00000-t0.parquet", 10, "a" * 64),)


def manifest(**changes: object) -> Manifest:
    values: dict[str, object] = dict(dag_id="d", run_id="r", partition=PartitionId("a->b", 0), attempt=1,
                                     writer="abcdef12", spark_schema="{}", row_count=5, objects=OBJECTS,
                                     committed_at="2026-01-01T00:00:00+00:00")
    values.update(changes)
    return Manifest(**values)  # type: ignore[arg-type]


def test_round_trip_and_checksum() -> None:
    m = manifest()
    assert Manifest.from_json(m.to_json(), where="k") == m
    assert m.content_checksum == manifest(attempt=2, writer="12345678").content_checksum  # same bytes
    assert m.content_checksum != manifest(objects=(ObjectEntry(OBJECTS[0].key, 10, "b" * 64),)).content_checksum


def test_input_versions_round_trip_and_are_optional() -> None:
    """``inputs`` records what the producing try read; manifests of older writers (no field) decode to ()."""
    inputs = (InputVersion(PartitionId("x->a", 0), 2, "c" * 64), InputVersion(PartitionId("x->a", 1), 1, "d" * 64))
    m = manifest(inputs=inputs)
    assert Manifest.from_json(m.to_json(), where="k").inputs == inputs
    assert "inputs" not in json.loads(manifest().to_json())
    assert Manifest.from_json(manifest().to_json(), where="k").inputs == ()
    body = json.loads(m.to_json())
    body["inputs"][0]["partition"] = "no-index"
    with pytest.raises(ManifestError, match="malformed"):
        Manifest.from_json(json.dumps(body).encode(), where="k")


@pytest.mark.parametrize("mutate, message", [
    (lambda b: b.update(version=3), "version 3"),
    (lambda b: b.update(format="other"), "not a"),
    (lambda b: b.update(row_count=-1), "malformed"),
    (lambda b: b.update(content_checksum="0" * 64), "malformed"),
    (lambda b: b.pop("objects"), "malformed"),
])
def test_bad_manifests_are_named(mutate, message) -> None:  # type: ignore[no-untyped-def]
    body = json.loads(manifest().to_json())
    mutate(body)
    with pytest.raises(ManifestError, match=f"manifest KEY.*{message}|{message}.*"):
        Manifest.from_json(json.dumps(body).encode(), where="KEY")


def test_not_json_is_named() -> None:
    with pytest.raises(ManifestError, match="manifest KEY is not JSON"):
        Manifest.from_json(b"\xff{", where="KEY")


def test_retirement_round_trip() -> None:
    marker = Retirement(PartitionId("a", 1), 3, "c" * 64, "why", "now")
    assert Retirement.from_json(marker.to_json(), where="k") == marker


def keyed(shas: tuple[str, ...] = ("a", "b", "c")) -> Manifest:
    """Subpartitions 0..2 of 3 consumers (128 key groups), one object each, subpartition 2 written twice."""
    from airflow_region_failover.graph.keygroups import key_group_range
    from airflow_region_failover.store.manifest import partitioning

    objects = tuple(ObjectEntry(f"r/data/p00000/a000001-abcdef12/part-0000{n}-s{j:05d}-t0.parquet", 10 + j,
                                sha * 64, j) for n, (j, sha) in enumerate(zip((0, 1, 2), shas, strict=True)))
    objects += (ObjectEntry("r/data/p00000/a000001-abcdef12/part-00009-s00002-t0.parquet", 5, "d" * 64, 2),)
    ranges = tuple(key_group_range(128, 3, j) for j in range(3))
    return manifest(objects=objects, partitioning=partitioning(("k",), 128, ranges, objects, {0: 1, 1: 2, 2: 3}))


def test_keyed_manifest_round_trips_and_lists_each_subpartition() -> None:
    m = keyed()
    assert Manifest.from_json(m.to_json(), where="k") == m
    assert m.partitioning is not None
    assert [(s.index, s.key_groups, s.rows, s.bytes) for s in m.partitioning.subpartitions] == [
        (0, range(0, 43), 1, 10), (1, range(43, 86), 2, 11), (2, range(86, 128), 3, 17)]


def test_a_reader_selects_exactly_its_subpartitions_or_everything_filtered() -> None:
    m = keyed()
    mine = m.select(range(43, 86), ("k",), 128)
    assert [o.subpartition for o in mine.objects] == [1] and not mine.filtered and mine.bytes == 11
    last = m.select(range(86, 128), ("k",), 128)
    assert [o.subpartition for o in last.objects] == [2, 2] and not last.filtered
    rescaled = m.select(range(0, 64), ("k",), 128)  # consumer 0 of 2: subpartitions 0 and half of 1
    assert [o.subpartition for o in rescaled.objects] == [0, 1] and rescaled.filtered
    other_key = m.select(range(43, 86), ("j",), 128)
    assert other_key.objects == m.objects and other_key.filtered
    assert m.select(None).objects == m.objects and not m.select(None).filtered


def test_an_input_version_is_the_checksum_of_what_its_reader_reads() -> None:
    """Subpartition 0 changed: readers of key groups 43-85 still see the same bytes; readers of 0-42 do not."""
    before, after = keyed(), keyed(("X", "b", "c"))
    assert before.version(range(43, 86), ("k",), 128) == after.version(range(43, 86), ("k",), 128)
    assert before.version(range(0, 43), ("k",), 128) != after.version(range(0, 43), ("k",), 128)
    assert before.version() != after.version()


@pytest.mark.parametrize("tamper, message", [
    (lambda b: b["partitioning"]["subpartitions"][0].update(bytes=99), "subpartitions do not match"),
    (lambda b: b["objects"][0].update(subpartition=7), "names a subpartition the partitioning does not list"),
    (lambda b: b["partitioning"]["subpartitions"][0].update(key_groups=[5, 5]), "empty key-group range"),
    (lambda b: b.pop("partitioning"), "objects name subpartitions but the manifest has no partitioning"),
])
def test_a_keyed_manifest_that_disagrees_with_its_objects_is_refused(tamper: Any, message: str) -> None:
    body = json.loads(keyed().to_json())
    tamper(body)
    with pytest.raises(ManifestError, match=message):
        Manifest.from_json(json.dumps(body).encode(), where="k")

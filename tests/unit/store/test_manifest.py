"""Manifest format: versioned, round-trips, content checksum over objects, malformed input named."""

from __future__ import annotations

import json

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
    (lambda b: b.update(version=2), "version 2"),
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

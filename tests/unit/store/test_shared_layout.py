"""Shared area layout and manifest version 2: content-addressed keys stay under ``<prefix>/cas/v1/``, are named
only by a checked SHA-256, and version-1 manifests (run-scoped objects) are still read."""

from __future__ import annotations

import hashlib
import json

import pytest

from airflow_region_failover.exceptions import ManifestError, UnsafeKeyError
from airflow_region_failover.graph.ids import PartitionId
from airflow_region_failover.store.key_checks import cas_name
from airflow_region_failover.store.keys import Layout
from airflow_region_failover.store.manifest import Manifest, ObjectEntry, content_checksum

LAYOUT = Layout("results-bucket", "team/region-failover")
SHA = hashlib.sha256(b"body").hexdigest()
SHARED = ObjectEntry(cas_name(SHA), 4, SHA, shared=True)
SCOPED = ObjectEntry("r/data/p00000/a000001-abcdef12/part-00000-t0.parquet", 4, SHA)


def manifest(objects: tuple[ObjectEntry, ...]) -> Manifest:
    return Manifest("d", "r", PartitionId("a->b", 0), 1, "abcdef12", "{}", 5, objects, "2026-01-01T00:00:00+00:00")


def test_a_shared_object_lies_in_the_shared_area_outside_the_results_root() -> None:
    key = LAYOUT.cas_object(SHA)
    assert key == f"team/region-failover/cas/v1/{SHA[:2]}/{SHA}.parquet"
    assert LAYOUT.check(key) == key and LAYOUT.check(LAYOUT.cas_root + "/") == LAYOUT.cas_root + "/"
    assert not key.startswith(LAYOUT.root + "/")
    assert LAYOUT.run("etl", "r").object_key(SHARED.key, shared=True) == key


@pytest.mark.parametrize("digest", ["", "A" * 64, "a" * 63, "g" * 64, "../" + "a" * 61, SHA + "\n"])
def test_a_bad_hash_never_becomes_a_key(digest: str) -> None:
    with pytest.raises(UnsafeKeyError, match="SHA-256"):
        LAYOUT.cas_object(digest)


@pytest.mark.parametrize("relative", ["../x.parquet", f"{SHA[2:4]}/{SHA}.parquet", f"{SHA[:2]}/../{SHA}.parquet",
                                      f"{SHA}.parquet", f"{SHA[:2]}/{SHA}.json"])
def test_a_shared_entry_key_must_be_the_name_of_a_hash(relative: str) -> None:
    with pytest.raises(UnsafeKeyError, match="shared object"):
        LAYOUT.run("etl", "r").object_key(relative, shared=True)


def test_keys_beside_the_shared_area_are_refused() -> None:
    for key in ("team/region-failover/cas/v2/x", "team/region-failover/casx/v1/x", "team/cas/v1/x"):
        with pytest.raises(UnsafeKeyError):
            LAYOUT.check(key)


def test_version_2_round_trips_shared_entries_and_keeps_the_checksum_of_the_bytes() -> None:
    m = manifest((SHARED,))
    body = json.loads(m.to_json())
    assert body["version"] == 2 and body["objects"][0]["shared"] is True
    assert Manifest.from_json(m.to_json(), where="k") == m
    assert m.content_checksum == manifest((SCOPED,)).content_checksum == content_checksum((SCOPED,))


def test_version_1_manifests_with_run_scoped_keys_are_still_read() -> None:
    body = json.loads(manifest((SCOPED,)).to_json())
    body["version"] = 1
    read = Manifest.from_json(json.dumps(body).encode(), where="k")
    assert read.objects == (SCOPED,) and not read.objects[0].shared
    body["objects"][0]["shared"] = True
    with pytest.raises(ManifestError, match="shared"):
        Manifest.from_json(json.dumps(body).encode(), where="k")


def test_a_shared_entry_not_named_by_its_hash_is_refused() -> None:
    body = json.loads(manifest((SHARED,)).to_json())
    body["objects"][0]["key"] = cas_name("b" * 64)
    with pytest.raises(ManifestError, match="not named by its SHA-256"):
        Manifest.from_json(json.dumps(body).encode(), where="KEY")

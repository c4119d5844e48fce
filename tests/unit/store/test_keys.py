"""Key layout safety: every key built from validated ids stays under bucket/prefix; tricks are rejected."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from airflow_region_failover.exceptions import GraphError, UnsafeKeyError
from airflow_region_failover.graph.ids import PartitionId
from airflow_region_failover.store.key_checks import decode_airflow_id, encode_airflow_id
from airflow_region_failover.store.keys import AttemptId, Layout

LAYOUT = Layout("results-bucket", "team/region-failover")
P = PartitionId("clean->join", 3)


def test_layout_of_a_partition() -> None:
    keys = LAYOUT.run("etl", "manual__2024-01-01T00:00:00+00:00")
    assert keys.run_prefix == "team/region-failover/v1/etl/manual__2024-01-01T00.3a00.3a00.2b00.3a00/"
    assert keys.manifest(P, 2).endswith("/clean.to.join/manifests/p00003/a000002.json")
    assert keys.retired(P, 2).endswith("/clean.to.join/retired/p00003/a000002.json")
    assert keys.data_object(P, 2, "0123abcd", 7, 1).endswith(
        "/clean.to.join/data/p00003/a000002-0123abcd/part-00007-t1.parquet")
    for key in (keys.manifest(P, 2), keys.data_object(P, 2, "0123abcd", 0), keys.hold("restart")):
        assert LAYOUT.check(key) == key


@pytest.mark.parametrize("run_id", ["..", "../other", "/abs", "a/b", "a\\b", "", "x" * 251, "caf\u00e9", "a\u202eb",
                                    "a\x00b", "a\nb", "\uff0e\uff0e", "a\u2215b"])
def test_bad_run_ids_are_rejected_naming_them(run_id: str) -> None:
    if run_id in {".."}:  # '..' is plain ASCII: it is encoded, never a path segment
        assert "/.." not in LAYOUT.run("etl", run_id).run_prefix
        return
    with pytest.raises(UnsafeKeyError, match="run id"):
        LAYOUT.run("etl", run_id)


@pytest.mark.parametrize("prefix", ["/abs", "a/../b", "a/./b", "..", "a//b", "caf\u00e9", "a b", "a\\b"])
def test_bad_prefixes_are_rejected(prefix: str) -> None:
    with pytest.raises(UnsafeKeyError, match="prefix"):
        Layout("results-bucket", prefix)


@pytest.mark.parametrize("bucket", ["", "A", "ab", "a..b", "192.168.1.1", "bucket/../x", "-bad", "x" * 64])
def test_bad_buckets_are_rejected(bucket: str) -> None:
    with pytest.raises(UnsafeKeyError, match="bucket"):
        Layout(bucket, "p")


@pytest.mark.parametrize("partition", [PartitionId("../x", 0), PartitionId("a/b", 0), PartitionId("a", -1),
                                       PartitionId("a", True), PartitionId("\u00e9", 0), "a#0"])
def test_bad_partitions_are_rejected(partition: object) -> None:
    with pytest.raises(UnsafeKeyError):
        LAYOUT.run("etl", "r").manifest(partition, 1)  # type: ignore[arg-type]


@pytest.mark.parametrize("attempt", [0, -1, True, 1.5, 10**6])
def test_bad_attempts_are_rejected(attempt: object) -> None:
    with pytest.raises(UnsafeKeyError, match="attempt"):
        LAYOUT.run("etl", "r").manifest(P, attempt)  # type: ignore[arg-type]


@pytest.mark.parametrize("key", ["other/v1/x", "team/region-failover/v1/../../x", "team/region-failover/v1//x",
                                 "team/region-failover/v1/./x", "/team/region-failover/v1/x",
                                 "team/region-failover/v1/caf\u00e9", "team/region-failover/v1x/y"])
def test_last_guard_rejects_keys_outside_the_root(key: str) -> None:
    with pytest.raises(UnsafeKeyError, match="outside"):
        LAYOUT.check(key)


@given(st.text(alphabet=st.characters(min_codepoint=32, max_codepoint=126, blacklist_characters="/\\"),
               min_size=1, max_size=60))
def test_airflow_id_encoding_is_injective_plain_and_reversible(value: str) -> None:
    part = encode_airflow_id(value, what="run id")
    assert decode_airflow_id(part) == value
    assert "/" not in part and ".." not in part and part not in {".", ".."}
    key = LAYOUT.run("etl", value).manifest(P, 1)
    assert LAYOUT.check(key) == key


def test_an_attempt_id_round_trips_through_its_json_form() -> None:
    attempt = AttemptId("etl", "manual__1", PartitionId("clean->join", 3), 2)
    assert attempt.to_json() == {"dag_id": "etl", "run_id": "manual__1", "partition": "clean->join#3", "attempt": 2}
    assert AttemptId.from_json(attempt.to_json()) == attempt


@pytest.mark.parametrize("value", [
    None, [], {"dag_id": "etl", "run_id": "r", "partition": "p#0"},
    {"dag_id": "etl", "run_id": "r", "partition": "p#0", "attempt": 0},
    {"dag_id": "etl", "run_id": "r", "partition": "p#0", "attempt": True},
    {"dag_id": "etl", "run_id": 7, "partition": "p#0", "attempt": 1},
    {"dag_id": "etl", "run_id": "r", "partition": "p#0", "attempt": 1, "extra": 1},
    {"dag_id": "etl", "run_id": "r", "partition": "no index", "attempt": 1},
])
def test_a_bad_attempt_id_is_refused_naming_it(value: object) -> None:
    with pytest.raises(GraphError, match=r"attempt id|no index"):
        AttemptId.from_json(value)

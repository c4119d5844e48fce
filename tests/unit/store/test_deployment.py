"""The conditional-write probe (store/deployment.py), against a fake S3 client that ignores conditions: on such
a server every compare-and-swap would silently become last-writer-wins, so the deployment's store refuses to start."""

from __future__ import annotations

import hashlib
from typing import Any

import pytest
from botocore.exceptions import ClientError

from airflow_region_failover.exceptions import StoreError
from airflow_region_failover.store.config import StoreConfig
from airflow_region_failover.store.result_store import ResultStore
from airflow_region_failover.store.s3.clients import S3Access

ENDPOINT = "http://s3.example.internal:9000"


class ConditionsIgnoringS3:
    """A dict-backed S3 client that honours ``If-None-Match`` / ``If-Match`` only when told to."""

    def __init__(self, *, if_none_match: bool, if_match: bool) -> None:
        self.honour_none_match, self.honour_match = if_none_match, if_match
        self.store: dict[str, bytes] = {}

    @staticmethod
    def _error(code: str, status: int, operation: str) -> ClientError:
        return ClientError({"Error": {"Code": code, "Message": code},
                            "ResponseMetadata": {"HTTPStatusCode": status}}, operation)

    @staticmethod
    def _etag(body: bytes) -> str:
        return f'"{hashlib.md5(body).hexdigest()}"'

    def put_object(self, *, Bucket: str, Key: str, Body: bytes, IfNoneMatch: str | None = None,
                   IfMatch: str | None = None, **_: Any) -> dict[str, Any]:
        if IfNoneMatch == "*" and self.honour_none_match and Key in self.store:
            raise self._error("PreconditionFailed", 412, "PutObject")
        if IfMatch is not None and self.honour_match and (
                Key not in self.store or self._etag(self.store[Key]) != IfMatch):
            raise self._error("PreconditionFailed", 412, "PutObject")
        self.store[Key] = bytes(Body)
        return {"ETag": self._etag(self.store[Key])}

    def get_object(self, *, Bucket: str, Key: str, **_: Any) -> dict[str, Any]:
        if Key not in self.store:
            raise self._error("NoSuchKey", 404, "GetObject")
        body = self.store[Key]

        class Body:
            @staticmethod
            def read(amount: int | None = None) -> bytes:
                return body

        return {"Body": Body(), "ETag": self._etag(body), "ContentLength": len(body)}

    def head_object(self, *, Bucket: str, Key: str, **_: Any) -> dict[str, Any]:
        if Key not in self.store:
            raise self._error("404", 404, "HeadObject")
        return {"ContentLength": len(self.store[Key]), "ETag": self._etag(self.store[Key])}

    def delete_objects(self, *, Bucket: str, Delete: dict[str, Any]) -> dict[str, Any]:
        for item in Delete["Objects"]:
            self.store.pop(item["Key"], None)
        return {}


def fake_store(client: ConditionsIgnoringS3) -> ResultStore:
    return ResultStore(StoreConfig("bkt", "team/rf", S3Access(ENDPOINT)), client=client)


@pytest.fixture
def deployment(monkeypatch: pytest.MonkeyPatch) -> Any:
    """Make ``ResultStore.from_airflow`` (what ``default_store`` builds) return a store on a given fake."""
    from airflow_region_failover.decisions import storage as runlog
    from airflow_region_failover.store import result_store

    def use(client: ConditionsIgnoringS3) -> None:
        monkeypatch.setattr(result_store.ResultStore, "from_airflow", classmethod(lambda cls: fake_store(client)))
        result_store.default_store.cache_clear()
        runlog.default_run_logs.cache_clear()

    yield use
    result_store.default_store.cache_clear()
    runlog.default_run_logs.cache_clear()


@pytest.mark.parametrize("if_none_match, if_match, ignored", [
    (False, True, "If-None-Match"), (True, False, "If-Match"), (False, False, "If-None-Match"),
])
def test_the_deployment_store_refuses_a_server_that_ignores_conditions(deployment: Any, if_none_match: bool,
                                                                      if_match: bool, ignored: str) -> None:
    from airflow_region_failover.decisions.storage import default_run_logs
    from airflow_region_failover.store.result_store import default_store

    client = ConditionsIgnoringS3(if_none_match=if_none_match, if_match=if_match)
    deployment(client)
    with pytest.raises(StoreError, match=rf"{ENDPOINT}.*ignored {ignored}"):
        default_store()
    with pytest.raises(StoreError, match=rf"{ENDPOINT}.*ignored {ignored}"):
        default_run_logs()
    assert not [k for k in client.store if "/_probe/" in k]  # the probe cleans up after itself


def test_the_probe_error_is_one_line_with_the_fix() -> None:
    from airflow_region_failover.exceptions import ConditionalWritesUnsupported
    from airflow_region_failover.store.deployment import probe_conditional_writes

    store = fake_store(ConditionsIgnoringS3(if_none_match=False, if_match=True))
    with pytest.raises(ConditionalWritesUnsupported) as caught:
        probe_conditional_writes(store.objects, ENDPOINT)
    message = str(caught.value)
    assert "\n" not in message and ENDPOINT in message and "conditional writes" in message


def test_a_server_that_honours_conditions_passes_and_the_store_is_built_once(deployment: Any) -> None:
    from airflow_region_failover.store.result_store import default_store

    client = ConditionsIgnoringS3(if_none_match=True, if_match=True)
    deployment(client)
    store = default_store()
    assert default_store() is store
    assert [k for k in client.store if "/_probe/" in k] == []
    assert "team/rf/_region_failover_deployment.json" in client.store  # the deployment marks its prefix


def test_a_parent_marker_the_credentials_may_not_read_counts_as_absent(deployment: Any) -> None:
    from airflow_region_failover.store.result_store import default_store

    class ScopedToPrefix(ConditionsIgnoringS3):
        def head_object(self, *, Bucket: str, Key: str, **kwargs: Any) -> dict[str, Any]:
            if not Key.startswith("team/rf/"):
                raise self._error("403", 403, "HeadObject")  # IAM policy scoped to the store prefix
            return super().head_object(Bucket=Bucket, Key=Key, **kwargs)

    client = ScopedToPrefix(if_none_match=True, if_match=True)
    deployment(client)
    assert default_store().layout.prefix == "team/rf"
    assert "team/rf/_region_failover_deployment.json" in client.store

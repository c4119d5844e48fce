"""Fixtures of the store's unit tests: a result store on moto's in-memory S3 (bucket ``bkt``, prefix ``pre``)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from airflow_region_failover.store.result_store import ResultStore
from tests.support.store import moto_store


@pytest.fixture
def store() -> Iterator[ResultStore]:
    with moto_store() as on_moto:
        yield on_moto

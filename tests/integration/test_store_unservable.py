"""An object SeaweedFS lists and HEADs but cannot serve (every GET answered 500 by the test's fault proxy in front
of it, tests/support/s3_faults.py) heals: the read names the partition, the deep check counts the object lost,
the producer's restart overwrites it, and the next read gets the rows.

    producer#0 ==> r#0 (one shared object: GET 500 until it is PUT again) ==> consumer
"""

from __future__ import annotations

import secrets

import pyarrow as pa
import pytest

from airflow_region_failover.exceptions import NotAvailable
from airflow_region_failover.graph.ids import PartitionId
from airflow_region_failover.standalone.seaweedfs import S3Endpoint
from airflow_region_failover.store.availability import Mode
from airflow_region_failover.store.keys import AttemptId
from airflow_region_failover.store.result_store import ResultStore
from tests.support.s3_faults import Fault, FaultProxy

pytestmark = pytest.mark.integration

P = PartitionId("orders->join", 0)
TABLE = pa.table({"s": [secrets.token_hex(16) for _ in range(2_000)]})


def test_an_object_every_get_of_which_fails_is_named_and_rewritten_by_the_producer_restart(
        s3_server: S3Endpoint) -> None:
    with FaultProxy(s3_server.endpoint_url) as proxy:
        store = ResultStore.from_endpoint(proxy.endpoint_url, s3_server.access_key, s3_server.secret_key,
                                          s3_server.bucket, prefix=f"it-{secrets.token_hex(4)}", max_attempts=2)
        (entry,) = store.write_arrow(TABLE, AttemptId("d", "r1", P, 1))[0].objects
        key = store.layout.cas_object(entry.sha256)
        fault = proxy.add(Fault("GET", lambda k: k == key, status=500, until_put=True))
        with pytest.raises(NotAvailable) as caught:
            store.read_arrow(store.manifest("d", "r1", P))
        assert getattr(caught.value, "partition", None) == P and key in str(caught.value), caught.value
        assert key in fault.taken and key not in fault.healed, (fault.taken, fault.healed)
        why = store.checker("d", "r1", Mode.DEEP).why_unavailable(P)
        assert "suspect" in why, why
        _, tally = store.write_arrow(TABLE, AttemptId("d", "r1", P, 2))
        assert (tally.new_objects, tally.new_bytes) == (1, entry.size), tally
        assert key in fault.healed, fault.healed
        assert store.read_arrow(store.manifest("d", "r1", P)) == TABLE
        assert store.checker("d", "r1", Mode.DEEP).why_unavailable(P) == ""

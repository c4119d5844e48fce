"""A child forked while another thread of its parent reads an Amazon hook's connection (the scheduler's watcher
thread, when the LocalExecutor forks its workers) must be able to read one itself: on Python 3.11 every
``functools.cached_property`` holds one lock for all instances of its class, which the child inherits held by a
thread it does not have — its task process then hangs for ever in ``AwsBaseHook.conn_config`` (seen on the
embedded stack: ``tests/e2e/faults/``, a make.0 stuck 6 min in ``access_from_airflow``)."""

from __future__ import annotations

import os
import sys
import threading
from functools import cached_property

import pytest

import airflow_region_failover.store.s3.clients  # noqa: F401 - what a process that reads the store imports

pytestmark = pytest.mark.skipif(sys.version_info >= (3, 12) or not hasattr(os, "fork"),
                                reason="cached_property has no lock from Python 3.12; no fork here")


def test_a_child_forked_while_a_thread_reads_a_hooks_connection_can_read_one() -> None:
    from airflow.providers.amazon.aws.hooks.base_aws import AwsGenericHook

    prop = vars(AwsGenericHook)["conn_config"]
    assert isinstance(prop, cached_property)
    held, release = threading.Event(), threading.Event()

    def hold() -> None:
        with prop.lock:  # type: ignore[attr-defined]
            held.set()
            release.wait(10)

    thread = threading.Thread(target=hold)
    thread.start()
    try:
        assert held.wait(5)
        pid = os.fork()
        if pid == 0:  # the child: one thread, the forking one
            os._exit(0 if prop.lock.acquire(timeout=3) else 1)  # type: ignore[attr-defined]
    finally:
        release.set()
        thread.join()
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0, \
        "the forked child found AwsGenericHook.conn_config's lock held by a thread it does not have"

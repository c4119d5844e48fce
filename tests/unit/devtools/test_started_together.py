"""``devtools.production.started_together``: the production-like stack's servers that Airflow needs start at
once; a failed one is reported only after the others have ended their start (so ``stop`` finds none half-way)."""

from __future__ import annotations

import threading
import time

import pytest

from devtools.production import started_together


def test_results_come_in_the_order_of_the_starts_and_the_starts_overlap() -> None:
    barrier = threading.Barrier(3, timeout=5)

    def start(value: str) -> str:
        barrier.wait()  # each start returns only once all three run at the same time
        return value

    assert started_together(lambda: start("db"), lambda: start("broker"), lambda: start("s3")) == [
        "db", "broker", "s3"]


def test_a_failed_start_is_raised_after_the_others_have_ended() -> None:
    ended: list[str] = []

    def slow() -> str:
        time.sleep(0.3)
        ended.append("slow")
        return "up"

    def broken() -> str:
        raise RuntimeError("PostgreSQL exited with 1")

    with pytest.raises(RuntimeError, match="PostgreSQL exited with 1"):
        started_together(broken, slow)
    assert ended == ["slow"]


def test_the_first_error_in_order_wins() -> None:
    def fails(message: str) -> None:
        raise RuntimeError(message)

    with pytest.raises(RuntimeError, match="first"):
        started_together(lambda: time.sleep(0.1) or fails("first"), lambda: fails("second"))

"""Where a step task's time goes: named phases, measured on every run, reported in the task's summary.

Rules:

* **A clock per task.** The step operator starts a :class:`Clock` when it begins executing and makes it current
  for its context while it runs (:func:`measured`); :func:`phase` records one span — its name, its start (seconds
  after the clock started) and its length — on the current clock, and does nothing without one (the store used
  outside a task, a script step's own application). Two clock reads per span: cheap enough to stay on.
* **Spans nest and repeat.** A span inside another is recorded as well (``job`` inside ``write``); a name may occur
  several times (one ``write`` per output). Readers sum what they need.
* **Work on Spark executors** (what a Spark task of the store's data path spent waiting for its input rows,
  encoding, hashing, uploading) is summed over the Spark tasks with :func:`add_work` — seconds of parallel work,
  not wall time — with ``writers``, how many Spark tasks did it (a count).
* **The record** (:class:`Timeline`, frozen, JSON beside it): the process's start (epoch seconds, from the OS), the
  clock's start and end, the spans in the order they ended, and the work totals.
"""

from __future__ import annotations

import contextlib
import contextvars
import os
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar

T = TypeVar("T")


@dataclass(frozen=True)
class Span:
    """One measured phase: ``name``, ``start`` (seconds after the clock started) and ``seconds``."""

    name: str
    start: float
    seconds: float

    @property
    def end(self) -> float:
        """When the phase ended, in seconds after the clock started."""
        return self.start + self.seconds

    def to_json(self) -> list[Any]:
        """JSON form: ``[name, start, seconds]`` (milliseconds resolution)."""
        return [self.name, round(self.start, 3), round(self.seconds, 3)]

    @classmethod
    def from_json(cls, body: list[Any]) -> Span:
        """Parse the JSON form."""
        name, start, seconds = body
        return cls(str(name), float(start), float(seconds))


@dataclass(frozen=True)
class Timeline:
    """A task's measured time (module rule): epoch seconds ``process_started``, ``started`` (the clock's start) and
    ``ended``; ``spans`` in the order they ended; ``work``: executor seconds by kind."""

    process_started: float
    started: float
    ended: float
    spans: tuple[Span, ...] = ()
    work: Mapping[str, float] = field(default_factory=dict)

    def total(self, name: str) -> float:
        """Seconds spent in spans named ``name`` (summed over repeats; nested spans are not subtracted)."""
        return sum(s.seconds for s in self.spans if s.name == name)

    def first(self, name: str) -> Span | None:
        """The earliest-starting span named ``name``, or ``None``."""
        found = [s for s in self.spans if s.name == name]
        return min(found, key=lambda s: s.start) if found else None

    def last(self, name: str) -> Span | None:
        """The latest-ending span named ``name``, or ``None``."""
        found = [s for s in self.spans if s.name == name]
        return max(found, key=lambda s: s.end) if found else None

    def to_json(self) -> dict[str, Any]:
        """JSON form: ``process_started``, ``started``, ``ended`` (epoch seconds), ``spans``, ``work``."""
        return {"process_started": round(self.process_started, 3), "started": round(self.started, 3),
                "ended": round(self.ended, 3), "spans": [s.to_json() for s in self.spans],
                "work": {k: round(v, 3) for k, v in sorted(self.work.items())}}

    @classmethod
    def from_json(cls, body: Mapping[str, Any]) -> Timeline:
        """Parse the JSON form."""
        return cls(float(body["process_started"]), float(body["started"]), float(body["ended"]),
                   tuple(Span.from_json(s) for s in body.get("spans", [])),
                   {str(k): float(v) for k, v in body.get("work", {}).items()})


class Clock:
    """The recorder of one task's timeline (mutable; one per task, see :func:`started`)."""

    def __init__(self, now: float | None = None, process_started: float | None = None) -> None:
        self.started = time.time() if now is None else now
        self._perf = time.perf_counter()
        self.process_started = process_start() if process_started is None else process_started
        self.spans: list[Span] = []
        self.work: dict[str, float] = {}

    def offset(self) -> float:
        """Seconds since the clock started."""
        return time.perf_counter() - self._perf

    def record(self, name: str, start: float) -> None:
        """Record a span ``name`` that started at offset ``start`` and ends now (to the millisecond, as its JSON
        form keeps it)."""
        self.spans.append(Span(name, round(start, 3), round(self.offset() - start, 3)))

    def record_since(self, name: str, at: float) -> None:
        """Record a span ``name`` from epoch time ``at`` (before the clock started) to the clock's start."""
        self.spans.append(Span(name, round(at - self.started, 3), round(self.started - at, 3)))

    def add_work(self, totals: Mapping[str, float]) -> None:
        """Add executor seconds by kind."""
        for kind, seconds in totals.items():
            self.work[kind] = self.work.get(kind, 0.0) + float(seconds)

    def timeline(self) -> Timeline:
        """The record as of now (to the millisecond, as its JSON form keeps it)."""
        return Timeline(round(self.process_started, 3), round(self.started, 3),
                        round(self.started + self.offset(), 3), tuple(self.spans),
                        {kind: round(seconds, 3) for kind, seconds in self.work.items()})


_CURRENT: contextvars.ContextVar[Clock | None] = contextvars.ContextVar("region_failover_clock", default=None)


@contextlib.contextmanager
def measured(clock: Clock | None = None) -> Iterator[Clock]:
    """Start a task's clock (or make ``clock`` current) for the enclosed block, in this context."""
    clock = clock if clock is not None else Clock()
    token = _CURRENT.set(clock)
    try:
        yield clock
    finally:
        _CURRENT.reset(token)


def current() -> Clock | None:
    """The current clock, or ``None`` outside a task."""
    return _CURRENT.get()


@contextlib.contextmanager
def phase(name: str) -> Iterator[None]:
    """Record the enclosed block as a span ``name`` on the current clock (a no-op without one)."""
    clock = _CURRENT.get()
    if clock is None:
        yield
        return
    start = clock.offset()
    try:
        yield
    finally:
        clock.record(name, start)


def add_work(totals: Mapping[str, float]) -> None:
    """Add executor seconds by kind to the current clock (a no-op without one)."""
    clock = _CURRENT.get()
    if clock is not None:
        clock.add_work(totals)


class Waited(Generic[T]):
    """An iterator that counts the seconds its consumer spent waiting for the next item (``seconds``): what a Spark
    task's writer waits for its input rows."""

    def __init__(self, items: Iterator[T]) -> None:
        self._items = items
        self.seconds = 0.0

    def __iter__(self) -> Waited[T]:
        return self

    def __next__(self) -> T:
        started = time.perf_counter()
        try:
            return next(self._items)
        finally:
            self.seconds += time.perf_counter() - started


def process_start(pid: int | None = None) -> float:
    """When process ``pid`` (this one by default) started, in epoch seconds, from ``/proc`` (Linux); the current
    time where that cannot be read."""
    try:
        with open(f"/proc/{pid or os.getpid()}/stat", "rb") as stat:
            ticks = int(stat.read().rsplit(b")", 1)[1].split()[19])
        with open("/proc/stat", "rb") as system:
            boot = next(int(line.split()[1]) for line in system if line.startswith(b"btime"))
        return boot + ticks / os.sysconf("SC_CLK_TCK")
    except (OSError, ValueError, IndexError, StopIteration):
        return time.time()

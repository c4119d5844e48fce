"""A StatsD listener on loopback for tests: a UDP server on ``127.0.0.1`` (ephemeral port) that keeps every
line it receives, and parses them (plain StatsD ``name:value|type``, with Airflow's InfluxDB-style tags
``name,tag=value,...`` when ``[metrics] statsd_influxdb_enabled`` is set)."""

from __future__ import annotations

import socket
import threading
import time
from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class Sample:
    """One received metric line."""

    name: str
    value: float
    type: str
    tags: dict[str, str]


def parse(line: str) -> Sample:
    """``prefix.name,k=v,...:value|type`` -> :class:`Sample`."""
    head, _, rest = line.partition(":")
    value, _, kind = rest.partition("|")
    name, *pairs = head.split(",")
    return Sample(name, float(value), kind.split("|")[0], dict(p.split("=", 1) for p in pairs))


@dataclass
class StatsdListener:
    """Receives on ``127.0.0.1:<port>`` in a daemon thread from :meth:`start` until :meth:`stop`."""

    lines: list[str] = field(default_factory=list)
    _sock: Any = None
    _thread: threading.Thread | None = None
    _stop: threading.Event = field(default_factory=threading.Event)

    @property
    def port(self) -> int:
        return int(self._sock.getsockname()[1])

    def start(self) -> StatsdListener:
        self._sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        self._sock.bind(("127.0.0.1", 0))
        self._sock.settimeout(0.2)
        self._thread = threading.Thread(target=self._serve, name="statsd-listener", daemon=True)
        self._thread.start()
        return self

    def _serve(self) -> None:
        while not self._stop.is_set():
            try:
                data = self._sock.recv(65535)
            except OSError:  # timeout, or closed
                continue
            self.lines.extend(line for line in data.decode(errors="replace").splitlines() if line)

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(5)
        if self._sock is not None:
            self._sock.close()

    def samples(self, name: str | None = None, **tags: str) -> list[Sample]:
        """The samples received so far, those named ``name`` (without the prefix) and having ``tags`` if given."""
        parsed = [parse(line) for line in list(self.lines)]
        return [s for s in parsed if (name is None or s.name.split(".", 1)[-1] == name or s.name == name)
                and all(s.tags.get(k) == v for k, v in tags.items())]

    def wait_for(self, name: str, timeout: float = 10.0, **tags: str) -> list[Sample]:
        """The samples of ``name`` with ``tags``, waiting up to ``timeout`` for at least one."""
        deadline = time.monotonic() + timeout
        while not self.samples(name, **tags) and time.monotonic() < deadline:
            time.sleep(0.1)
        return self.samples(name, **tags)

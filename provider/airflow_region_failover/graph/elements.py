"""The values a job graph is made of: steps, edges and their exchange/distribution kinds.

Rule: these are plain immutable values, unchecked; :func:`~.validation.validate` checks them and
:class:`~.model.JobGraph` holds a validated set of them. A step has an id and ``parallelism`` subtasks;
``deterministic`` declares that re-running it on the same inputs produces byte-identical output. An edge
``source -> target`` carries the result named ``result``.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum
from typing import TypeVar

from airflow_region_failover.graph.errors import GraphError

_E = TypeVar("_E", bound=Enum)


class Exchange(str, Enum):
    """How a result is exchanged: ``PIPELINED`` (ephemeral, same attempt) or ``BLOCKING`` (persisted)."""

    PIPELINED = "PIPELINED"
    BLOCKING = "BLOCKING"

    @classmethod
    def parse(cls, value: object, *, where: str) -> Exchange:
        """Parse ``value`` (case-insensitive name or member); ``where`` names the offending edge."""
        return _parse_enum(cls, value, where=where, what="exchange")


class Distribution(str, Enum):
    """Which producer partitions each consumer subtask reads: ``ALL_TO_ALL`` or ``POINTWISE``."""

    ALL_TO_ALL = "ALL_TO_ALL"
    POINTWISE = "POINTWISE"

    @classmethod
    def parse(cls, value: object, *, where: str) -> Distribution:
        """Parse ``value`` (case-insensitive name or member); ``where`` names the offending edge."""
        return _parse_enum(cls, value, where=where, what="distribution")


def _parse_enum(cls: type[_E], value: object, *, where: str, what: str) -> _E:
    if isinstance(value, cls):
        return value
    if isinstance(value, str):
        for member in cls:
            if member.value == value.upper().replace("-", "_"):
                return member
    names = " or ".join(m.value for m in cls)
    raise GraphError(f"{where}: {what} {value!r} is unknown; use {names}")


@dataclass(frozen=True)
class Step:
    """A job vertex: one PySpark computation split into ``parallelism`` subtasks."""

    id: str
    parallelism: int = 1
    deterministic: bool = False


@dataclass(frozen=True)
class Edge:
    """``source`` produces result ``result``, which ``target`` consumes with ``distribution``."""

    source: str
    target: str
    exchange: Exchange
    distribution: Distribution = Distribution.ALL_TO_ALL
    result: str = ""

    def __str__(self) -> str:
        return f"edge {self.source} -> {self.target}"

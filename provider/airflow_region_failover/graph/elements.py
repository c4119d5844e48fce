"""The values a job graph is made of: steps, edges and their exchange/distribution kinds.

Rule: these are plain immutable values, unchecked; :func:`~.validation.validate` checks them and
:class:`~.model.JobGraph` holds a validated set of them. A step has an id and ``parallelism`` subtasks;
``deterministic`` declares that re-running it on the same inputs produces byte-identical output; ``rescalable``
that its results, as its consumers use them, are the same at any parallelism (what one subtask computes from all
of its inputs is what its subtasks compute together: a keyed step's rows of a key depend on that key's rows only,
or its consumers combine its partial rows, as a Spark application run at another parallelism would), so a fused
region may run it as one subtask (:mod:`~airflow_region_failover.graph.rescaling`). An edge ``source -> target``
carries the result named ``result``.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum
from typing import TypeVar

from airflow_region_failover.graph.errors import GraphError

_E = TypeVar("_E", bound=Enum)


class Exchange(str, Enum):
    """How a result is exchanged: ``PIPELINED`` (ephemeral, same attempt), ``BLOCKING`` (persisted) or ``AUTO``
    (declared only: a plan, :mod:`.auto`, resolves it to BLOCKING or fused — PIPELINED — before anything runs)."""

    PIPELINED = "PIPELINED"
    BLOCKING = "BLOCKING"
    AUTO = "AUTO"

    @classmethod
    def parse(cls, value: object, *, where: str) -> Exchange:
        """Parse ``value`` (case-insensitive name or member); ``where`` names the offending edge."""
        return _parse_enum(cls, value, where=where, what="exchange")


class Distribution(str, Enum):
    """Which data each consumer subtask reads.

    * ``ALL_TO_ALL`` — a keyed (hash-partitioned) exchange: consumer j reads subpartition j of every producer
      partition, i.e. the rows whose key falls in its key-group range (needs ``partition_by``);
    * ``BROADCAST`` — every consumer subtask reads every producer partition whole;
    * ``POINTWISE`` — consumer j reads a contiguous range of producer partitions whole.
    """

    ALL_TO_ALL = "ALL_TO_ALL"
    BROADCAST = "BROADCAST"
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
    rescalable: bool = False


@dataclass(frozen=True)
class Edge:
    """``source`` produces result ``result``, which ``target`` consumes with ``distribution``.

    A keyed ``ALL_TO_ALL`` edge hashes the columns ``partition_by`` into ``max_parallelism`` key groups (0: the
    default, :data:`~.keygroups.DEFAULT_MAX_PARALLELISM`); other edges have neither. ``cluster_by`` (BLOCKING
    edges only) names the columns the persisted result is sorted by and cut into content-defined files over, so
    rows that did not change between runs land in byte-identical files (:mod:`~.store.dataplane.chunking`). ``columns``
    (BLOCKING edges only) names the columns of the producer's output the persisted result keeps: the others are
    dropped before it is written, so bytes no consumer reads are never encoded, uploaded or read back (what Spark's
    optimizer does across one application's shuffles, declared here because each step is its own application).
    """

    source: str
    target: str
    exchange: Exchange
    distribution: Distribution = Distribution.BROADCAST
    result: str = ""
    partition_by: tuple[str, ...] = ()
    max_parallelism: int = 0
    cluster_by: tuple[str, ...] = ()
    columns: tuple[str, ...] = ()

    @property
    def keyed(self) -> bool:
        """True for a keyed (hash-partitioned) ``ALL_TO_ALL`` exchange."""
        return bool(self.partition_by)

    def __str__(self) -> str:
        return f"edge {self.source} -> {self.target}"

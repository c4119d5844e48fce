"""Publishing a sink step's result as a Delta Lake table: what a step declares, where the table lives, and the
identity that makes a run publish exactly once.

Rules:

* **Declaration** (parse time): ``job.step("totals", fn, publish="daily_totals", publish_mode="append")``. Only a
  *sink* step (no outgoing edges: its DataFrame is committed as its sink result, BLOCKING) may publish; a table
  name is ``[A-Za-z_][A-Za-z0-9_]*``, at most 100 characters (a SQL identifier for every reader, and one plain
  key part); the mode is ``append`` (each run adds one table version) or ``overwrite`` (each run's output
  replaces the table). Two steps may not publish to one table. ``publish_asset_name="daily_totals"`` names the
  Airflow Asset the table's events go to when no consumer has named it yet (default: the table's URI; any
  non-blank text of at most 1500 characters). Anything else is a :class:`GraphError` naming the step and the fix.
* **Asset URI** (:func:`normalised_uri`): a URI as Airflow normalises an Asset's: the scheme in lower case, no
  password, the query's pairs sorted, no trailing ``/`` on the path, no ``#fragment`` — so ``S3://b/t/``,
  ``s3://b/t#v`` and ``s3://b/t`` are one Asset URI.
* **Location**: table ``T`` lives at ``<root>/T``. ``root`` is ``[region_failover] publish_root``: an
  ``s3://bucket/prefix`` URI on the result store's S3 server (credentials from ``store_aws_conn_id``), or a local
  directory / ``file://`` URI (the embedded demo, tests). Unset, it is ``s3://<store_bucket>/<store_prefix>/tables``
  — beside the store's ``v1/`` and ``failover/`` trees, which the store's gc never visits. Nothing is written
  outside ``<root>/T``.
* **Identity** (:func:`transaction_of`): a publication commits Delta's application transaction
  (``txn``: ``appId``/``version``) with its data in one commit, and is skipped when the table already holds it:

  - ``append``: app id ``region-failover:<dag>:<table>:<key>``, one per run *key*: the run's logical date (ISO,
    UTC) — so a re-run, a retry, a clear or a second run of the same logical date never appends again, and
    backfills may publish dates in any order — or, for a run without a logical date, ``run:<run id>``. The
    table holds one such app id per published run (Delta keeps them; a table property
    ``delta.setTransactionRetentionDuration`` would let old ones expire, and re-runs older than it publish again);
  - ``overwrite``: app id ``region-failover:<dag>:<table>`` with version = the run's *as-of time* in epoch
    microseconds (its data interval end, else its logical date, else when it was due to run): a run publishes
    only when its as-of time is newer than the table's, so a re-run never republishes and an older run (a late
    backfill) never replaces newer data.
"""

from __future__ import annotations

import re
import urllib.parse
from dataclasses import dataclass
from datetime import datetime, timezone
from enum import Enum
from pathlib import Path

from airflow_region_failover.exceptions import GraphError

APP_PREFIX = "region-failover"
MAX_TABLE_NAME = 100
MAX_ASSET_NAME = 1500  # Airflow's limit on an Asset's name
_TABLE = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")
_EPOCH = datetime(1970, 1, 1, tzinfo=timezone.utc)
PUBLISH_TASK_SUFFIX = "publish"


class PublishMode(str, Enum):
    """``append``: every run adds one version with its rows; ``overwrite``: every run's rows replace the table."""

    APPEND = "append"
    OVERWRITE = "overwrite"


@dataclass(frozen=True)
class Publication:
    """Step ``step``'s sink result is published to table ``table`` in ``mode``; ``asset_name`` is the Asset name
    its first event creates when no consumer named the table's Asset (``None``: the table's URI)."""

    step: str
    table: str
    mode: PublishMode = PublishMode.APPEND
    asset_name: str | None = None

    @property
    def task_id(self) -> str:
        """The publishing task: ``<step>.publish`` (never a subtask id: those end with an index)."""
        return f"{self.step}.{PUBLISH_TASK_SUFFIX}"

    def to_dict(self) -> dict[str, str]:
        """JSON form (inside the job document); ``asset_name`` only when declared."""
        named = {} if self.asset_name is None else {"asset_name": self.asset_name}
        return {"step": self.step, "table": self.table, "mode": self.mode.value, **named}

    @classmethod
    def from_dict(cls, value: object) -> Publication:
        """Parse the JSON form; :class:`GraphError` for anything else."""
        if not isinstance(value, dict) or not isinstance(value.get("step"), str):
            raise GraphError(f"publication {value!r} is not an object with 'step', 'table' and 'mode'")
        return declare(value["step"], value.get("table"), value.get("mode", PublishMode.APPEND.value),
                       value.get("asset_name"))


def check_table(step: str, table: object) -> str:
    """Return ``table`` if it is a usable table name (module rule), else raise naming the step and the fix."""
    if not isinstance(table, str) or not _TABLE.match(table) or len(table) > MAX_TABLE_NAME:
        raise GraphError(f"step {step!r}: publish={table!r} is not a table name; use letters, digits and '_' "
                         f"(not first a digit), at most {MAX_TABLE_NAME} characters, e.g. 'daily_totals'")
    return table


def parse_mode(step: str, mode: object) -> PublishMode:
    """``append`` or ``overwrite`` (case-insensitive), else :class:`GraphError` naming the step."""
    if isinstance(mode, PublishMode):
        return mode
    if isinstance(mode, str):
        for member in PublishMode:
            if member.value == mode.lower():
                return member
    raise GraphError(f"step {step!r}: publish_mode={mode!r} is unknown; use 'append' (one table version per "
                     "run) or 'overwrite' (each run replaces the table)")


def check_asset_name(step: str, name: object) -> str | None:
    """``name`` if it may name an Airflow Asset (or is ``None``), else :class:`GraphError` naming the step."""
    if name is None or (isinstance(name, str) and name.strip() and len(name) <= MAX_ASSET_NAME
                        and name not in ("self", "context")):
        return name
    raise GraphError(f"step {step!r}: publish_asset_name={name!r} cannot name an Airflow Asset; give non-blank "
                     f"text of at most {MAX_ASSET_NAME} characters (not 'self' or 'context'), e.g. 'daily_totals'")


def declare(step: str, table: object, mode: object = PublishMode.APPEND, asset_name: object = None) -> Publication:
    """A validated publication of ``step``'s sink result (module rule)."""
    return Publication(step, check_table(step, table), parse_mode(step, mode), check_asset_name(step, asset_name))


def normalised_uri(uri: str) -> str:
    """``uri`` as Airflow normalises an Asset URI (module rule; Airflow's ``_sanitize_uri``)."""
    parts = urllib.parse.urlsplit(uri)
    if not parts.scheme:
        return uri
    query = urllib.parse.urlencode(sorted(urllib.parse.parse_qsl(parts.query))) if parts.query else ""
    netloc = parts.netloc.rpartition("@")[2] if parts.password else parts.netloc
    return urllib.parse.urlunsplit(parts._replace(scheme=parts.scheme.lower(), netloc=netloc,
                                                  path=parts.path.rstrip("/") or "/", query=query, fragment=""))


def check_publications(publications: tuple[Publication, ...], sinks: frozenset[str]) -> None:
    """Only sink steps publish, and each table has one publisher (:class:`GraphError` naming the offender)."""
    owners: dict[str, str] = {}
    for pub in publications:
        if pub.step not in sinks:
            raise GraphError(f"step {pub.step!r} has outgoing edges, so it is no sink; only a sink step's result "
                             f"can be published to table {pub.table!r}: publish its last consumer instead")
        other = owners.setdefault(pub.table.lower(), pub.step)
        if other != pub.step:
            raise GraphError(f"steps {other!r} and {pub.step!r} both publish table {pub.table!r}; give each step "
                             "its own table")


@dataclass(frozen=True)
class RunTimes:
    """What identifies a run for publishing: its ids and its dates (``None`` where Airflow has none)."""

    dag_id: str
    run_id: str
    logical_date: datetime | None = None
    data_interval_end: datetime | None = None
    run_after: datetime | None = None


@dataclass(frozen=True)
class AppTransaction:
    """Delta's application transaction a publication commits (``app_id``, ``version``) and the run key it
    stands for; :attr:`published_by` says whether a table's recorded version for ``app_id`` already covers it."""

    app_id: str
    version: int
    run_key: str
    mode: PublishMode

    def published_by(self, recorded: int | None) -> bool:
        """True when a table whose version for :attr:`app_id` is ``recorded`` already holds this publication
        (append: any version at all; overwrite: a version at least as new as this run's)."""
        if recorded is None:
            return False
        return self.mode is PublishMode.APPEND or recorded >= self.version


def _utc(moment: datetime) -> datetime:
    return moment.replace(tzinfo=timezone.utc) if moment.tzinfo is None else moment.astimezone(timezone.utc)


def epoch_micros(moment: datetime) -> int:
    """Microseconds since 1970-01-01 UTC (naive datetimes are UTC); :class:`GraphError` before 1970."""
    delta = _utc(moment) - _EPOCH
    micros = (delta.days * 86_400 + delta.seconds) * 1_000_000 + delta.microseconds
    if micros < 0:
        raise GraphError(f"run date {moment.isoformat()} lies before 1970: it cannot order Delta publications")
    return micros


def run_key(run: RunTimes) -> str:
    """``<logical date, ISO UTC>`` or, without one, ``run:<run id>``."""
    if run.logical_date is not None:
        return _utc(run.logical_date).isoformat().replace("+00:00", "Z")
    return f"run:{run.run_id}"


def as_of(run: RunTimes) -> datetime:
    """The time a run's data is as of: its data interval end, else its logical date, else its ``run_after``."""
    moment = run.data_interval_end or run.logical_date or run.run_after
    if moment is None:
        raise GraphError(f"run {run.run_id!r} of {run.dag_id!r} has no data interval, logical date or run_after: "
                         "an overwrite publication cannot be ordered")
    return moment


def transaction_of(publication: Publication, run: RunTimes) -> AppTransaction:
    """The application transaction of ``run``'s publication (module rule)."""
    base = f"{APP_PREFIX}:{run.dag_id}:{publication.table}"
    key = run_key(run)
    if publication.mode is PublishMode.APPEND:
        moment = run.logical_date or run.data_interval_end or run.run_after
        return AppTransaction(f"{base}:{key}", epoch_micros(moment) if moment else 0, key, publication.mode)
    return AppTransaction(base, epoch_micros(as_of(run)), key, publication.mode)


def default_root(bucket: str, prefix: str) -> str:
    """``s3://<bucket>/<prefix>/tables``: the default table root, beside the store's own trees."""
    return "/".join(p for p in (f"s3://{bucket}", prefix.strip("/"), "tables") if p)


def table_uri(root: str, table: str) -> str:
    """``<root>/<table>`` for an ``s3://`` root, a ``file://`` URI or a local directory (made absolute).

    :class:`GraphError` for any other scheme or an ``s3://`` root without bucket; ``table`` must be checked.
    """
    root = root.strip()
    if root.startswith("s3://"):
        bucket = root[len("s3://"):].split("/", 1)[0]
        if not bucket:
            raise GraphError(f"[region_failover] publish_root {root!r} names no bucket; use s3://bucket/prefix")
        return f"{root.rstrip('/')}/{table}"
    if root.startswith("file://"):
        root = root[len("file://"):]
    elif "://" in root or not root:
        raise GraphError(f"[region_failover] publish_root {root!r} must be an s3://bucket/prefix URI or a local "
                         "directory")
    return str(Path(root).absolute() / table)

"""The record of one benchmark run: what ran, where, under which load, and what it measured, round by round.

One JSON file per run in ``benchmarks/results/`` (``YYYY-MM-DD-topic.json``, the file's stem is the record's
``id``); ``docs/performance.md`` is generated from them (``benchmarks/make_performance_page.py``). The rules:

* A record holds what was measured, never what was inferred: each round's values as the run printed them
  (:class:`Round`), and the figures a reader is shown (:class:`Figure`), each either a summary of one round value
  (``of``: its minimum, maximum and median over the rounds, computed, not typed) or, where the run's rounds were not
  kept, the range as it was reported (``low``/``high``, ``given_as_range`` true) — never both.
* Machine, load, date, the time of day and the commit are free text as they were written down at the time
  (``None`` where nobody wrote them down): a record does not guess them.
* The JSON form has exactly the fields of the dataclasses: :func:`load` refuses a file with a field missing, an
  unknown field or a value of the wrong type, naming the file and the field.
"""

from __future__ import annotations

import dataclasses
import json
import os
import platform
import statistics
import subprocess
import types
import typing
from dataclasses import dataclass
from pathlib import Path
from typing import Any

SCHEMA = 1
RESULTS = Path(__file__).resolve().parent / "results"


class RecordError(ValueError):
    """A record file that does not follow the schema (the message names the file and the field)."""


@dataclass(frozen=True)
class Value:
    """One measured value of a round: ``name`` (a short key, e.g. ``ours_s``) and the number as printed."""

    name: str
    value: float


@dataclass(frozen=True)
class Round:
    """One round (or run, or case) of the measurement: its ``label`` (e.g. ``"1 (ours, (a), (b))"``) and values."""

    label: str
    values: tuple[Value, ...]

    def value_of(self, name: str) -> float | None:
        """The value called ``name``, or ``None`` when this round did not measure it."""
        return next((v.value for v in self.values if v.name == name), None)


@dataclass(frozen=True)
class Figure:
    """A figure the page shows: the range over the rounds of the value ``of``, or the range as reported."""

    name: str
    unit: str
    decimals: int
    of: str | None
    low: float | None
    high: float | None
    given_as_range: bool
    target: str | None


@dataclass(frozen=True)
class Record:
    """One run of one benchmark script (module rule)."""

    schema: int
    id: str
    question: str
    script: str
    command: str
    date: str
    time_utc: str | None
    commit: str | None
    data_size: str
    machine: str
    load: str
    rounds: tuple[Round, ...]
    figures: tuple[Figure, ...]
    note: str | None
    superseded_by: str | None
    remarks: str

    def values(self, name: str) -> list[float]:
        """Every round's value called ``name``, in round order (rounds that did not measure it left out)."""
        return [v for v in (r.value_of(name) for r in self.rounds) if v is not None]

    def spread(self, figure: Figure) -> tuple[float, float, float | None]:
        """``(low, high, median)`` of ``figure``: over the rounds, or as reported (no median then)."""
        if figure.of is None:
            assert figure.low is not None and figure.high is not None
            return figure.low, figure.high, None
        got = self.values(figure.of)
        return min(got), max(got), statistics.median(got)


def this_machine() -> str:
    """The machine a script runs on, as a record's ``machine`` field: CPUs, memory, system, Python."""
    memory = next((int(line.split()[1]) / 2**20 for line in Path("/proc/meminfo").read_text().splitlines()
                   if line.startswith("MemTotal:")), 0.0) if Path("/proc/meminfo").exists() else 0.0
    return (f"{os.cpu_count()} CPUs, {memory:.0f} GB RAM, {platform.system()} {platform.release()}, "
            f"CPython {platform.python_version()}")


def load_average() -> str:
    """The 1-, 5- and 15-minute load averages now, for a record's ``load`` field (taken before and after a run)."""
    return "load average " + " / ".join(f"{x:.1f}" for x in os.getloadavg())


def git_commit() -> str | None:
    """The repository's commit (short), with ``+ changes`` when the tree differs from it; ``None`` outside git."""
    def git(*args: str) -> str:
        return subprocess.run(["git", *args], cwd=RESULTS.parent, capture_output=True, text=True,
                              check=False).stdout.strip()
    head = git("rev-parse", "--short", "HEAD")
    return (head + (" + changes" if git("status", "--porcelain", "--untracked-files=no") else "")) or None


def to_json(record: Record) -> dict[str, Any]:
    """The JSON form of ``record``: its fields, a round's values as one object ``{name: value}``."""
    data = dataclasses.asdict(record)
    data["rounds"] = [{"label": r.label, "values": {v.name: v.value for v in r.values}} for r in record.rounds]
    return data


def dumps(record: Record) -> str:
    """The text of a record file."""
    return json.dumps(to_json(record), indent=1, ensure_ascii=False) + "\n"


def _check(value: Any, hint: Any, where: str) -> Any:
    """``value`` read as type ``hint`` (str, int, float, bool, ``X | None``), or a :class:`RecordError`."""
    if typing.get_origin(hint) in (typing.Union, types.UnionType):
        arms = typing.get_args(hint)
        if value is None and type(None) in arms:
            return None
        hint = next(a for a in arms if a is not type(None))
    if hint is float and isinstance(value, int) and not isinstance(value, bool):
        return float(value)
    if not isinstance(value, hint) or (hint is not bool and isinstance(value, bool)):
        raise RecordError(f"{where}: expected {getattr(hint, '__name__', hint)}, got {value!r}")
    return value


def _fields(data: Any, cls: type, where: str, skip: tuple[str, ...] = ()) -> dict[str, Any]:
    """The plain fields of ``cls`` read from the JSON object ``data``; missing or unknown fields are refused."""
    if not isinstance(data, dict):
        raise RecordError(f"{where}: expected an object, got {data!r}")
    names = [f.name for f in dataclasses.fields(cls)]
    missing, unknown = sorted(set(names) - set(data)), sorted(set(data) - set(names))
    if missing or unknown:
        raise RecordError(f"{where}: missing field(s) {missing}, unknown field(s) {unknown}; the fields of "
                          f"{cls.__name__} are {names} (benchmarks/_record.py)")
    hints = typing.get_type_hints(cls)
    return {n: _check(data[n], hints[n], f"{where}.{n}") for n in names if n not in skip}


def _list(data: Any, where: str) -> list[Any]:
    if not isinstance(data, list):
        raise RecordError(f"{where}: expected a list, got {data!r}")
    return data


def from_json(data: Any, where: str) -> Record:
    """The record of the JSON object ``data`` (``where``: the file, for the errors)."""
    fields = _fields(data, Record, where, skip=("rounds", "figures"))
    rounds = []
    for i, item in enumerate(_list(data["rounds"], f"{where}.rounds")):
        at = f"{where}.rounds[{i}]"
        plain = _fields(item, Round, at, skip=("values",))
        if not isinstance(item["values"], dict):
            raise RecordError(f"{at}.values: expected an object {{name: number}}, got {item['values']!r}")
        values = tuple(Value(k, _check(v, float, f"{at}.values.{k}")) for k, v in item["values"].items())
        rounds.append(Round(values=values, **plain))
    figures = [Figure(**_fields(item, Figure, f"{where}.figures[{i}]"))
               for i, item in enumerate(_list(data["figures"], f"{where}.figures"))]
    record = Record(rounds=tuple(rounds), figures=tuple(figures), **fields)
    validate(record, where)
    return record


def validate(record: Record, where: str) -> None:
    """The rules beyond the types: the schema version, and every figure either over the rounds or as reported."""
    if not record.rounds:
        raise RecordError(f"{where}.rounds: empty; a record holds at least one round of what was measured")
    if record.schema != SCHEMA:
        raise RecordError(f"{where}.schema: {record.schema}, this reader knows schema {SCHEMA}")
    for i, figure in enumerate(record.figures):
        at = f"{where}.figures[{i}] ({figure.name})"
        if figure.of is not None:
            if figure.low is not None or figure.high is not None or figure.given_as_range:
                raise RecordError(f"{at}: a figure over the rounds (of={figure.of!r}) has no low/high and "
                                  "given_as_range false")
            if not record.values(figure.of):
                raise RecordError(f"{at}: no round has a value {figure.of!r}")
        elif figure.low is None or figure.high is None or not figure.given_as_range:
            raise RecordError(f"{at}: without 'of', give the range as reported: low, high and given_as_range true")


def load(path: Path) -> Record:
    """The record in ``path``; its ``id`` must be the file's stem."""
    try:
        data = json.loads(path.read_text())
    except json.JSONDecodeError as error:
        raise RecordError(f"{path}: not JSON ({error})") from None
    record = from_json(data, str(path))
    if record.id != path.stem:
        raise RecordError(f"{path}.id: {record.id!r}, the file is named {path.stem!r}; give both the same name")
    return record


def load_all(folder: Path = RESULTS) -> list[Record]:
    """Every record in ``folder``, by file name (date first)."""
    return [load(path) for path in sorted(folder.glob("*.json"))]


def write(path: Path, record: Record) -> None:
    """Write ``record`` to ``path`` (checked first: a script cannot write a record the loader would refuse)."""
    validate(record, str(path))
    path.write_text(dumps(record))

"""The planner's knobs: how much history a choice needs, how far back it looks, how much a switch must gain.

Rules (the defaults are documented in docs/user/auto-plans.md; :mod:`.choice` applies them):

* ``min_runs`` (3): fewer runs in the window keep the previous plan — one run is not a failure rate;
* ``window`` (20, at least ``min_runs``): the newest ended runs the failure rates and figures come from, so an old
  failure stops counting once ``window`` newer runs ended;
* ``margin`` (0.10, in [0, 1)): a run switches plan only when the cheapest saves more than this share of the
  previous plan's expected time — the hysteresis that keeps a history near the break-even rate from flapping; 0
  switches on any gain;
* ``restart_seconds`` (10 s, R): what a restart loses besides the lost work (Airflow clearing and scheduling, a
  Spark session); a deployment whose tasks queue for minutes sets it higher;
* ``exhaustive`` (10): up to this many AUTO results every plan is costed, else one result flipped at a time;
* ``deadline_seconds`` / ``deadline_margin`` (none / 0.05): a run budget ranks plans by the probability of missing
  it, and a switch must lower that probability by more than the margin (:mod:`.deadline`). A job's budget is its
  DAG's deadline alert (or ``advise --deadline``), never a policy declared in the DAG file: one place for it.

A job declares its own policy with ``RegionJob.render(planner=PlannerPolicy(...))``; every bad value is one
:class:`~airflow_region_failover.graph.errors.OptionError` naming the field and the fix, at parse time.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, fields
from typing import Any

from airflow_region_failover.graph.errors import OptionError
from airflow_region_failover.planning.model import DEFAULT_RESTART_SECONDS

_WHERE = "PlannerPolicy"


@dataclass(frozen=True)
class PlannerPolicy:
    """The planner's knobs (module rules)."""

    min_runs: int = 3
    margin: float = 0.10
    window: int = 20
    exhaustive: int = 10
    restart_seconds: float = DEFAULT_RESTART_SECONDS
    deadline_seconds: float | None = None
    deadline_margin: float = 0.05

    def __post_init__(self) -> None:
        for name in ("min_runs", "window", "exhaustive"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise OptionError(f"{_WHERE}({name}={value!r}): must be a whole number >= 1")
        if self.window < self.min_runs:
            raise OptionError(f"{_WHERE}(window={self.window}): must be at least min_runs ({self.min_runs}), or no "
                              "window ever holds enough runs to choose")
        for name in ("margin", "deadline_margin"):
            value = getattr(self, name)
            if not _number(value) or not 0 <= value < 1:
                raise OptionError(f"{_WHERE}({name}={value!r}): must be a share in [0, 1), e.g. 0.1 for 10 %")
        if not _number(self.restart_seconds) or self.restart_seconds < 0:
            raise OptionError(f"{_WHERE}(restart_seconds={self.restart_seconds!r}): must be a number of seconds >= 0")
        if self.deadline_seconds is not None and (not _number(self.deadline_seconds) or self.deadline_seconds <= 0):
            raise OptionError(f"{_WHERE}(deadline_seconds={self.deadline_seconds!r}): must be a positive number of "
                              "seconds")

    def describe(self) -> str:
        """One line for people: the knobs a choice depends on."""
        return (f"at least {self.min_runs} runs, the newest {self.window}, a switch saving more than "
                f"{self.margin:.0%}, {self.restart_seconds:g} s a restart")

    def to_json(self) -> dict[str, Any]:
        """The fields that differ from the defaults (``{}`` for the defaults)."""
        default = PlannerPolicy()
        return {name: value for name, value in asdict(self).items() if value != getattr(default, name)}

    @classmethod
    def from_json(cls, document: object) -> PlannerPolicy:
        """Parse :meth:`to_json`'s form; :class:`OptionError` naming an unknown field or a bad value."""
        known = {f.name for f in fields(cls)}
        if not isinstance(document, dict) or not set(document) <= known:
            extra = sorted(set(document) - known) if isinstance(document, dict) else []
            raise OptionError(f"planner: {extra[0] if extra else document!r} is not a {_WHERE} field; use "
                              f"{', '.join(sorted(known))}")
        return cls(**document)


def _number(value: object) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


DEFAULT_POLICY = PlannerPolicy()
"""The documented defaults (module rules)."""

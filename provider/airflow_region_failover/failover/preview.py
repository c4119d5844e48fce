"""Preview what a restart strategy does on a timeline of events (backs ``region-failover backoff``).

Rule: one strategy is created from the options (:func:`~.options.parse_options`) on a manual clock starting at 0
with jitter from ``random.Random(seed)``.  Events are replayed in order; for each, the clock is set to ``t`` and

* ``"failure"``: ``new_attempt = notify_failure()``; if the event names a ``"task"`` (a subtask id), the FLIP-1
  budget counts it per task as well as in total, else in total only;
* ``"check"``: nothing is notified and ``new_attempt`` is ``None``;

then ``can_restart`` is the strategy's answer *and* the FLIP-1 budget not being exhausted, and ``backoff_ms`` is
``get_backoff_time()`` — ``None`` until the first failure (for exponential-delay it is the time left, at ``t``,
until the scheduled restart).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from airflow_region_failover.failover.backoff.base import ManualClock
from airflow_region_failover.failover.options import parse_options
from airflow_region_failover.graph.errors import RegionFailoverError

EVENT_OPS = ("failure", "check")
_EVENT_KEYS = frozenset({"t", "op", "task"})

PreviewRow = dict[str, object]
"""One output object: ``{"t", "op", "new_attempt", "can_restart", "backoff_ms"}``."""


def preview(
    options: Mapping[str, object],
    events: Sequence[Mapping[str, object]],
    seed: int = 0,
    *,
    checkpointing: bool = False,
) -> list[PreviewRow]:
    """Replay ``events`` (``{"t": ms, "op": "failure"|"check"[, "task": id]}``, ``t`` non-decreasing).

    Raises :class:`~.errors.OptionError` for bad options and :class:`~.errors.RegionFailoverError` (one line,
    naming the event's index) for a malformed event.
    """
    if isinstance(events, (str, bytes)) or not isinstance(events, Sequence):
        raise RegionFailoverError(f'events: {events!r} is not a list; write [{{"t": 0, "op": "failure"}}, ...]')
    config = parse_options(options, checkpointing=checkpointing)
    clock = ManualClock(0)
    strategy = config.create_strategy(clock, seed)
    budget = config.create_budget()
    rows: list[PreviewRow] = []
    failed = False
    previous_t = 0
    for index, event in enumerate(events):
        t, op, task = _check_event(index, event, previous_t)
        previous_t = t
        clock.set(t)
        new_attempt: bool | None = None
        if op == "failure":
            new_attempt = strategy.notify_failure()
            budget.record(task)
            failed = True
        rows.append(
            {
                "t": t,
                "op": op,
                "new_attempt": new_attempt,
                "can_restart": strategy.can_restart() and budget.exhausted() is None,
                "backoff_ms": strategy.get_backoff_time() if failed else None,
            }
        )
    return rows


def _check_event(index: int, event: object, previous_t: int) -> tuple[int, str, str | None]:
    """Validate one event; return its time, operation and optional task id."""
    where = f"events[{index}]"
    if not isinstance(event, Mapping):
        raise RegionFailoverError(f'{where}: {event!r} is not an object; write {{"t": <ms>, "op": "failure"}}')
    extra = sorted(str(key) for key in event if key not in _EVENT_KEYS)
    if extra:
        raise RegionFailoverError(f"{where}: unknown field(s) {', '.join(extra)}; allowed: t, op, task")
    t = event.get("t")
    if not isinstance(t, int) or isinstance(t, bool) or t < 0:
        raise RegionFailoverError(f"{where}: 't' must be a whole number of milliseconds >= 0, got {t!r}")
    if t < previous_t:
        raise RegionFailoverError(f"{where}: t={t} goes back in time (previous t={previous_t}); sort events by t")
    op = event.get("op")
    if op not in EVENT_OPS:
        raise RegionFailoverError(f'{where}: \'op\' must be "failure" or "check", got {op!r}')
    task = event.get("task")
    if task is not None and (not isinstance(task, str) or not task or op != "failure"):
        raise RegionFailoverError(f"{where}: 'task' must be a subtask id on a failure event, got {task!r}")
    return t, str(op), task

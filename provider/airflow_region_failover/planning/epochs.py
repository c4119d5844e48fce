"""How many epochs a checkpointed step should take: Young's and Daly's optimal checkpoint interval.

Rule: a subtask that checkpoints every ``τ`` seconds of work, at ``C`` seconds per checkpoint, and fails on
average every ``M`` seconds (MTBF, ``1/λ`` for a failure rate λ per task-second, :mod:`.rate`) loses least
in expectation at Young's interval (J. W. Young, "A first order approximation to the optimum checkpoint
interval", CACM 17(9), 1974)

    τ = √(2·C·M)

refined by Daly (J. T. Daly, "A higher order estimate of the optimum checkpoint interval for restart dumps",
FGCS 22(3), 2006), which this module uses:

    τ = √(2·C·M) · (1 + ⅓·√(C/(2M)) + ⅑·(C/(2M))) − C    for C < 2M,   else τ = M.

A step whose subtask works ``W`` seconds then takes ``⌈W/τ⌉`` epochs, at least 1 (no failures: one epoch, no
checkpoint paid) and at most ``max_epochs``.
"""

from __future__ import annotations

import math

DEFAULT_MAX_EPOCHS = 1000
"""The most epochs :func:`epochs_for` chooses (each is a Spark job and a checkpoint upload)."""


def young_interval(checkpoint_seconds: float, mtbf_seconds: float) -> float:
    """Young's first-order optimum, √(2·C·M)."""
    return math.sqrt(2 * checkpoint_seconds * mtbf_seconds)


def daly_interval(checkpoint_seconds: float, mtbf_seconds: float) -> float:
    """Daly's higher-order optimum (module rule)."""
    c, m = checkpoint_seconds, mtbf_seconds
    if c >= 2 * m:
        return m
    ratio = c / (2 * m)
    return math.sqrt(2 * c * m) * (1 + math.sqrt(ratio) / 3 + ratio / 9) - c


def epochs_for(work_seconds: float, checkpoint_seconds: float, per_task_second: float,
               max_epochs: int = DEFAULT_MAX_EPOCHS) -> int:
    """The epochs of a checkpointed subtask of ``work_seconds`` at failure rate ``per_task_second``."""
    if work_seconds <= 0 or per_task_second <= 0:
        return 1
    if checkpoint_seconds <= 0:
        return max_epochs
    interval = daly_interval(checkpoint_seconds, 1 / per_task_second)
    return max(1, min(max_epochs, math.ceil(work_seconds / interval)))

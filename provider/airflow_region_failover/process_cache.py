"""Process-wide caches of things that hold connections (S3 and REST clients, the result store, Spark sessions):
built once per process, never inherited by a forked child.

Rule: a cached client holds sockets. A child forked after its parent built one — a LocalExecutor worker the
scheduler forks after its watcher ran (a replacement worker), the task process that worker forks, an api-server
worker — would otherwise share them: two processes speaking over one keep-alive connection read each other's
answers (a task's ``HEAD`` could receive the watcher's reply). So every cache of such an object is declared with
:func:`per_process`, and every one of them is emptied in the child right after a fork
(``os.register_at_fork(after_in_child=...)``): the child builds its own on first use. The parent's objects are
dropped in the child, never closed there — closing would act on connections the parent still uses. One
mechanism, here; ``tests/unit/test_fork_safety.py`` finds any ``functools`` cache declared beside it.
"""

from __future__ import annotations

import functools
import os
from collections.abc import Callable
from typing import Any, TypeVar

_T = TypeVar("_T")
_CACHES: list[functools._lru_cache_wrapper[Any]] = []


def per_process(maxsize: int | None = None) -> Callable[[Callable[..., _T]], functools._lru_cache_wrapper[_T]]:
    """``functools.lru_cache(maxsize)`` (unbounded by default) whose entries a forked child never sees."""

    def declare(factory: Callable[..., _T]) -> functools._lru_cache_wrapper[_T]:
        cached = functools.lru_cache(maxsize=maxsize)(factory)
        _CACHES.append(cached)
        return cached

    return declare


def forget_inherited() -> None:
    """Empty every :func:`per_process` cache (run in each forked child; see the module rule)."""
    for cache in _CACHES:
        cache.cache_clear()


os.register_at_fork(after_in_child=forget_inherited)

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

Rule: a lock the child inherits held is held for ever (its owner thread does not exist in the child). On Python
3.11 every ``functools.cached_property`` holds one lock for all instances of its class; the Amazon hooks read their
connection through one (``AwsGenericHook.conn_config``), so a child forked while another thread was inside it — a
LocalExecutor worker forked while the scheduler's watcher thread builds its store — hangs its first hook, and so
does every task process that worker forks. So the child re-initialises the locks of the cached properties of the
hook classes already imported (:data:`HOOK_MODULES`; a module imported only after the fork was never locked).
"""

from __future__ import annotations

import functools
import os
import sys
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


HOOK_MODULES = ("airflow.providers.amazon.aws.hooks.base_aws", "airflow.providers.amazon.aws.hooks.s3")
"""Modules whose classes' ``cached_property`` locks a forked child re-initialises (module rule)."""


def reinit_property_locks(modules: tuple[str, ...] = HOOK_MODULES) -> None:
    """Re-initialise the lock of every ``cached_property`` of the classes of ``modules`` already imported (run in
    each forked child; see the module rule; Python 3.12 has no such lock)."""
    for name in modules:
        module = sys.modules.get(name)
        for cls in [v for v in vars(module).values() if isinstance(v, type)] if module is not None else ():
            for attr in vars(cls).values():
                lock = getattr(attr, "lock", None) if isinstance(attr, functools.cached_property) else None
                if lock is not None:
                    lock._at_fork_reinit()


def _after_fork_in_child() -> None:
    forget_inherited()
    reinit_property_locks()


os.register_at_fork(after_in_child=_after_fork_in_child)

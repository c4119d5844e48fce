"""Errors raised for bad job graphs and bad options (one line, naming the offender and the fix)."""

from __future__ import annotations


class RegionFailoverError(ValueError):
    """Base class of every user-facing error of the provider."""


class GraphError(RegionFailoverError):
    """A job graph is invalid: the message names the offending step, edge or result and the fix."""


class OptionError(RegionFailoverError):
    """A failover or restart-strategy option is invalid: the message names the key and the fix."""

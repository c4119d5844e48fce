"""What a failure was, as the failover loop compares failures: its exception class, its message signature, and
what the failed try computed from. Pure values, each with its JSON form.

Rules:

* **Class names** (:func:`class_names`): the failure's exception class and every base class, most specific first,
  each as ``module.QualName`` (built-in classes by their bare name: ``KeyError``, ``LookupError``,
  ``Exception``, ``BaseException``). A declared name (``restart-strategy.non-recoverable-errors``, a step's
  ``non_recoverable_errors``) matches a failure when it equals one of them, or the simple name (after the last
  dot) of one of them (:func:`declared_match`): ``AnalysisException`` matches classic PySpark's
  ``pyspark.errors.exceptions.captured.AnalysisException`` and Spark Connect's
  ``pyspark.errors.exceptions.connect.AnalysisException`` alike (both derive from
  ``pyspark.errors.exceptions.base.AnalysisException``); ``LookupError`` matches a ``KeyError``.
* **Message signature** (:func:`normalise`, :func:`signature`): the (already masked) message with its volatile
  parts replaced, in this order — URIs (``s3a://b/k``, ``http://h:1/x``) by ``<uri>``; absolute paths
  (``/tmp/x/y.parquet``) by ``<path>``; UUIDs by ``<id>``; hex addresses (``0x7f3a...``) by ``<addr>``; hex runs of
  8 or more characters (hashes, object ids) by ``<hex>``; numbers (``42``, ``3.5``, Spark's expression ids
  ``id#123L``) by ``<n>``; runs of blanks by one space — then hashed: the first 16 hex digits of its SHA-256.
  Two failures whose messages differ only in such parts have the same signature.
* **What a try computed from** (:class:`TryInputs`): one digest over every input partition's content checksum
  (as the reuse rule compares them) and the try's code fingerprint. A try whose inputs are not all known —
  a source step (it reads outside the store), a PIPELINED input, a checksum missing — has none: its failure is
  no evidence.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from airflow_region_failover.graph.errors import OptionError

NON_RECOVERABLE_ERRORS_KEY = "restart-strategy.non-recoverable-errors"
"""The option naming the exception classes whose failures end the run instead of a restart (:mod:`.classify`)."""
SIGNATURE_DIGITS = 16
_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z_][A-Za-z0-9_]*)*\Z")
_VOLATILE: tuple[tuple[re.Pattern[str], str], ...] = (
    (re.compile(r"\b[A-Za-z][A-Za-z0-9+.-]*://\S+"), "<uri>"),
    (re.compile(r"(?<![\w.<>])(?:/[\w.@%+~=-]+)+/?"), "<path>"),
    (re.compile(r"\b[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}\b"), "<id>"),
    (re.compile(r"\b0x[0-9a-fA-F]+\b"), "<addr>"),
    (re.compile(r"\b(?=[0-9a-fA-F]*[0-9])(?=[0-9a-fA-F]*[a-fA-F])[0-9a-fA-F]{8,}\b"), "<hex>"),
    (re.compile(r"\d+(?:\.\d+)?"), "<n>"),
    (re.compile(r"\s+"), " "),
)
NAMES_HINT = ("exception class names such as 'KeyError' or 'pyspark.errors.exceptions.base.AnalysisException' "
              "(simple or qualified), separated by ';'")


def class_names(error_type: type) -> tuple[str, ...]:
    """The qualified names of ``error_type`` and its bases, most specific first (module rule; ``object`` left
    out)."""
    return tuple(_qualified(k) for k in error_type.__mro__ if k is not object)


def _qualified(kind: type) -> str:
    module = getattr(kind, "__module__", "") or ""
    name = getattr(kind, "__qualname__", kind.__name__)
    return name if module in ("builtins", "") else f"{module}.{name}"


def normalise(message: str) -> str:
    """``message`` with its volatile parts replaced (module rule)."""
    text = message
    for pattern, replacement in _VOLATILE:
        text = pattern.sub(replacement, text)
    return text.strip()


def signature(message: str) -> str:
    """The message signature: the first :data:`SIGNATURE_DIGITS` hex digits of the SHA-256 of :func:`normalise`."""
    return hashlib.sha256(normalise(message).encode()).hexdigest()[:SIGNATURE_DIGITS]


def declared_match(names: Sequence[str], declared: Iterable[str]) -> str | None:
    """The first of ``declared`` that names one of ``names`` (exactly, or by its simple name), or ``None``."""
    simple = {n.rsplit(".", 1)[-1] for n in names}
    return next((d for d in declared if d in names or d in simple), None)


def parse_error_names(value: object, key: str, *, text: bool = True) -> tuple[str, ...]:
    """Exception class names from an option value: ``"A; b.C"`` (``text``; ``;`` or ``,`` between names, blank
    for none), or a list of names or exception classes. :class:`OptionError` naming ``key`` and the offender."""
    if isinstance(value, str):
        if not text:
            raise OptionError(f"{key}: {value!r} is a string; give a list, e.g. [{value!r}] ({NAMES_HINT})")
        items: list[object] = [p.strip() for p in re.split(r"[;,]", value) if p.strip()]
    elif isinstance(value, (list, tuple)):
        items = list(value)
    else:
        raise OptionError(f"{key}: {value!r} is not a list of exception classes; use {NAMES_HINT}")
    names = []
    for item in items:
        if isinstance(item, type) and issubclass(item, BaseException):
            item = _qualified(item)
        if not isinstance(item, str) or not _NAME.match(item.strip()):
            raise OptionError(f"{key}: {item!r} is not an exception class name; use {NAMES_HINT}")
        names.append(item.strip())
    return tuple(dict.fromkeys(names))


def format_error_names(names: Iterable[str]) -> str:
    """The option text of ``names`` (:func:`parse_error_names` reads it back)."""
    return ";".join(names)


@dataclass(frozen=True)
class ErrorClass:
    """A failure's exception class names (module rule, most specific first) and its message signature."""

    names: tuple[str, ...]
    signature: str

    def __post_init__(self) -> None:
        if not self.names:
            raise ValueError("an error class names at least its own class")

    @property
    def name(self) -> str:
        """The failure's own class, as shown (its simple name)."""
        return self.names[0].rsplit(".", 1)[-1]

    @classmethod
    def of(cls, error: BaseException, message: str | None = None) -> ErrorClass:
        """The class of ``error``; ``message``: its text as recorded (masked), default ``str(error)``."""
        return cls(class_names(type(error)), signature(str(error) if message is None else message))

    def to_json(self) -> dict[str, Any]:
        """JSON form."""
        return {"names": list(self.names), "signature": self.signature}

    @classmethod
    def from_json(cls, body: Mapping[str, Any]) -> ErrorClass:
        """Parse the JSON form."""
        return cls(tuple(str(n) for n in body["names"]), str(body["signature"]))


@dataclass(frozen=True)
class TryInputs:
    """What one try computed from: ``inputs``, a digest of every input partition's content checksum, and
    ``code``, its code fingerprint (module rule)."""

    inputs: str
    code: str

    def __post_init__(self) -> None:
        if not self.inputs or not self.code:
            raise ValueError("a try's inputs and code are both known, or it has no TryInputs")

    @classmethod
    def of(cls, checksums: Iterable[tuple[str, str]], code: str) -> TryInputs | None:
        """From ``(partition, checksum)`` pairs (the checksum of exactly what the try reads of that partition) and
        the code fingerprint; ``None`` when any of them is unknown (empty) or there is no input at all."""
        pairs = sorted(checksums)
        if not pairs or not code or any(not p or not c for p, c in pairs):
            return None
        return cls(hashlib.sha256(json.dumps(pairs).encode()).hexdigest(), code)

    def to_json(self) -> dict[str, Any]:
        """JSON form."""
        return {"inputs": self.inputs, "code": self.code}

    @classmethod
    def from_json(cls, body: Mapping[str, Any]) -> TryInputs:
        """Parse the JSON form."""
        return cls(str(body["inputs"]), str(body["code"]))

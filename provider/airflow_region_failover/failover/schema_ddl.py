"""The column names of a Spark DDL schema string, and whether Spark knows its types — without Spark.

Rule: a schema is ``field, field, ...``; a field is a name (a word, or any text in backquotes), an optional
``:``, a type, then anything Spark allows after it (``NOT NULL``, ``COMMENT '...'``). A type is one of Spark SQL's
type names (case-insensitive, :data:`SPARK_TYPES`) with its parameters (``decimal(10, 2)``, ``varchar(5)``), or
``array<type>``, ``map<type, type>``, ``struct<field, ...>``. This is what the DAG file's parse can check: the
running task reads the schema with Spark's own parser (``StructType.fromDDL``, which needs a Spark session), so a
schema this check accepts may still be refused there (a parameter out of range, a misplaced keyword after a
type) — but an unknown type name, a field without a type, unbalanced brackets or a column named twice are caught
when the DAG renders.
"""

from __future__ import annotations

import re
from typing import NoReturn

from airflow_region_failover.graph.errors import GraphError

SPARK_TYPES = frozenset({
    "boolean", "tinyint", "byte", "smallint", "short", "int", "integer", "bigint", "long", "float", "real",
    "double", "decimal", "dec", "numeric", "string", "char", "character", "varchar", "binary", "date", "timestamp",
    "timestamp_ntz", "timestamp_ltz", "time", "interval", "void", "variant",
})
"""Spark SQL's primitive type names (Spark 4's ``DataTypeAstBuilder``), lower-cased."""
_WORD = re.compile(r"\s*([A-Za-z_][A-Za-z0-9_]*)")
_NAME = re.compile(r"\s*(`(?:[^`]|``)+`|[A-Za-z0-9_]+)")
_OPEN, _CLOSE = "<(", ">)"


def schema_columns(ddl: object, where: str) -> tuple[str, ...]:
    """The top-level column names of a Spark DDL schema string (``"a string, b struct<x:int>"``), its types
    checked (module rule); a :class:`GraphError` naming ``where``, the field and the fix when it is not one."""
    if not isinstance(ddl, str) or not ddl.strip():
        raise GraphError(f"{where}(state_schema={ddl!r}) must be a Spark DDL string such as 'user string, n long'")
    columns, pos = _Fields(ddl, where).read(0, top=True)
    if pos != len(ddl) or len(set(columns)) != len(columns):
        raise GraphError(f"{where}: state_schema {ddl!r} has unbalanced brackets or a column named twice")
    return tuple(columns)


class _Fields:
    """A reader of one schema string's fields and types (module rule)."""

    def __init__(self, ddl: str, where: str) -> None:
        self.ddl, self.where = ddl, where

    def read(self, pos: int, top: bool, outer: int | None = None) -> tuple[list[str], int]:
        """The field names from ``pos`` to the end (``top``) or to the ``>`` closing a struct; the position after.
        An error names the top-level field it is in (``outer``: where that starts)."""
        names: list[str] = []
        if not top and self._peek(pos) == ">":
            return names, self._skip(pos) + 1
        while True:
            start = pos if outer is None else outer
            name = _NAME.match(self.ddl, pos)
            if name is None:
                self._no_type(start)
            pos = name.end()
            if self._peek(pos) == ":":
                pos = self._skip(pos) + 1
            if _WORD.match(self.ddl, pos) is None:
                self._no_type(start)
            pos = self._after_modifiers(self._type(pos, start), start)
            names.append(name.group(1)[1:-1].replace("``", "`") if name.group(1).startswith("`") else name.group(1))
            if pos >= len(self.ddl):
                return names, pos
            if self.ddl[pos] == ">" and not top:
                return names, pos + 1
            if self.ddl[pos] != ",":
                return names, pos  # an unbalanced closing bracket: the caller names it
            pos += 1

    def _type(self, pos: int, field: int) -> int:
        """Check the type at ``pos`` (of the field starting at ``field``); the position after it."""
        word = _WORD.match(self.ddl, pos)
        if word is None:
            self._no_type(field)
        name, pos = word.group(1).lower(), word.end()
        if name in ("array", "map"):
            pos = self._expect(pos, "<", field)
            pos = self._type(pos, field)
            if name == "map":
                pos = self._type(self._expect(pos, ",", field), field)
            return self._expect(pos, ">", field)
        if name == "struct":
            return self.read(self._expect(pos, "<", field), top=False, outer=field)[1]
        if name not in SPARK_TYPES:
            text = self.ddl[field:self._after_modifiers(field, field)].strip()
            raise GraphError(f"{self.where}: state_schema field {text!r} has type {word.group(1)!r}, which Spark "
                             "does not know; use a Spark SQL type such as string, long, double, decimal(10, 2), "
                             "timestamp, array<string>, map<string, long> or struct<x: int>")
        if self._peek(pos) == "(":
            end = self.ddl.find(")", pos)
            return len(self.ddl) + 1 if end < 0 else end + 1
        return pos

    def _after_modifiers(self, pos: int, field: int) -> int:
        """Skip what follows a field's type (``NOT NULL``, ``COMMENT '...'``) up to its ``,`` or closing ``>``."""
        depth, quote = 0, ""
        while pos < len(self.ddl):
            char = self.ddl[pos]
            if quote:
                quote = "" if char == quote else quote
            elif char in "'\"":
                quote = char
            elif char in _OPEN:
                depth += 1
            elif char in _CLOSE and depth:
                depth -= 1
            elif (char == "," or char in _CLOSE) and not depth:
                return pos
            pos += 1
        return pos

    def _expect(self, pos: int, char: str, field: int) -> int:
        at = self._skip(pos)
        if at >= len(self.ddl) or self.ddl[at] != char:
            raise GraphError(f"{self.where}: state_schema {self.ddl!r} has unbalanced brackets or a column named "
                             "twice")
        return at + 1

    def _skip(self, pos: int) -> int:
        while pos < len(self.ddl) and self.ddl[pos].isspace():
            pos += 1
        return pos

    def _peek(self, pos: int) -> str:
        at = self._skip(pos)
        return self.ddl[at] if at < len(self.ddl) else ""

    def _no_type(self, field: int) -> NoReturn:
        text = self.ddl[field:self._after_modifiers(field, field)].strip()
        raise GraphError(f"{self.where}: state_schema field {text!r} needs a name and a type, e.g. 'n long'")

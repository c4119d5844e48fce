"""A committed version read by Spark's own file reader gets back the nullability its schema records.

Rule: Spark's file sources make every field nullable (``dataSchema.asNullable``), so a frame read through
``spark.read.schema(s).parquet(...)`` would differ from the frame the step returned wherever ``s`` says a field,
an array element or a map value is never null. :func:`restore` rebuilds exactly those: a non-nullable value
becomes ``coalesce(value, <a value of its type>)`` — the second never comes into play, since no null was written
there — and structs, arrays and maps holding one are rebuilt field by field (``named_struct``, ``transform``,
``transform_values``; a nullable struct stays null where it was). Nothing changes for a schema that is nullable
throughout. A type it has no value for (intervals, variants, user-defined types), or a result whose schema still
differs, gives ``None``: the caller reads through the Python path instead.
"""

from __future__ import annotations

import datetime
import decimal
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame
    from pyspark.sql.types import DataType, StructType


class _Unsupported(Exception):
    """A type :func:`_value_of` has no non-null value for."""


def restore(frame: DataFrame, schema: StructType) -> DataFrame | None:
    """``frame`` with ``schema``'s nullability (module rule), or ``None`` when it cannot be restored."""
    from pyspark.sql import functions as F

    if not any(_strict(f.dataType, f.nullable) for f in schema.fields):
        return frame
    try:
        columns = [_restored(F.col(_quoted(f.name)), f.dataType, f.nullable).alias(f.name) for f in schema.fields]
    except _Unsupported:
        return None
    restored = frame.select(*columns)
    return restored if restored.schema == schema else None


def _strict(kind: DataType, nullable: bool) -> bool:
    """Whether ``kind`` (nullable or not) says anywhere that a value is never null."""
    from pyspark.sql.types import ArrayType, MapType, StructType

    if not nullable:
        return True
    if isinstance(kind, StructType):
        return any(_strict(f.dataType, f.nullable) for f in kind.fields)
    if isinstance(kind, ArrayType):
        return _strict(kind.elementType, kind.containsNull)
    if isinstance(kind, MapType):
        return _strict(kind.keyType, False) or _strict(kind.valueType, kind.valueContainsNull)
    return False


def _restored(value: Column, kind: DataType, nullable: bool) -> Column:
    """``value`` typed exactly as ``kind`` with ``nullable`` (module rule)."""
    from pyspark.sql import functions as F
    from pyspark.sql.types import ArrayType, MapType, StructType

    if not _strict(kind, nullable):
        return value
    if isinstance(kind, StructType):
        rebuilt = F.struct(*[_restored(value.getField(f.name), f.dataType, f.nullable).alias(f.name)
                             for f in kind.fields])
        return F.when(value.isNull(), F.lit(None)).otherwise(rebuilt) if nullable else rebuilt
    if isinstance(kind, ArrayType):
        rebuilt = F.transform(value, lambda item: _restored(item, kind.elementType, kind.containsNull))
    elif isinstance(kind, MapType):
        rebuilt = F.transform_values(value, lambda _, item: _restored(item, kind.valueType, kind.valueContainsNull))
    else:
        rebuilt = value
    return rebuilt if nullable else F.coalesce(rebuilt, _value_of(kind))


def _value_of(kind: DataType) -> Column:
    """A non-null value of exactly ``kind`` (nested fields non-null too)."""
    from pyspark.sql import functions as F
    from pyspark.sql import types as T

    if isinstance(kind, T.StructType):
        return F.struct(*[_value_of(f.dataType).alias(f.name) for f in kind.fields])
    if isinstance(kind, T.ArrayType):
        return F.array(_value_of(kind.elementType))
    if isinstance(kind, T.MapType):
        return F.create_map(_value_of(kind.keyType), _value_of(kind.valueType))
    plain: dict[type, Any] = {
        T.BooleanType: False, T.StringType: "", T.BinaryType: bytearray(), T.DateType: datetime.date(1970, 1, 1),
        T.TimestampType: datetime.datetime(1970, 1, 1, tzinfo=datetime.timezone.utc),
        T.TimestampNTZType: datetime.datetime(1970, 1, 1), T.DecimalType: decimal.Decimal(0),
        T.ByteType: 0, T.ShortType: 0, T.IntegerType: 0, T.LongType: 0, T.FloatType: 0.0, T.DoubleType: 0.0}
    for known, zero in plain.items():
        if isinstance(kind, known):
            return F.lit(zero).cast(kind)
    raise _Unsupported(kind.simpleString())


def _quoted(name: str) -> str:
    return "`" + name.replace("`", "``") + "`"

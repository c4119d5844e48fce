"""A JVM read that Spark does not list (``jvm/ListedParquet.java``, built into the keyed writer's jar): the same
file scan as ``spark.read.schema(s).parquet(*urls)`` over the same objects, its file index filled from the
manifest's sizes instead of asking S3 (``spark.read.parquet`` sends two HEADs and a LIST per object through
``s3a://`` while it resolves the read: ~70 ms per read of a keyed consumer, ``benchmarks/notes/``).

Rules:

* **Only for objects just checked**: the caller uses it only when the store has HEADed every object of the read
  and found the size (and the SHA-256) its manifest records (:func:`.reading.stored_checksums_match`); otherwise
  Spark lists them as before.
* **Used when Spark has it** (:func:`read`): a session whose JVM does not know the class (``DATA_SOURCE_NOT_FOUND``,
  found while resolving, before anything is read) is remembered and lists from then on (``None``: the caller's
  path), as for the keyed writer's class (:class:`.keyed_writer.JarSource`).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from airflow_region_failover.store.dataplane.keyed_writer import JarSource

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

FORMAT = "org.regionfailover.spark.ListedParquet"
"""The data source's class (``spark.read.format(FORMAT)``)."""
READER = JarSource(FORMAT, "Spark lists the objects of each read (two HEADs and a LIST per object)")
"""The listed reader's class, and the sessions without it."""


def read(spark: SparkSession, options: dict[str, str], urls: Sequence[str], sizes: Sequence[int],
         schema: Any) -> DataFrame | None:
    """The objects at ``urls`` (of ``sizes`` bytes) as a DataFrame of ``schema``, resolved now without listing
    them; ``None`` when this session's JVM has no :data:`FORMAT` (module rule)."""
    if READER.known_missing(spark):
        return None
    try:
        frame = spark.read.format(FORMAT).options(**options).option("paths", "\n".join(urls)) \
            .option("sizes", ",".join(str(size) for size in sizes)).schema(schema).load()
        _ = frame.schema  # Spark Connect resolves lazily: now
    except Exception as exc:
        if not READER.missing(spark, exc):
            raise
        return None
    return frame

"""The data plane: how a DataFrame becomes content-addressed Parquet objects and how a committed version is read back
(pyarrow and pyspark live here, never in the protocol below it).

* the write protocol's types, shared by every writer — :mod:`.types` (:class:`~.types.Target`,
  :class:`~.types.Cut`, :class:`~.types.Piece`, :class:`~.types.Written`);
* the writers — :mod:`.parquet` (Python workers, ``mapInArrow``, bounded bodies by :mod:`.encoding`),
  :mod:`.local_write` (Spark's own writer to the driver's disk, in directories of :mod:`.scratch`; keyed writes
  through :mod:`.keyed_writer`, the jar built from ``jvm/``), :mod:`.clustered` (sorted, content-defined chunks
  of :mod:`.chunking`);
* the reader — :mod:`.reading` (Spark's own reader through ``s3a://``, :mod:`.s3a`, a read Spark does not list,
  :mod:`.listed`, or the Python workers), with its schema's nullability — :mod:`.nullability`.
"""

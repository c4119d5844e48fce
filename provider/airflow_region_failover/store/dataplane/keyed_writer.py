"""The keyed write's own JVM writer (``jvm/KeyedParquet.java``): one of Spark's Parquet writers per subpartition
in an array, picked by the row's tag, where Spark's ``partitionBy`` projects, copies and looks up every row.

Why: a keyed write through ``partitionBy`` cost 3.8x an unkeyed write of the same columns in JVM CPU (the ETL's
kept line-item columns, ``benchmarks/notes/``): Spark's concurrent writer projects each row's partition values,
copies them and looks its writer up in a hash map, then projects the row again without the tag. The files are the
same bytes either way (the same writer factory, ``ParquetFileFormat.prepareWrite``, the same rows in the same
order, the same names but for the attempt they carry), so which path wrote a result never changes its content
addresses or its reuse. Rows of top-level primitive columns go to parquet-mr's column writers directly
(``jvm/FlatParquetWriteSupport.java``: Spark's own write support without its record consumer's per-field
bookkeeping, 12-18 % less JVM CPU for the ETL's keyed writes), still the same bytes; the write option
``flatWriter=false`` turns that off.

Rules:

* **Built from source**: :func:`build` compiles ``KeyedParquet.java`` (with ``FlatParquetWriteSupport.java``, and
  ``ListedParquet.java``, :mod:`.listed`)
  against the running pyspark's jars into
  ``region-failover-keyed-parquet-<source hash>.jar`` (``./dev bootstrap`` puts it into ``.venv/jars``, where
  :func:`~.s3a.environment_jars` finds it; an installed provider: ``python -m
  airflow_region_failover.store.dataplane.keyed_writer DIR``, then the jar on ``spark.jars``). Needs a JDK (``javac``).
* **Used when Spark has it** (:func:`write`): the first keyed write of a session tries it; a session whose JVM
  does not know the class (``DATA_SOURCE_NOT_FOUND``: found while planning, before any file is written) is
  remembered and writes through ``partitionBy`` (the caller's path) from then on.
* **One attempt per task** (:func:`counted_attempts`, :func:`counted`): the task's renames are not Spark's
  output-commit protocol, so two attempts of one task can both publish (a speculative copy, a zombie attempt of a
  resubmitted stage, an attempt whose executor died after it published) — with other rows or another row order
  (a shuffle's input) their files differ in number and content, and a set taken from both would duplicate or drop
  rows. The file names carry the attempt, the writer records the attempt Spark counted per task (an action's
  accumulator update is applied once per task, from the attempt whose success the scheduler took) in
  ``<path>/_attempts``, and the driver takes only that attempt's files.
* **For at most** :data:`~.local_write.MAX_OPEN_WRITERS` **subpartitions** (the caller's rule): a task opens every
  writer it needs at once (no sort), so a cut into more subpartitions takes Spark's path, which sorts past that many.
"""

from __future__ import annotations

import contextlib
import hashlib
import logging
import os
import re
import shutil
import subprocess
import sys
import tempfile
import threading
import weakref
import zipfile
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

from airflow_region_failover.exceptions import StoreError

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

log = logging.getLogger(__name__)

FORMAT = "org.regionfailover.spark.KeyedParquet"
"""The data source's class (``df.write.format(FORMAT)``)."""
SOURCE = Path(__file__).with_name("jvm") / "KeyedParquet.java"
SOURCES = tuple(sorted(SOURCE.parent.glob("*.java")))
"""Every class of the jar: the keyed writer and the read without listing (``ListedParquet.java``,
store/dataplane/listed.py)."""
JAR_PREFIX = "region-failover-keyed-parquet-"
"""The jar's file name up to its source hash."""


class JarSource:
    """One data source class of the jar, and the Spark sessions found without it. Rule: a session's first use tries
    the class; a session whose JVM does not know it (``DATA_SOURCE_NOT_FOUND`` naming it, found while Spark plans or
    resolves, before anything is read or written) is remembered, logged once, and its caller takes Spark's own path
    (``instead``) from then on."""

    def __init__(self, name: str, instead: str) -> None:
        self.name = name
        self.instead = instead
        self._sessions: weakref.WeakSet[Any] = weakref.WeakSet()
        self._lock = threading.Lock()

    def known_missing(self, spark: Any) -> bool:
        """Whether ``spark`` was found without the class (or is :meth:`passed_over`)."""
        with self._lock:
            return spark in self._sessions

    def missing(self, spark: Any, exc: BaseException) -> bool:
        """Whether ``exc`` says that ``spark``'s JVM has no such class; if so ``spark`` is remembered (rule)."""
        if "DATA_SOURCE_NOT_FOUND" not in str(exc) or self.name not in str(exc):
            return False
        with self._lock:
            self._sessions.add(spark)
        log.info("result store: this Spark session has no %s on its classpath (%s): %s", self.name, jar_name(),
                 self.instead)
        return True

    @contextlib.contextmanager
    def passed_over(self, spark: Any) -> Iterator[None]:
        """For the block, ``spark`` takes Spark's own path as if it had no such class (benchmarks set the two paths
        side by side)."""
        with self._lock:
            known = spark in self._sessions
            self._sessions.add(spark)
        try:
            yield
        finally:
            if not known:
                with self._lock:
                    self._sessions.discard(spark)


WRITER = JarSource(FORMAT, "keyed writes use Spark's partitionBy (same bytes, slower)")
"""The keyed writer's class, and the sessions without it."""


def jar_name() -> str:
    """``region-failover-keyed-parquet-<first 12 hex of the SHA-256 of its sources, in name order>.jar``."""
    digest = hashlib.sha256()
    for source in SOURCES:
        digest.update(source.read_bytes())
    return f"{JAR_PREFIX}{digest.hexdigest()[:12]}.jar"


def javac() -> str:
    """The JDK's compiler: ``$JAVA_HOME/bin/javac``, else ``javac`` on ``PATH``; :class:`FileNotFoundError`
    naming the fix."""
    home = os.environ.get("JAVA_HOME")
    if home and (Path(home) / "bin" / "javac").exists():
        return str(Path(home) / "bin" / "javac")
    found = shutil.which("javac")
    if found is None:
        raise FileNotFoundError("building the keyed Parquet writer needs a JDK's javac (set JAVA_HOME or put javac "
                                "on PATH); without it keyed writes use Spark's partitionBy, same bytes, slower")
    return found


def build(dest: Path) -> Path:
    """The jar in ``dest``, compiled when missing (module rule); older builds of it there are removed."""
    import pyspark

    dest.mkdir(parents=True, exist_ok=True)
    jar = dest / jar_name()
    if jar.exists():
        return jar
    spark_jars = Path(pyspark.__file__).parent / "jars"
    with tempfile.TemporaryDirectory(prefix="keyed-parquet-") as tmp:
        classes = Path(tmp) / "classes"
        done = subprocess.run([javac(), "-nowarn", "--release", "17", "-cp", f"{spark_jars}/*", "-d", str(classes),
                               *map(str, SOURCES)], capture_output=True, text=True)
        if done.returncode != 0:
            raise RuntimeError(f"javac failed on {SOURCE.parent} against {spark_jars}:\n{done.stderr.strip()}")
        part = dest / f".{jar.name}.part"
        with zipfile.ZipFile(part, "w", zipfile.ZIP_DEFLATED) as out:  # fixed entry times: the same jar each build
            for path in sorted(p for p in classes.rglob("*") if p.is_file()):
                entry = zipfile.ZipInfo(str(path.relative_to(classes)), date_time=(1980, 1, 1, 0, 0, 0))
                out.writestr(entry, path.read_bytes(), zipfile.ZIP_DEFLATED)
        os.replace(part, jar)
    for old in dest.glob(f"{JAR_PREFIX}*.jar"):
        if old != jar:
            old.unlink()
    return jar


def write(frame: DataFrame, out_uri: str, records: int, subpartitions: int, token: str,
          options: dict[str, str]) -> bool:
    """Write ``frame`` (its last column the subpartition tag) keyed into ``out_uri`` with the JVM writer; ``False``
    (nothing written) when this session cannot (module rule), so the caller writes through ``partitionBy``."""
    spark = frame.sparkSession
    if WRITER.known_missing(spark):
        return False
    writer = frame.write.format(FORMAT).options(**options).option("maxRecordsPerFile", str(records)) \
        .option("subpartitions", str(subpartitions)).option("tag", frame.columns[-1]).option("token", token)
    try:
        writer.save(out_uri)
    except Exception as exc:
        if not WRITER.missing(spark, exc):
            raise
        return False
    return True


def passed_over(spark: Any) -> contextlib.AbstractContextManager[None]:
    """For the block, ``spark``'s keyed writes go through ``partitionBy`` as if it had no keyed writer
    (:meth:`JarSource.passed_over`)."""
    return WRITER.passed_over(spark)


ATTEMPTS = "_attempts"
"""The keyed writer's record of the task attempt Spark counted, ``<task> <attempt>`` per line ."""
_ATTEMPT = re.compile(r"-a(\d+)\.c\d+(?:\.[a-z0-9]+)*\.parquet$")


def counted_attempts(root: Path) -> dict[int, int] | None:
    """The task attempt Spark counted per task (the keyed writer's :data:`ATTEMPTS`), ``None`` if there is none
    (Spark's own writer, whose commit protocol publishes one attempt per task)."""
    record = root / ATTEMPTS
    if not record.exists():
        return None
    pairs = [line.split() for line in record.read_text().splitlines() if line.strip()]
    return {int(task): int(attempt) for task, attempt in pairs}


def counted(path: Path, task: int, counted: dict[int, int]) -> bool:
    """Whether part file ``path`` of ``task`` is of the attempt Spark counted; another attempt's is logged."""
    attempt = _ATTEMPT.search(path.name)
    if attempt is None or task not in counted:
        raise StoreError(f"{path}: a keyed writer's file without a counted attempt ({ATTEMPTS} names "
                         f"{sorted(counted)}); report it")
    if int(attempt[1]) == counted[task]:
        return True
    log.info("keyed write: skipped %s, of attempt %s of task %d (Spark counted attempt %d)", path.name,
             attempt[1], task, counted[task])
    return False


def main(argv: list[str] | None = None) -> int:
    """``python -m airflow_region_failover.store.dataplane.keyed_writer DIR``: build the jar into ``DIR``, print
    its path."""
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 1:
        print("usage: python -m airflow_region_failover.store.dataplane.keyed_writer DIR", file=sys.stderr)
        return 2
    print(build(Path(args[0])))
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""The wheel's JVM helper jar: a hatchling build hook that puts the result store's prebuilt jar (keyed Parquet
writer, listed reader: ``store/**/jvm/*.java``) into every wheel, so a cluster needs no JDK.

Rules:

* **The same jar as** ``./dev bootstrap`` **builds**: named ``region-failover-keyed-parquet-<first 12 hex of the
  SHA-256 of the ``*.java`` beside ``KeyedParquet.java``, in name order>.jar`` (``keyed_writer.jar_name``), compiled
  against the locked pyspark with ``--release 17``. The hook compiles nothing (a build environment has neither
  pyspark's jars nor, often, a JDK): it takes the jar of the current sources from ``$REGION_FAILOVER_JAR_DIR`` or
  ``.venv/jars`` (where ``./dev bootstrap`` puts it).
* **Installed where the provider looks**: the wheel's data scheme puts it at ``<environment>/jars/<name>``, the
  directory ``s3a.environment_jars`` reads (embedded sessions get it on their class path); a cluster takes that file
  on ``spark.jars`` (docs/operator/installing.md).
* **Missing**: a warning, and the wheel is built without it (keyed writes then use Spark's ``partitionBy``: the same
  bytes, slower); with ``REGION_FAILOVER_REQUIRE_JAR=1`` the build fails instead (release builds). Editable
  installs skip the hook (``./dev bootstrap`` builds the jar itself).

Standard library only: hatchling loads this file by path in an isolated build environment.
"""

from __future__ import annotations

import hashlib
import os
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    BuildHookInterface = object
else:
    try:  # hatchling is there when it builds; the tests import jar_name without it
        from hatchling.builders.hooks.plugin.interface import BuildHookInterface
    except ImportError:
        BuildHookInterface = object

PREFIX = "region-failover-keyed-parquet-"


def jar_name(root: Path) -> str:
    """The jar's file name for the sources under ``root`` (module rule)."""
    (writer,) = sorted((root / "provider").rglob("jvm/KeyedParquet.java"))
    digest = hashlib.sha256()
    for source in sorted(writer.parent.glob("*.java")):
        digest.update(source.read_bytes())
    return f"{PREFIX}{digest.hexdigest()[:12]}.jar"


def prebuilt(root: Path) -> Path | None:
    """The jar of the current sources in ``$REGION_FAILOVER_JAR_DIR`` or ``<root>/.venv/jars``, if there."""
    name = jar_name(root)
    places = [Path(os.environ["REGION_FAILOVER_JAR_DIR"])] if os.environ.get("REGION_FAILOVER_JAR_DIR") else []
    for place in [*places, root / ".venv" / "jars"]:
        if (place / name).is_file():
            return place / name
    return None


class JarHook(BuildHookInterface):
    """Adds the prebuilt jar to the wheel's data (module rule)."""

    PLUGIN_NAME = "custom"

    def initialize(self, version: str, build_data: dict[str, Any]) -> None:
        if self.target_name != "wheel" or version == "editable":
            return
        root = Path(self.root)
        jar = prebuilt(root)
        if jar is None:
            message = (f"no {jar_name(root)} in $REGION_FAILOVER_JAR_DIR or .venv/jars: run ./dev bootstrap (it "
                       "compiles the JVM helper jar with javac) before building the wheel")
            if os.environ.get("REGION_FAILOVER_REQUIRE_JAR") == "1":
                raise RuntimeError(message)
            self.app.display_warning(f"{message}; building the wheel without it")
            return
        build_data["shared_data"][str(jar)] = f"jars/{jar.name}"

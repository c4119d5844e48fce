"""The wheel carries the prebuilt JVM helper jar of the current sources (devtools/wheel_jar.py), installed into
``<environment>/jars/`` where the provider's sessions find it, so a cluster needs no JDK."""

from __future__ import annotations

import zipfile
from pathlib import Path

from airflow_region_failover.store.dataplane import keyed_writer
from devtools import wheel_jar
from tests.support.wheel import names

ROOT = Path(__file__).resolve().parents[3]


def test_the_hook_names_the_jar_as_the_provider_does() -> None:
    assert wheel_jar.jar_name(ROOT) == keyed_writer.jar_name()


def test_the_jvm_helper_jar_is_in_the_wheel(wheel: Path) -> None:
    jars = [n for n in names(wheel) if n.endswith(".jar")]
    assert [n.split(".data/", 1)[-1] for n in jars] == [f"data/jars/{keyed_writer.jar_name()}"], jars
    with zipfile.ZipFile(wheel) as archive, zipfile.ZipFile(archive.open(jars[0])) as jar:
        classes = jar.namelist()
    assert "org/regionfailover/spark/KeyedParquet.class" in classes, classes

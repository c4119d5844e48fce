"""A plain ``pip install`` of the wheel resolves one pyspark distribution: nothing it requires, directly or through
the apache-spark provider, installs ``pyspark-client`` beside ``pyspark`` (both write the same ``pyspark/``
directory, each at its own version: docs/versions.md).

apache-airflow-providers-apache-spark 6.0 and later require ``pyspark-client>=4.0`` (the newest, 4.2.0, under a
pyspark 4.3 that needs ``pyspark[connect]`` for embedded Spark anyway); 5.x requires ``pyspark`` itself.
"""

from __future__ import annotations

from pathlib import Path

from packaging.requirements import Requirement

from tests.support.wheel import metadata

SPARK_PROVIDER = "apache-airflow-providers-apache-spark"
FIRST_WITH_PYSPARK_CLIENT = ("6.0.0", "6.3.4", "7.0.0")
"""Releases of the apache-spark provider that require pyspark-client (6.0.0 the first, 6.3.4 the newest today)."""


def _requirements(wheel: Path) -> dict[str, Requirement]:
    found = {}
    for line in metadata(wheel).get_all("Requires-Dist") or []:
        requirement = Requirement(line)
        if requirement.marker is None:  # what a plain install (no extra) gets
            found[requirement.name.lower()] = requirement
    return found


def test_no_requirement_of_a_plain_install_brings_a_second_pyspark(wheel: Path) -> None:
    required = _requirements(wheel)
    assert "pyspark" in required and "pyspark-client" not in required, sorted(required)
    allowed = required[SPARK_PROVIDER].specifier
    brings_client = [v for v in FIRST_WITH_PYSPARK_CLIENT if allowed.contains(v)]
    assert brings_client == [], (f"{SPARK_PROVIDER}{allowed or ' (any version)'} allows {brings_client}, which "
                                 "require pyspark-client beside pyspark: bound it below 6")

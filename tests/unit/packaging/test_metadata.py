"""What the package index and ``pip show`` show of the built wheel: licence files, classifiers, keywords, author,
no made-up project URL, a user-facing long description (requirements table, minimum Airflow, changelog) and no
``dev`` extra."""

from __future__ import annotations

import re
from pathlib import Path

from tests.support.wheel import metadata, names

ROOT = Path(__file__).resolve().parents[3]


def test_the_licence_and_notice_travel_with_the_wheel(wheel: Path) -> None:
    files = names(wheel)
    licences = [n for n in files if re.search(r"\.dist-info/licenses/(LICENSE|NOTICE)$", n)]
    assert sorted(n.rsplit("/", 1)[1] for n in licences) == ["LICENSE", "NOTICE"], files[-8:]
    text = (ROOT / "LICENSE").read_text()
    assert "Apache License" in text and "Version 2.0, January 2004" in text and "END OF TERMS AND CONDITIONS" in text
    assert metadata(wheel)["License-Expression"] == "Apache-2.0"


def test_classifiers_keywords_author_and_no_made_up_urls(wheel: Path) -> None:
    meta = metadata(wheel)
    classifiers = meta.get_all("Classifier") or []
    assert "Framework :: Apache Airflow :: Provider" in classifiers, classifiers
    assert any(c.startswith("Programming Language :: Python :: 3.") for c in classifiers), classifiers
    assert {"airflow", "spark", "failover"} <= set((meta["Keywords"] or "").split(",")), meta["Keywords"]
    assert meta["Author"] or meta["Author-email"], "no author"
    assert meta.get_all("Project-URL") is None, meta.get_all("Project-URL")  # no public repository yet


def test_the_long_description_is_for_users(wheel: Path) -> None:
    description = metadata(wheel).get_payload()
    assert isinstance(description, str)
    assert "./dev" not in description, "the contributor README (./dev demo) is not the index's description"
    assert re.search(r"\]\((?!https?://)[^)#]+\)", description) is None, "a relative link breaks on the index"
    assert "![" not in description, "an image the index cannot show"
    table = [line for line in description.splitlines() if line.startswith("|")]
    for needed in ("Python", "Apache Airflow", "PySpark", "Java"):
        assert any(needed in row for row in table), f"the requirements table has no {needed} row: {table}"
    assert "3.3" in next(row for row in table if "Apache Airflow" in row)
    assert "Changelog" in description or "changelog" in description


def test_no_dev_extra_is_published(wheel: Path) -> None:
    meta = metadata(wheel)
    assert "dev" not in (meta.get_all("Provides-Extra") or [])
    assert not [r for r in meta.get_all("Requires-Dist") or [] if "extra == 'dev'" in r]


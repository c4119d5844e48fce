"""``docs/performance.md`` and its records (``benchmarks/_record.py``, ``benchmarks/make_performance_page.py``): every
record in ``benchmarks/results/`` loads, a record file that breaks the schema is refused naming the file and the
field, the committed page is the one the records generate, the payback share is computed from the records, the
plots are drawn, and no current figure is repeated in the README."""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "benchmarks"))  # the scripts import their siblings

import make_performance_page as maker  # noqa: E402
from _record import RESULTS, RecordError, load, load_all  # noqa: E402


def records() -> dict[str, object]:
    return {r.id: r for r in load_all()}


def test_every_record_file_loads_and_names_a_script_and_a_note_that_exist() -> None:
    loaded = load_all()
    assert len(loaded) == len(list(RESULTS.glob("*.json"))) > 0
    for record in loaded:
        assert (ROOT / record.script).is_file(), f"{record.id}: no script {record.script}"
        assert record.note is None or (ROOT / record.note).is_file(), f"{record.id}: no note {record.note}"
        assert record.superseded_by is None or (RESULTS / f"{record.superseded_by}.json").is_file()
        assert re.fullmatch(r"\d{4}-\d{2}-\d{2}", record.date) and record.id.startswith(record.date)


def test_the_committed_page_is_the_one_the_records_generate() -> None:
    assert (ROOT / "docs" / "performance.md").read_text() == maker.page(records()), (
        "docs/performance.md disagrees with benchmarks/results/: run benchmarks/make_performance_page.py")


def test_the_payback_share_is_cost_over_saving_plus_cost_of_the_records_medians() -> None:
    by_size = {p.size: p for p in maker.paybacks(records())}  # type: ignore[arg-type]
    five = by_size["~5 GB"]
    assert (five.app_fail_s, five.ours_fail_s, five.ours_s, five.app_s) == pytest.approx(
        (289.303916, 176.751325, 157.848875, 140.075492))
    assert five.share == pytest.approx((157.848875 - 140.075492) / (289.303916 - 176.751325 + 157.848875 - 140.075492))
    one = by_size["~1 GB"]
    assert (one.app_fail_s, one.ours_fail_s, one.ours_s, one.app_s) == pytest.approx(
        (74.230558, 52.33582, 57.969287, 32.182017))
    assert one.share == pytest.approx((57.969287 - 32.182017) / (74.230558 - 52.33582 + 57.969287 - 32.182017))


def test_the_script_draws_both_plots_and_writes_the_page(tmp_path: Path) -> None:
    text = maker.make(RESULTS, tmp_path / "performance.md", tmp_path / "img")
    assert (tmp_path / "performance.md").read_text() == text
    for name in (maker.CHAOS_PNG, maker.SIZES_PNG):
        assert (tmp_path / "img" / name).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
        assert f"(img/{name})" in text
        assert (ROOT / "docs" / "img" / name).is_file(), f"docs/img/{name} is not committed"


def write(tmp_path: Path, data: dict[str, object], name: str = "2026-11-29-etl-compare-5gb") -> Path:
    path = tmp_path / f"{name}.json"
    path.write_text(json.dumps(data))
    return path


def good() -> dict[str, object]:
    data: dict[str, object] = json.loads((RESULTS / "2026-11-29-etl-compare-5gb.json").read_text())
    return data


def test_a_record_with_a_field_missing_or_unknown_is_refused_naming_the_file_and_field(tmp_path: Path) -> None:
    data = good()
    del data["load"]
    with pytest.raises(RecordError, match=r"2026-11-29-etl-compare-5gb\.json: missing field\(s\) \['load'\]"):
        load(write(tmp_path, data))
    data = good() | {"loadavg": "3"}
    with pytest.raises(RecordError, match=r"unknown field\(s\) \['loadavg'\]"):
        load(write(tmp_path, data))
    data = good()
    data["figures"][0]["low"] = 0.5  # type: ignore[index]
    with pytest.raises(RecordError, match=r"figures\[0\].*no low/high"):
        load(write(tmp_path, data))


def test_a_value_of_the_wrong_type_or_a_misnamed_file_is_refused(tmp_path: Path) -> None:
    data = good()
    data["rounds"][0]["values"]["ours_fail_s"] = "187.3"  # type: ignore[index]
    with pytest.raises(RecordError, match=r"rounds\[0\]\.values\.ours_fail_s: expected float"):
        load(write(tmp_path, data))
    with pytest.raises(RecordError, match="give both the same name"):
        load(write(tmp_path, good(), name="2026-11-29-other"))


def test_the_readmes_performance_paragraph_links_to_the_page_and_repeats_no_figure() -> None:
    readme = (ROOT / "README.md").read_text()
    paragraph = readme.split("## Performance, in one paragraph", 1)[1].split("\n## ", 1)[0]
    assert "docs/performance.md" in paragraph
    prose = re.sub(r"\[[^\]]*\]\([^)]*\)", "", paragraph)  # link targets and texts aside
    assert re.findall(r"\d", prose) == [], f"a figure in the README's performance paragraph: {prose.strip()}"
    bench = (ROOT / "benchmarks" / "README.md").read_text()
    for ratio in ("0.57", "0.61", "1.16", "1.24", "0.239"):  # the page's headline figures
        assert ratio not in bench, f"{ratio} is in benchmarks/README.md; the page is the one place for figures"
